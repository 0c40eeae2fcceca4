enum _PlaceholderAPNsHTTP2 {}
