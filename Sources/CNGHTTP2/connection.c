// The nghttp2 + OpenSSL connection engine behind CNGHTTP2.h. One thread per connection runs
// `run`: it owns the socket, the SSL object and the nghttp2 session; nothing else touches them.
#define _GNU_SOURCE
#include "CNGHTTP2.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <nghttp2/nghttp2.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/pkcs12.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum {
  MAX_REQUEST_HEADERS = 32,
  RESPONSE_BODY_LIMIT = 65536,
  OUTPUT_BATCH = 65536,
  INPUT_BUFFER = 16384,
  /// Finished requests kept for reuse by the I/O thread, at most.
  SPARE_REQUESTS = 1024,
};

/// One submitted batch: what its requests share (headers parsed once, the body or the bodies,
/// the paths and tags), in one allocation made by the submitting thread. Once queued, only the I/O thread
/// touches it; it is freed when its last request is.
typedef struct batch {
  struct batch *next_queued;
  int refs;
  size_t count;
  void *context;
  int64_t deadline;
  size_t nv_count;
  nghttp2_nv nv[MAX_REQUEST_HEADERS + 1];
  char content_length[24];
  /// One body for every request; or, with `body_ends`, request i's body is `body` from
  /// `body_ends[i - 1]` (0 for the first) to `body_ends[i]`.
  const unsigned char *body;
  size_t body_length;
  size_t *body_ends;
  const char *paths;
  uint32_t *tags;
  _Alignas(8) unsigned char storage[];
} batch;

typedef struct request request;
typedef struct request_list {
  request *head, *tail;
} request_list;

/// One request, made and freed (or kept for reuse) on the I/O thread only.
struct request {
  /// The pending queue (singly linked, FIFO).
  request *next_queued;
  /// `tracked` (in deadline order) or `cancelled`.
  request *prev, *next;
  request_list *list;
  void *context;
  uint32_t tag;
  int64_t deadline;
  int32_t stream_id;
  int completed;
  int status;
  char apns_id[64];
  char apns_unique_id[64];
  char apns_request_id[64];
  char retry_after[32];
  unsigned char *response;
  size_t response_length, response_capacity;
  /// Its path, in the batch.
  const char *path;
  size_t path_length;
  /// Its body, in the batch (the batch's one body, or its own).
  const unsigned char *body;
  size_t body_length;
  size_t body_sent;
  /// Its own content-length, when the batch's requests have bodies of their own.
  char content_length[24];
  size_t content_length_length;
  batch *batch;
};

struct pw_h2_conn {
  pw_h2_config config;
  char *strings;  // one block holding every string of `config`
  pthread_t thread;
  int thread_started;
  int event_fd;
  int epoll_fd;
  atomic_int open;
  atomic_uint_fast64_t pings_sent, pings_answered;

  pthread_mutex_t lock;  // guards `queue_*` and `closing`
  batch *queue_head, *queue_tail;
  int closing;

  // I/O thread only.
  int closing_seen;
  /// pw_h2_free was called from this thread's own completion: the thread frees `c` as it exits.
  int detached;
  int fd;
  SSL_CTX *ssl_context;
  SSL *ssl;
  nghttp2_session *session;
  request *pending_head, *pending_tail;
  request_list tracked, cancelled;
  /// Finished requests for reuse: a request costs no malloc and no cross-thread free.
  request *spare;
  size_t spare_count;
  uint32_t open_streams;
  int want_output_event;
  int ping_outstanding;
  int64_t ping_sent_at, last_received_at;
  unsigned char *output;
  size_t output_length, output_offset, output_capacity;
  unsigned char input[INPUT_BUFFER];
  /// read_input stopped for want of bytes: what OpenSSL holds is at most part of a record, which
  /// only the socket can complete (I/O thread only).
  int input_partial;
};

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

// MARK: - lists

static void list_append(request_list *list, request *r) {
  r->list = list;
  r->next = NULL;
  r->prev = list->tail;
  if (list->tail) list->tail->next = r; else list->head = r;
  list->tail = r;
}

static void list_remove(request *r) {
  request_list *list = r->list;
  if (!list) return;
  if (r->prev) r->prev->next = r->next; else list->head = r->next;
  if (r->next) r->next->prev = r->prev; else list->tail = r->prev;
  r->prev = r->next = NULL;
  r->list = NULL;
}

static void batch_release(batch *b) {
  if (--b->refs == 0) free(b);
}

static void request_free(pw_h2_conn *c, request *r) {
  list_remove(r);
  free(r->response);
  r->response = NULL;
  batch_release(r->batch);
  if (c->spare_count < SPARE_REQUESTS) {
    r->next_queued = c->spare;
    c->spare = r;
    c->spare_count++;
  } else {
    free(r);
  }
}

// MARK: - completion

static void complete(pw_h2_conn *c, request *r, int status, pw_h2_error error, int retry, const char *message) {
  if (r->completed) return;
  r->completed = 1;
  pw_h2_result result = {
      .status = status,
      .error = error,
      .retry = retry,
      .message = message ? message : "",
      .apns_id = r->apns_id[0] ? r->apns_id : NULL,
      .apns_unique_id = r->apns_unique_id[0] ? r->apns_unique_id : NULL,
      .apns_request_id = r->apns_request_id[0] ? r->apns_request_id : NULL,
      .retry_after = r->retry_after[0] ? r->retry_after : NULL,
      .body = r->response,
      .body_length = r->response_length,
  };
  c->config.completion(r->context, r->tag, &result);
}

/// Fails every request not yet sent (a connection attempt failed): they would only wait for the
/// next attempt, which the caller decides on.
static void fail_pending(pw_h2_conn *c, pw_h2_error error, int retry, const char *message) {
  while (c->pending_head) {
    request *r = c->pending_head;
    c->pending_head = r->next_queued;
    complete(c, r, 0, error, retry, message);
    request_free(c, r);
  }
  c->pending_tail = NULL;
}

// MARK: - nghttp2 callbacks

static int on_header(nghttp2_session *session, const nghttp2_frame *frame, const uint8_t *name, size_t name_length,
                     const uint8_t *value, size_t value_length, uint8_t flags, void *user_data) {
  (void)flags;
  (void)user_data;
  if (frame->hd.type != NGHTTP2_HEADERS) return 0;
  request *r = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
  if (!r) return 0;
  char *target = NULL;
  if (name_length == 7 && memcmp(name, ":status", 7) == 0) {
    int status = 0;
    for (size_t i = 0; i < value_length && i < 3; i++) status = status * 10 + (value[i] - '0');
    r->status = status;
  } else if (name_length == 7 && memcmp(name, "apns-id", 7) == 0) {
    target = r->apns_id;
  } else if (name_length == 14 && memcmp(name, "apns-unique-id", 14) == 0) {
    target = r->apns_unique_id;
  } else if (name_length == 15 && memcmp(name, "apns-request-id", 15) == 0) {
    target = r->apns_request_id;
  } else if (name_length == 11 && memcmp(name, "retry-after", 11) == 0) {
    size_t n = value_length < sizeof r->retry_after - 1 ? value_length : sizeof r->retry_after - 1;
    memcpy(r->retry_after, value, n);
    r->retry_after[n] = 0;
  }
  if (target) {
    size_t n = value_length < 63 ? value_length : 63;
    memcpy(target, value, n);
    target[n] = 0;
  }
  return 0;
}

static int on_data_chunk(nghttp2_session *session, uint8_t flags, int32_t stream_id, const uint8_t *data, size_t length,
                         void *user_data) {
  (void)flags;
  (void)user_data;
  request *r = nghttp2_session_get_stream_user_data(session, stream_id);
  if (!r || r->response_length >= RESPONSE_BODY_LIMIT) return 0;  // APNs' bodies are a few dozen bytes
  if (length > RESPONSE_BODY_LIMIT - r->response_length) length = RESPONSE_BODY_LIMIT - r->response_length;
  if (r->response_length + length > r->response_capacity) {
    size_t capacity = r->response_capacity ? r->response_capacity * 2 : 256;
    while (capacity < r->response_length + length) capacity *= 2;
    unsigned char *grown = realloc(r->response, capacity);
    if (!grown) return NGHTTP2_ERR_CALLBACK_FAILURE;
    r->response = grown;
    r->response_capacity = capacity;
  }
  memcpy(r->response + r->response_length, data, length);
  r->response_length += length;
  return 0;
}

static int on_stream_close(nghttp2_session *session, int32_t stream_id, uint32_t error_code, void *user_data) {
  pw_h2_conn *c = user_data;
  request *r = nghttp2_session_get_stream_user_data(session, stream_id);
  if (!r) return 0;
  c->open_streams--;
  if (error_code == NGHTTP2_NO_ERROR && r->status > 0) {
    complete(c, r, r->status, PW_H2_OK, 0, NULL);
  } else if (error_code == NGHTTP2_REFUSED_STREAM) {
    complete(c, r, 0, PW_H2_ERR_STREAM, 1, "the server refused the stream before processing it (REFUSED_STREAM or GOAWAY)");
  } else {
    char message[160];
    snprintf(message, sizeof message, "the server reset the stream (%s)", nghttp2_http2_strerror(error_code));
    complete(c, r, 0, PW_H2_ERR_STREAM, 1, message);
  }
  request_free(c, r);
  return 0;
}

static int on_frame_recv(nghttp2_session *session, const nghttp2_frame *frame, void *user_data) {
  (void)session;
  pw_h2_conn *c = user_data;
  if (frame->hd.type == NGHTTP2_PING && (frame->hd.flags & NGHTTP2_FLAG_ACK)) {
    c->ping_outstanding = 0;
    atomic_fetch_add_explicit(&c->pings_answered, 1, memory_order_relaxed);
  }
  return 0;
}

/// A request whose HEADERS could not be sent (the session was going away): nghttp2 never opened
/// its stream, so no close callback will come; complete it here.
static int on_frame_not_send(nghttp2_session *session, const nghttp2_frame *frame, int error, void *user_data) {
  pw_h2_conn *c = user_data;
  if (frame->hd.type != NGHTTP2_HEADERS || nghttp2_session_get_stream_user_data(session, frame->hd.stream_id)) return 0;
  for (request *r = c->tracked.head; r; r = r->next) {
    if (r->stream_id != frame->hd.stream_id) continue;
    c->open_streams--;
    complete(c, r, 0, PW_H2_ERR_STREAM, 1, nghttp2_strerror(error));
    request_free(c, r);
    return 0;
  }
  for (request *r = c->cancelled.head; r; r = r->next) {
    if (r->stream_id != frame->hd.stream_id) continue;
    c->open_streams--;
    request_free(c, r);
    return 0;
  }
  return 0;
}

static ssize_t read_body(nghttp2_session *session, int32_t stream_id, uint8_t *buffer, size_t length, uint32_t *flags,
                         nghttp2_data_source *source, void *user_data) {
  (void)session;
  (void)stream_id;
  (void)user_data;
  request *r = source->ptr;
  size_t n = r->body_length - r->body_sent;
  if (n > length) n = length;
  memcpy(buffer, r->body + r->body_sent, n);
  r->body_sent += n;
  if (r->body_sent == r->body_length) *flags |= NGHTTP2_DATA_FLAG_EOF;
  return (ssize_t)n;
}

// MARK: - connecting

static void ssl_error_text(char *message, size_t length, const char *prefix) {
  unsigned long code = ERR_get_error();
  char reason[256] = "no detail from OpenSSL";
  if (code) ERR_error_string_n(code, reason, sizeof reason);
  ERR_clear_error();
  snprintf(message, length, "%s: %s", prefix, reason);
}

static int wait_for(int fd, short events, int64_t deadline) {
  for (;;) {
    int64_t left = deadline - now_ms();
    if (left <= 0) return 0;
    struct pollfd p = {.fd = fd, .events = events};
    int n = poll(&p, 1, (int)left);
    if (n > 0) return 1;
    if (n < 0 && errno != EINTR) return -1;
  }
}

static int open_socket(pw_h2_conn *c, const char *host, int port, int64_t deadline, char *message, size_t length) {
  char service[16];
  snprintf(service, sizeof service, "%d", port);
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV};
  struct addrinfo *addresses = NULL;
  int rv = getaddrinfo(host, service, &hints, &addresses);
  if (rv != 0) {
    snprintf(message, length, "cannot resolve %s: %s", host, gai_strerror(rv));
    return -1;
  }
  int fd = -1;
  snprintf(message, length, "cannot connect to %s port %d", host, port);
  for (struct addrinfo *a = addresses; a && fd < 0; a = a->ai_next) {
    int s = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (s < 0) continue;
    atomic_fetch_add(&c->open, 1);
    int one = 1;
    setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(s, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
    int error = 0;
    if (connect(s, a->ai_addr, a->ai_addrlen) != 0) {
      if (errno != EINPROGRESS) {
        error = errno;
      } else {
        int ready = wait_for(s, POLLOUT, deadline);
        socklen_t size = sizeof error;
        if (ready == 0) error = ETIMEDOUT;
        else if (ready < 0 || getsockopt(s, SOL_SOCKET, SO_ERROR, &error, &size) != 0) error = errno;
      }
    }
    if (error) {
      snprintf(message, length, "cannot connect to %s port %d: %s", host, port,
               error == ETIMEDOUT ? "no answer within the connect timeout" : strerror(error));
      close(s);
      atomic_fetch_sub(&c->open, 1);
      if (error == ETIMEDOUT) break;
      continue;
    }
    fd = s;
  }
  freeaddrinfo(addresses);
  return fd;
}

static void host_port(char *out, size_t length, const char *host, int port) {
  snprintf(out, length, strchr(host, ':') ? "[%s]:%d" : "%s:%d", host, port);
}

/// Opens the CONNECT tunnel; on return 0 the socket carries bytes to APNs.
static int proxy_tunnel(pw_h2_conn *c, int fd, int64_t deadline, char *message, size_t length) {
  char target[300], request_text[1200];
  host_port(target, sizeof target, c->config.host, c->config.port);
  int n = snprintf(request_text, sizeof request_text, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n%s%s%sProxy-Connection: Keep-Alive\r\n\r\n",
                   target, target, c->config.proxy_authorization ? "Proxy-Authorization: " : "",
                   c->config.proxy_authorization ? c->config.proxy_authorization : "", c->config.proxy_authorization ? "\r\n" : "");
  if (n <= 0 || (size_t)n >= sizeof request_text) {
    snprintf(message, length, "the CONNECT request to the proxy is too long");
    return -1;
  }
  for (int sent = 0; sent < n;) {
    ssize_t w = send(fd, request_text + sent, (size_t)(n - sent), MSG_NOSIGNAL);
    if (w > 0) { sent += (int)w; continue; }
    if (w < 0 && (errno == EAGAIN || errno == EINTR) && wait_for(fd, POLLOUT, deadline) > 0) continue;
    snprintf(message, length, "the proxy %s:%d closed the connection: %s", c->config.proxy_host, c->config.proxy_port, strerror(errno));
    return -1;
  }
  // The server speaks only after our ClientHello, so whatever arrives now is the proxy's answer.
  char answer[4096];
  size_t got = 0;
  for (;;) {
    ssize_t r = recv(fd, answer + got, sizeof answer - 1 - got, 0);
    if (r > 0) {
      got += (size_t)r;
      answer[got] = 0;
      if (strstr(answer, "\r\n\r\n")) break;
      if (got == sizeof answer - 1) break;
      continue;
    }
    if (r < 0 && (errno == EAGAIN || errno == EINTR)) {
      int ready = wait_for(fd, POLLIN, deadline);
      if (ready > 0) continue;
      snprintf(message, length, "no answer from the proxy %s:%d to CONNECT", c->config.proxy_host, c->config.proxy_port);
      return -1;
    }
    snprintf(message, length, "the proxy %s:%d closed the connection during CONNECT", c->config.proxy_host, c->config.proxy_port);
    return -1;
  }
  int status = 0;
  if (sscanf(answer, "HTTP/1.%*d %d", &status) != 1 || status != 200) {
    char *end = strstr(answer, "\r\n");
    if (end) *end = 0;
    snprintf(message, length, "the proxy %s:%d refused the tunnel to %s: %.200s", c->config.proxy_host, c->config.proxy_port, target,
             answer);
    return -1;
  }
  return 0;
}

static pw_h2_error load_credentials(pw_h2_conn *c, SSL_CTX *context, char *message, size_t length) {
  const pw_h2_config *config = &c->config;
  if (config->ca_file) {
    if (SSL_CTX_load_verify_locations(context, config->ca_file, NULL) != 1) {
      ssl_error_text(message, length, "cannot load the CA file");
      return PW_H2_ERR_VERIFY;
    }
  } else if (SSL_CTX_set_default_verify_paths(context) != 1) {
    ssl_error_text(message, length, "cannot load the system's CA certificates");
    return PW_H2_ERR_VERIFY;
  }
  if (!config->certificate_file) return PW_H2_OK;
  if (config->certificate_is_p12) {
    FILE *file = fopen(config->certificate_file, "rb");
    if (!file) {
      snprintf(message, length, "cannot read the certificate file %s: %s", config->certificate_file, strerror(errno));
      return PW_H2_ERR_CREDENTIALS;
    }
    PKCS12 *p12 = d2i_PKCS12_fp(file, NULL);
    fclose(file);
    EVP_PKEY *key = NULL;
    X509 *certificate = NULL;
    STACK_OF(X509) *chain = NULL;
    int parsed = p12 && PKCS12_parse(p12, config->password ? config->password : "", &key, &certificate, &chain);
    PKCS12_free(p12);
    pw_h2_error result = PW_H2_OK;
    if (!parsed || !key || !certificate) {
      ssl_error_text(message, length, "cannot open the PKCS#12 certificate (wrong password or not a .p12 file)");
      result = PW_H2_ERR_CREDENTIALS;
    } else if (SSL_CTX_use_certificate(context, certificate) != 1 || SSL_CTX_use_PrivateKey(context, key) != 1) {
      ssl_error_text(message, length, "cannot use the certificate and key of the PKCS#12 file");
      result = PW_H2_ERR_CREDENTIALS;
    } else {
      for (int i = 0; chain && i < sk_X509_num(chain); i++) SSL_CTX_add1_chain_cert(context, sk_X509_value(chain, i));
    }
    EVP_PKEY_free(key);
    X509_free(certificate);
    sk_X509_pop_free(chain, X509_free);
    return result;
  }
  // PEM: OpenSSL's default password callback reads the password from the userdata.
  SSL_CTX_set_default_passwd_cb_userdata(context, (void *)(config->password ? config->password : ""));
  if (SSL_CTX_use_certificate_chain_file(context, config->certificate_file) != 1) {
    ssl_error_text(message, length, "cannot use the certificate file");
    return PW_H2_ERR_CREDENTIALS;
  }
  const char *key_file = config->key_file ? config->key_file : config->certificate_file;
  if (SSL_CTX_use_PrivateKey_file(context, key_file, SSL_FILETYPE_PEM) != 1 || SSL_CTX_check_private_key(context) != 1) {
    ssl_error_text(message, length, "cannot use the private key (wrong password, or not the certificate's key)");
    return PW_H2_ERR_CREDENTIALS;
  }
  return PW_H2_OK;
}

static void close_transport(pw_h2_conn *c) {
  if (c->session) {
    nghttp2_session_del(c->session);
    c->session = NULL;
  }
  if (c->ssl) {
    SSL_free(c->ssl);
    c->ssl = NULL;
  }
  c->input_partial = 0;
  if (c->ssl_context) {
    SSL_CTX_free(c->ssl_context);
    c->ssl_context = NULL;
  }
  if (c->fd >= 0) {
    epoll_ctl(c->epoll_fd, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    c->fd = -1;
    atomic_fetch_sub(&c->open, 1);
  }
  c->output_length = c->output_offset = 0;
  c->open_streams = 0;
  c->ping_outstanding = 0;
  c->want_output_event = 0;
}

/// Connects, tunnels, handshakes and starts the HTTP/2 session. On failure fails the pending
/// requests with the reason and leaves the connection closed.
static void connect_now(pw_h2_conn *c) {
  char message[512] = "";
  pw_h2_error error = PW_H2_ERR_CONNECT;
  int retry = 1;
  int64_t deadline = now_ms() + c->config.connect_timeout_ms;
  const char *socket_host = c->config.proxy_host ? c->config.proxy_host : c->config.host;
  int socket_port = c->config.proxy_host ? c->config.proxy_port : c->config.port;
  c->fd = open_socket(c, socket_host, socket_port, deadline, message, sizeof message);
  if (c->fd < 0) goto failed;
  if (c->config.proxy_host && proxy_tunnel(c, c->fd, deadline, message, sizeof message) != 0) {
    error = PW_H2_ERR_PROXY;
    goto failed;
  }

  c->ssl_context = SSL_CTX_new(TLS_client_method());
  if (!c->ssl_context) {
    ssl_error_text(message, sizeof message, "cannot create a TLS context");
    error = PW_H2_ERR_TLS;
    goto failed;
  }
  SSL_CTX_set_min_proto_version(c->ssl_context, TLS1_2_VERSION);
  SSL_CTX_set_verify(c->ssl_context, SSL_VERIFY_PEER, NULL);
  // The record buffers are kept (no SSL_MODE_RELEASE_BUFFERS): releasing them cost a 16 KiB
  // malloc and free per read and per write, for ~34 KiB a connection. Read-ahead takes all the
  // socket holds in one read, so read_input stops once OpenSSL has nothing buffered instead of
  // reading again to find the socket empty.
  SSL_CTX_set_mode(c->ssl_context, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  SSL_CTX_set_read_ahead(c->ssl_context, 1);
  static const unsigned char alpn[] = {2, 'h', '2'};
  SSL_CTX_set_alpn_protos(c->ssl_context, alpn, sizeof alpn);
  error = load_credentials(c, c->ssl_context, message, sizeof message);
  if (error != PW_H2_OK) {
    retry = 0;
    goto failed;
  }
  c->ssl = SSL_new(c->ssl_context);
  if (!c->ssl) {
    ssl_error_text(message, sizeof message, "cannot create a TLS session");
    error = PW_H2_ERR_TLS;
    goto failed;
  }
  SSL_set_fd(c->ssl, c->fd);
  unsigned char address[16];
  if (inet_pton(AF_INET, c->config.host, address) == 1 || inet_pton(AF_INET6, c->config.host, address) == 1) {
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(c->ssl), c->config.host);
  } else {
    SSL_set_tlsext_host_name(c->ssl, c->config.host);
    SSL_set1_host(c->ssl, c->config.host);
  }
  for (;;) {
    int rv = SSL_connect(c->ssl);
    if (rv == 1) break;
    int reason = SSL_get_error(c->ssl, rv);
    int ready = -1;
    if (reason == SSL_ERROR_WANT_READ) ready = wait_for(c->fd, POLLIN, deadline);
    else if (reason == SSL_ERROR_WANT_WRITE) ready = wait_for(c->fd, POLLOUT, deadline);
    if (ready > 0) continue;
    long verify = SSL_get_verify_result(c->ssl);
    if (ready == 0) {
      snprintf(message, sizeof message, "no TLS handshake with %s within the connect timeout", c->config.host);
      error = PW_H2_ERR_CONNECT;
    } else if (verify != X509_V_OK) {
      snprintf(message, sizeof message, "%s", X509_verify_cert_error_string(verify));
      error = PW_H2_ERR_VERIFY;
      retry = 0;
    } else {
      ssl_error_text(message, sizeof message, "TLS handshake failed");
      error = PW_H2_ERR_TLS;
    }
    goto failed;
  }
  const unsigned char *selected = NULL;
  unsigned selected_length = 0;
  SSL_get0_alpn_selected(c->ssl, &selected, &selected_length);
  if (selected_length != 2 || memcmp(selected, "h2", 2) != 0) {
    snprintf(message, sizeof message, "the server did not negotiate HTTP/2 (ALPN h2)");
    error = PW_H2_ERR_ALPN;
    retry = 0;
    goto failed;
  }

  nghttp2_session_callbacks *callbacks;
  nghttp2_session_callbacks_new(&callbacks);
  nghttp2_session_callbacks_set_on_header_callback(callbacks, on_header);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, on_data_chunk);
  nghttp2_session_callbacks_set_on_stream_close_callback(callbacks, on_stream_close);
  nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, on_frame_recv);
  nghttp2_session_callbacks_set_on_frame_not_send_callback(callbacks, on_frame_not_send);
  nghttp2_option *options;
  nghttp2_option_new(&options);
  // One stream until the server's SETTINGS say how many: APNs allows one until it has accepted
  // a request, and a client that opens more before reading that frame breaks the limit.
  nghttp2_option_set_peer_max_concurrent_streams(options, 1);
  int rv = nghttp2_session_client_new2(&c->session, callbacks, c, options);
  nghttp2_option_del(options);
  nghttp2_session_callbacks_del(callbacks);
  if (rv != 0) {
    snprintf(message, sizeof message, "cannot create the HTTP/2 session: %s", nghttp2_strerror(rv));
    error = PW_H2_ERR_CONNECTION;
    goto failed;
  }
  nghttp2_settings_entry settings[] = {{NGHTTP2_SETTINGS_ENABLE_PUSH, 0}, {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, 100}};
  nghttp2_submit_settings(c->session, NGHTTP2_FLAG_NONE, settings, 2);
  struct epoll_event event = {.events = EPOLLIN, .data.u32 = 1};
  epoll_ctl(c->epoll_fd, EPOLL_CTL_ADD, c->fd, &event);
  c->last_received_at = now_ms();
  return;

failed:
  close_transport(c);
  fail_pending(c, error, retry, message);
}

/// Fails the requests on the connection (they may be sent again: the server did not answer)
/// and closes it. Requests not yet sent stay queued for the next connection.
static void drop_connection(pw_h2_conn *c, const char *message) {
  if (c->session) {
    nghttp2_session_del(c->session);
    c->session = NULL;
  }
  for (request *r = c->tracked.head, *next; r; r = next) {
    next = r->next;
    if (r->stream_id == 0) continue;
    complete(c, r, 0, PW_H2_ERR_CONNECTION, 1, message);
    request_free(c, r);
  }
  while (c->cancelled.head) request_free(c, c->cancelled.head);
  close_transport(c);
}

// MARK: - I/O

static void set_output_event(pw_h2_conn *c, int wanted) {
  if (c->want_output_event == wanted || c->fd < 0) return;
  c->want_output_event = wanted;
  struct epoll_event event = {.events = EPOLLIN | (wanted ? EPOLLOUT : 0), .data.u32 = 1};
  epoll_ctl(c->epoll_fd, EPOLL_CTL_MOD, c->fd, &event);
}

static int transport_failure(pw_h2_conn *c, int rv, char *message, size_t length) {
  int reason = SSL_get_error(c->ssl, rv);
  if (reason == SSL_ERROR_ZERO_RETURN) snprintf(message, length, "the server closed the connection");
  else if (reason == SSL_ERROR_SYSCALL) snprintf(message, length, "the connection broke: %s", errno ? strerror(errno) : "closed");
  else ssl_error_text(message, length, "TLS error");
  return -1;
}

/// Reads and feeds nghttp2 until the socket has nothing more; -1 (with the reason) when the
/// connection is gone. Responses complete their requests from inside nghttp2_session_mem_recv.
static int read_input(pw_h2_conn *c, char *message, size_t length) {
  for (;;) {
    ERR_clear_error();
    errno = 0;
    int n = SSL_read(c->ssl, c->input, sizeof c->input);
    if (n > 0) {
      c->last_received_at = now_ms();
      ssize_t rv = nghttp2_session_mem_recv(c->session, c->input, (size_t)n);
      if (rv < 0) {
        snprintf(message, length, "HTTP/2 error: %s", nghttp2_strerror((int)rv));
        return -1;
      }
      // All that was read is taken (read-ahead): what the socket still holds, or gets, wakes the
      // next epoll_wait (level-triggered) rather than costing a read that finds nothing now.
      if (!SSL_has_pending(c->ssl)) return 0;
      continue;
    }
    int reason = SSL_get_error(c->ssl, n);
    if (reason == SSL_ERROR_WANT_READ) {
      c->input_partial = 1;
      return 0;
    }
    if (reason == SSL_ERROR_WANT_WRITE) {
      // OpenSSL must write before it reads on (a key update under back-pressure): wake on writable.
      c->input_partial = 0;
      set_output_event(c, 1);
      return 0;
    }
    return transport_failure(c, n, message, length);
  }
}

/// Serialises what nghttp2 has queued (many frames per write) and writes it; -1 when the
/// connection is gone.
static int write_output(pw_h2_conn *c, char *message, size_t length) {
  for (;;) {
    while (c->output_offset < c->output_length) {
      ERR_clear_error();
      errno = 0;
      int n = SSL_write(c->ssl, c->output + c->output_offset, (int)(c->output_length - c->output_offset));
      if (n > 0) {
        c->output_offset += (size_t)n;
        continue;
      }
      int reason = SSL_get_error(c->ssl, n);
      if (reason == SSL_ERROR_WANT_WRITE || reason == SSL_ERROR_WANT_READ) {
        set_output_event(c, 1);
        return 0;
      }
      return transport_failure(c, n, message, length);
    }
    c->output_offset = c->output_length = 0;
    while (c->output_length < OUTPUT_BATCH) {
      const uint8_t *data;
      ssize_t n = nghttp2_session_mem_send(c->session, &data);
      if (n < 0) {
        snprintf(message, length, "HTTP/2 error: %s", nghttp2_strerror((int)n));
        return -1;
      }
      if (n == 0) break;
      if (c->output_length + (size_t)n > c->output_capacity) {
        size_t capacity = c->output_capacity ? c->output_capacity : OUTPUT_BATCH;
        while (capacity < c->output_length + (size_t)n) capacity *= 2;
        unsigned char *grown = realloc(c->output, capacity);
        if (!grown) {
          snprintf(message, length, "out of memory");
          return -1;
        }
        c->output = grown;
        c->output_capacity = capacity;
      }
      memcpy(c->output + c->output_length, data, (size_t)n);
      c->output_length += (size_t)n;
    }
    if (c->output_length == 0) {
      set_output_event(c, 0);
      return 0;
    }
  }
}

/// Makes a request of each path of the batches queued since the last look (spare ones first).
static void take_submissions(pw_h2_conn *c) {
  pthread_mutex_lock(&c->lock);
  batch *head = c->queue_head;
  c->queue_head = c->queue_tail = NULL;
  c->closing_seen = c->closing;
  pthread_mutex_unlock(&c->lock);
  while (head) {
    batch *b = head;
    head = b->next_queued;
    const char *path = b->paths;
    for (size_t i = 0; i < b->count; i++) {
      size_t path_length = strlen(path);
      request *r = c->spare;
      if (r) {
        c->spare = r->next_queued;
        c->spare_count--;
      } else {
        r = malloc(sizeof *r);
      }
      if (!r) {
        request failed = {.context = b->context, .tag = b->tags[i]};
        complete(c, &failed, 0, PW_H2_ERR_CONNECTION, 1, "out of memory");
        batch_release(b);
        path += path_length + 1;
        continue;
      }
      memset(r, 0, sizeof *r);
      r->batch = b;
      r->context = b->context;
      r->tag = b->tags[i];
      r->deadline = b->deadline;
      r->path = path;
      r->path_length = path_length;
      if (b->body_ends) {
        size_t start = i == 0 ? 0 : b->body_ends[i - 1];
        r->body = b->body + start;
        r->body_length = b->body_ends[i] - start;
        int n = snprintf(r->content_length, sizeof r->content_length, "%zu", r->body_length);
        r->content_length_length = (size_t)n;
      } else {
        r->body = b->body;
        r->body_length = b->body_length;
      }
      list_append(&c->tracked, r);
      if (c->pending_tail) c->pending_tail->next_queued = r; else c->pending_head = r;
      c->pending_tail = r;
      path += path_length + 1;
    }
  }
}

/// Drops requests that completed (timed out) while waiting to be sent.
static void skip_completed_pending(pw_h2_conn *c) {
  while (c->pending_head && c->pending_head->completed) {
    request *r = c->pending_head;
    c->pending_head = r->next_queued;
    request_free(c, r);
  }
  if (!c->pending_head) c->pending_tail = NULL;
}

static void submit_pending(pw_h2_conn *c) {
  uint32_t limit = nghttp2_session_get_remote_settings(c->session, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS);
  if (limit > c->config.max_concurrent_streams) limit = c->config.max_concurrent_streams;
  // After GOAWAY (check_request_allowed is 0) nothing new may start here; the requests wait
  // for the next connection.
  while (c->pending_head && c->open_streams < limit && nghttp2_session_check_request_allowed(c->session)) {
    skip_completed_pending(c);
    request *r = c->pending_head;
    if (!r) break;
    c->pending_head = r->next_queued;
    if (!c->pending_head) c->pending_tail = NULL;
    r->next_queued = NULL;

    nghttp2_nv headers[4 + MAX_REQUEST_HEADERS + 1];
    size_t count = 0;
    uint8_t flags = NGHTTP2_NV_FLAG_NO_COPY_NAME | NGHTTP2_NV_FLAG_NO_COPY_VALUE;
#define PW_NV(n, nl, v, vl) headers[count++] = (nghttp2_nv){(uint8_t *)(n), (uint8_t *)(v), (nl), (vl), flags}
    PW_NV(":method", 7, "POST", 4);
    PW_NV(":scheme", 7, "https", 5);
    PW_NV(":authority", 10, c->config.authority, strlen(c->config.authority));
    PW_NV(":path", 5, r->path, r->path_length);
#undef PW_NV
    // The batch's own headers, parsed once at submit (content-length last).
    memcpy(headers + count, r->batch->nv, r->batch->nv_count * sizeof *headers);
    count += r->batch->nv_count;
    if (r->content_length_length) {
      headers[count - 1].value = (uint8_t *)r->content_length;
      headers[count - 1].valuelen = r->content_length_length;
    }
    nghttp2_data_provider body = {.source.ptr = r, .read_callback = read_body};
    int32_t stream_id = nghttp2_submit_request(c->session, NULL, headers, count, &body, r);
    if (stream_id < 0) {
      complete(c, r, 0, PW_H2_ERR_CONNECTION, 1, nghttp2_strerror(stream_id));
      request_free(c, r);
      continue;
    }
    r->stream_id = stream_id;
    c->open_streams++;
  }
}

/// Times out requests past their deadline (the list is in deadline order: one timeout for all).
static void expire(pw_h2_conn *c, int64_t now) {
  while (c->tracked.head && c->tracked.head->deadline <= now) {
    request *r = c->tracked.head;
    list_remove(r);
    char message[96];
    snprintf(message, sizeof message, "no answer within %d ms", c->config.request_timeout_ms);
    complete(c, r, 0, PW_H2_ERR_TIMEOUT, 0, message);
    if (r->stream_id > 0 && c->session) {
      // nghttp2 still refers to it: it is freed when its stream closes.
      nghttp2_submit_rst_stream(c->session, NGHTTP2_FLAG_NONE, r->stream_id, NGHTTP2_CANCEL);
      list_append(&c->cancelled, r);
    }
    // Not sent yet: it stays in the pending queue, marked completed, and is freed there.
  }
}

/// PING after `ping_interval_ms` without a frame from the server; give up the connection when
/// the answer is later than `ping_timeout_ms`. Returns -1 when the connection is dead.
static int keepalive(pw_h2_conn *c, int64_t now, char *message, size_t length) {
  if (!c->session || c->config.ping_interval_ms <= 0) return 0;
  if (c->ping_outstanding) {
    if (now - c->ping_sent_at < c->config.ping_timeout_ms) return 0;
    snprintf(message, length, "no answer to a PING within %d ms: the connection is dead", c->config.ping_timeout_ms);
    return -1;
  }
  if (now - c->last_received_at < c->config.ping_interval_ms) return 0;
  if (nghttp2_submit_ping(c->session, NGHTTP2_FLAG_NONE, NULL) == 0) {
    c->ping_outstanding = 1;
    c->ping_sent_at = now;
    atomic_fetch_add_explicit(&c->pings_sent, 1, memory_order_relaxed);
  }
  return 0;
}

static int next_wait_ms(pw_h2_conn *c, int64_t now) {
  if (!c->session && c->pending_head) return 0;
  int64_t next = now + 60000;
  if (c->tracked.head && c->tracked.head->deadline < next) next = c->tracked.head->deadline;
  if (c->session && c->config.ping_interval_ms > 0) {
    int64_t ping = c->ping_outstanding ? c->ping_sent_at + c->config.ping_timeout_ms : c->last_received_at + c->config.ping_interval_ms;
    if (ping < next) next = ping;
  }
  return next <= now ? 0 : (int)(next - now);
}

static void free_connection(pw_h2_conn *c) {
  while (c->spare) {
    request *next = c->spare->next_queued;
    free(c->spare);
    c->spare = next;
  }
  close(c->event_fd);
  close(c->epoll_fd);
  pthread_mutex_destroy(&c->lock);
  free(c->output);
  free(c->strings);
  free(c);
}

static void *run(void *argument) {
  pw_h2_conn *c = argument;
  // SSL_write on a socket the server closed raises SIGPIPE in this thread; it must not kill the
  // process. Blocked here, it stays pending on this thread and dies with it.
  sigset_t pipe_signal;
  sigemptyset(&pipe_signal);
  sigaddset(&pipe_signal, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_signal, NULL);
  char message[512];
  for (;;) {
    struct epoll_event events[4];
    // Whole records OpenSSL read ahead (with the handshake, say) are not the socket's any more:
    // epoll would not tell of them, so they are read without waiting. Part of a record is not
    // (SSL_has_pending counts it too): the socket brings the rest, and reading for it at once
    // would spin.
    int buffered = c->session && c->ssl && !c->input_partial && SSL_has_pending(c->ssl);
    int n = epoll_wait(c->epoll_fd, events, 4, buffered ? 0 : next_wait_ms(c, now_ms()));
    int readable = buffered;
    for (int i = 0; i < n; i++) {
      if (events[i].data.u32 == 0) {
        uint64_t value;
        ssize_t ignored = read(c->event_fd, &value, sizeof value);
        (void)ignored;
      } else if (events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
        readable = 1;
      }
    }
    take_submissions(c);
    if (c->session && readable && read_input(c, message, sizeof message) < 0) drop_connection(c, message);
    skip_completed_pending(c);
    if (!c->session && c->pending_head) connect_now(c);
    if (c->session) submit_pending(c);
    int64_t now = now_ms();
    expire(c, now);
    if (keepalive(c, now, message, sizeof message) < 0) drop_connection(c, message);
    if (c->session && write_output(c, message, sizeof message) < 0) drop_connection(c, message);
    // After a GOAWAY (either way) with its streams done, nghttp2 wants nothing more: close, and
    // let the next request open a new connection.
    if (c->session && !nghttp2_session_want_read(c->session) && !nghttp2_session_want_write(c->session)) {
      drop_connection(c, "the server ended the connection (GOAWAY)");
    }
    skip_completed_pending(c);
    if (c->closing_seen && !c->tracked.head && !c->cancelled.head && !c->pending_head) break;
  }
  drop_connection(c, "shut down");
  if (c->detached) free_connection(c);
  // This thread's OpenSSL state (its random generators, its error queue) goes with it: without
  // this call LeakSanitizer saw it outlive every engine thread that had opened a TLS session.
  OPENSSL_thread_stop();
  return NULL;
}

// MARK: - public API

static char *copy_string(char **cursor, const char *text) {
  if (!text) return NULL;
  size_t length = strlen(text) + 1;
  memcpy(*cursor, text, length);
  char *copy = *cursor;
  *cursor += length;
  return copy;
}

pw_h2_conn *pw_h2_start(const pw_h2_config *config, char *error, size_t error_length) {
  pw_h2_conn *c = calloc(1, sizeof *c);
  if (!c) {
    snprintf(error, error_length, "out of memory");
    return NULL;
  }
  const char *strings[] = {config->host, config->authority, config->proxy_host, config->proxy_authorization, config->ca_file,
                           config->certificate_file, config->key_file, config->password};
  size_t total = 0;
  for (size_t i = 0; i < sizeof strings / sizeof *strings; i++) total += strings[i] ? strlen(strings[i]) + 1 : 0;
  c->strings = malloc(total + 1);
  char *cursor = c->strings;
  c->config = *config;
  c->config.host = copy_string(&cursor, config->host);
  c->config.authority = copy_string(&cursor, config->authority);
  c->config.proxy_host = copy_string(&cursor, config->proxy_host);
  c->config.proxy_authorization = copy_string(&cursor, config->proxy_authorization);
  c->config.ca_file = copy_string(&cursor, config->ca_file);
  c->config.certificate_file = copy_string(&cursor, config->certificate_file);
  c->config.key_file = copy_string(&cursor, config->key_file);
  c->config.password = copy_string(&cursor, config->password);
  if (c->config.max_concurrent_streams == 0) c->config.max_concurrent_streams = 1;
  c->fd = -1;
  pthread_mutex_init(&c->lock, NULL);
  c->event_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  c->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
  if (c->event_fd < 0 || c->epoll_fd < 0) {
    snprintf(error, error_length, "cannot create the connection's event descriptors: %s", strerror(errno));
    goto failed;
  }
  struct epoll_event event = {.events = EPOLLIN, .data.u32 = 0};
  epoll_ctl(c->epoll_fd, EPOLL_CTL_ADD, c->event_fd, &event);
  if (pthread_create(&c->thread, NULL, run, c) != 0) {
    snprintf(error, error_length, "cannot start the connection's thread");
    goto failed;
  }
  pthread_setname_np(c->thread, "apns-h2");
  c->thread_started = 1;
  return c;

failed:
  if (c->event_fd >= 0) close(c->event_fd);
  if (c->epoll_fd >= 0) close(c->epoll_fd);
  pthread_mutex_destroy(&c->lock);
  free(c->strings);
  free(c);
  return NULL;
}

static int submit(pw_h2_conn *c, size_t count, const char *paths, const uint32_t *tags, const unsigned char *headers,
                  size_t headers_length, const unsigned char *body, size_t body_length, const size_t *body_ends, void *context) {
  if (count == 0) return 0;
  size_t paths_length = 0;
  for (size_t i = 0; i < count; i++) paths_length += strlen(paths + paths_length) + 1;
  size_t ends_length = body_ends ? count * sizeof(size_t) : 0;
  batch *b = malloc(sizeof *b + ends_length + count * sizeof(uint32_t) + headers_length + body_length + paths_length);
  if (!b) return -1;
  memset(b, 0, sizeof *b);
  b->refs = (int)count;
  b->count = count;
  b->context = context;
  unsigned char *cursor = b->storage;
  if (body_ends) {
    // First in the storage, which is 8-aligned: the ends are size_t.
    b->body_ends = (size_t *)cursor;
    memcpy(b->body_ends, body_ends, ends_length);
    cursor += ends_length;
  }
  b->tags = (uint32_t *)cursor;
  memcpy(b->tags, tags, count * sizeof(uint32_t));
  cursor += count * sizeof(uint32_t);
  unsigned char *header_copy = cursor;
  if (headers_length) memcpy(header_copy, headers, headers_length);
  cursor += headers_length;
  b->body = cursor;
  b->body_length = body_length;
  if (body_length) memcpy(cursor, body, body_length);
  cursor += body_length;
  memcpy(cursor, paths, paths_length);
  b->paths = (const char *)cursor;

  // name NUL value NUL …, parsed once for every request of the batch.
  uint8_t flags = NGHTTP2_NV_FLAG_NO_COPY_NAME | NGHTTP2_NV_FLAG_NO_COPY_VALUE;
  const unsigned char *p = header_copy, *end = header_copy + headers_length;
  while (p < end && b->nv_count < MAX_REQUEST_HEADERS) {
    const unsigned char *name = p;
    size_t name_length = strnlen((const char *)p, (size_t)(end - p));
    p += name_length + 1;
    if (p >= end) break;
    const unsigned char *value = p;
    size_t value_length = strnlen((const char *)p, (size_t)(end - p));
    p += value_length + 1;
    b->nv[b->nv_count++] = (nghttp2_nv){(uint8_t *)name, (uint8_t *)value, name_length, value_length, flags};
  }
  int n = snprintf(b->content_length, sizeof b->content_length, "%zu", body_length);
  b->nv[b->nv_count++] = (nghttp2_nv){(uint8_t *)"content-length", (uint8_t *)b->content_length, 14, (size_t)n, flags};

  pthread_mutex_lock(&c->lock);
  if (c->closing) {
    pthread_mutex_unlock(&c->lock);
    free(b);
    return -1;
  }
  // A deadline taken under the lock keeps the queue (and so `tracked`) in deadline order.
  b->deadline = now_ms() + c->config.request_timeout_ms;
  // Only the first batch queued since the thread last looked wakes it.
  int wake = c->queue_head == NULL;
  if (c->queue_tail) c->queue_tail->next_queued = b; else c->queue_head = b;
  c->queue_tail = b;
  pthread_mutex_unlock(&c->lock);
  if (wake) {
    uint64_t one = 1;
    ssize_t ignored = write(c->event_fd, &one, sizeof one);
    (void)ignored;
  }
  return 0;
}

int pw_h2_submit(pw_h2_conn *c, size_t count, const char *paths, const uint32_t *tags, const unsigned char *headers,
                 size_t headers_length, const unsigned char *body, size_t body_length, void *context) {
  return submit(c, count, paths, tags, headers, headers_length, body, body_length, NULL, context);
}

int pw_h2_submit_each(pw_h2_conn *c, size_t count, const char *paths, const uint32_t *tags, const unsigned char *headers,
                      size_t headers_length, const unsigned char *bodies, const size_t *body_ends, void *context) {
  if (count == 0) return 0;
  for (size_t i = 1; i < count; i++) {
    if (body_ends[i] < body_ends[i - 1]) return -1;
  }
  return submit(c, count, paths, tags, headers, headers_length, bodies, body_ends[count - 1], body_ends, context);
}

void pw_openssl_thread_stop(void) { OPENSSL_thread_stop(); }

void pw_h2_shutdown(pw_h2_conn *c) {
  pthread_mutex_lock(&c->lock);
  c->closing = 1;
  pthread_mutex_unlock(&c->lock);
  uint64_t one = 1;
  ssize_t ignored = write(c->event_fd, &one, sizeof one);
  (void)ignored;
}

void pw_h2_free(pw_h2_conn *c) {
  pw_h2_shutdown(c);
  if (c->thread_started) {
    if (pthread_equal(pthread_self(), c->thread)) {
      // Freed from its own completion (the last owner of the Swift side let go there): the
      // thread cannot wait for itself. It has nothing left to complete after this, but it still
      // reads `c`, so it frees `c` itself as it exits.
      c->detached = 1;
      pthread_detach(c->thread);
      return;
    }
    pthread_join(c->thread, NULL);
  }
  free_connection(c);
}

int pw_h2_is_open(const pw_h2_conn *c) { return atomic_load_explicit(&((pw_h2_conn *)c)->open, memory_order_relaxed) > 0; }

uint64_t pw_h2_pings_sent(const pw_h2_conn *c) {
  return atomic_load_explicit(&((pw_h2_conn *)c)->pings_sent, memory_order_relaxed);
}

uint64_t pw_h2_pings_answered(const pw_h2_conn *c) {
  return atomic_load_explicit(&((pw_h2_conn *)c)->pings_answered, memory_order_relaxed);
}
