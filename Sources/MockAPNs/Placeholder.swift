enum _PlaceholderMockAPNs {}
