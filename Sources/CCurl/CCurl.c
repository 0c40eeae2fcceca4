#include "CCurl.h"

#include <sys/socket.h>
#include <unistd.h>

static curl_socket_t pw_open_socket(void *clientp, curlsocktype purpose, struct curl_sockaddr *address) {
  (void)purpose;
  curl_socket_t sock = socket(address->family, address->socktype, address->protocol);
  if (sock != CURL_SOCKET_BAD) __atomic_fetch_add((long *)clientp, 1, __ATOMIC_RELAXED);
  return sock;
}

static int pw_close_socket(void *clientp, curl_socket_t sock) {
  __atomic_fetch_sub((long *)clientp, 1, __ATOMIC_RELAXED);
  return close(sock);
}

void pw_curl_count_sockets(CURL *handle, long *counter) {
  curl_easy_setopt(handle, CURLOPT_OPENSOCKETFUNCTION, pw_open_socket);
  curl_easy_setopt(handle, CURLOPT_OPENSOCKETDATA, counter);
  curl_easy_setopt(handle, CURLOPT_CLOSESOCKETFUNCTION, pw_close_socket);
  curl_easy_setopt(handle, CURLOPT_CLOSESOCKETDATA, counter);
}
