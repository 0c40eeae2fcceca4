#ifndef PUSHWORKER_CCURL_H
#define PUSHWORKER_CCURL_H

#include <curl/curl.h>

// curl_easy_setopt, curl_multi_setopt and curl_easy_getinfo are variadic, which Swift cannot
// call; these typed wrappers can be.

static inline CURLcode pw_curl_easy_setopt_long(CURL *handle, CURLoption option, long value) {
  return curl_easy_setopt(handle, option, value);
}

static inline CURLcode pw_curl_easy_setopt_pointer(CURL *handle, CURLoption option, const void *value) {
  return curl_easy_setopt(handle, option, value);
}

static inline CURLcode pw_curl_easy_setopt_off_t(CURL *handle, CURLoption option, curl_off_t value) {
  return curl_easy_setopt(handle, option, value);
}

typedef size_t (*pw_curl_data_callback)(char *buffer, size_t size, size_t count, void *userdata);

static inline CURLcode pw_curl_easy_setopt_callback(CURL *handle, CURLoption option, pw_curl_data_callback callback) {
  return curl_easy_setopt(handle, option, callback);
}

static inline CURLMcode pw_curl_multi_setopt_long(CURLM *multi, CURLMoption option, long value) {
  return curl_multi_setopt(multi, option, value);
}

static inline CURLcode pw_curl_easy_getinfo_long(CURL *handle, CURLINFO info, long *value) {
  return curl_easy_getinfo(handle, info, value);
}

static inline CURLcode pw_curl_easy_getinfo_pointer(CURL *handle, CURLINFO info, void **value) {
  return curl_easy_getinfo(handle, info, value);
}

/// Counts the connection's sockets in `*counter` (open: +1, closed: -1, atomically), so the
/// worker can report open APNs connections without a Swift callback on libcurl's thread.
/// libcurl copies these callbacks into the connection when it opens it, so the close is counted
/// even when it happens after the easy handle that opened it has gone.
void pw_curl_count_sockets(CURL *handle, long *counter);

static inline long pw_counter_load(const long *counter) {
  return __atomic_load_n(counter, __ATOMIC_RELAXED);
}

#endif
