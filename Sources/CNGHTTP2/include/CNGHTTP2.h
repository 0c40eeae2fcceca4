#ifndef PUSHWORKER_CNGHTTP2_H
#define PUSHWORKER_CNGHTTP2_H

#include <stddef.h>
#include <stdint.h>

// One HTTP/2 connection to APNs on libnghttp2 over OpenSSL, driven by its own thread: a
// non-blocking socket, one TLS session (ALPN h2 only), one nghttp2 session, an epoll loop woken
// by an eventfd when requests are submitted. Every nghttp2 and OpenSSL call happens on that
// thread; other threads only queue requests under a mutex and write the eventfd.
//
// The engine is C rather than Swift so that the per-frame callbacks (headers, data, stream
// close) never cross into Swift: the caller sees one completion per request, on the I/O thread,
// with pointers valid only during the call.

typedef struct pw_h2_conn pw_h2_conn;

/// Why a request got no HTTP response.
typedef enum {
  PW_H2_OK = 0,
  /// TCP connect, DNS, or the connection dropped; `retry` says whether the request may be resent.
  PW_H2_ERR_CONNECT = 1,
  /// The TLS handshake failed for a reason other than verification.
  PW_H2_ERR_TLS = 2,
  /// The server's certificate did not verify (unknown CA, wrong name, expired).
  PW_H2_ERR_VERIFY = 3,
  /// The client certificate, key or password cannot be used.
  PW_H2_ERR_CREDENTIALS = 4,
  /// The server did not select h2 by ALPN.
  PW_H2_ERR_ALPN = 5,
  /// The proxy refused the CONNECT tunnel or answered something else.
  PW_H2_ERR_PROXY = 6,
  /// No answer within the request timeout (connecting included).
  PW_H2_ERR_TIMEOUT = 7,
  /// The server reset the stream (RST_STREAM) or refused it (REFUSED_STREAM, GOAWAY).
  PW_H2_ERR_STREAM = 8,
  /// The connection failed mid-exchange: closed, broken, a PING left unanswered, a protocol error.
  PW_H2_ERR_CONNECTION = 9,
} pw_h2_error;

/// What came back for one request. Pointers are valid only during the completion call.
typedef struct {
  /// The HTTP status, 0 when there was no response.
  int status;
  pw_h2_error error;
  /// 1 when the server cannot have processed the request (refused, never sent, connection
  /// lost before the answer): sending it again on a new connection is safe or at worst a
  /// duplicate, which APNs' collapse rules tolerate.
  int retry;
  /// NUL-terminated detail of an error; "" for a response.
  const char *message;
  /// The response's apns-id and apns-unique-id headers, NUL-terminated; NULL when absent.
  const char *apns_id;
  const char *apns_unique_id;
  /// The response's apns-request-id (broadcasts), NUL-terminated; NULL when absent.
  const char *apns_request_id;
  /// The response's retry-after (FCM's 429 and 503), NUL-terminated; NULL when absent.
  const char *retry_after;
  const unsigned char *body;
  size_t body_length;
} pw_h2_result;

/// Called once per request on the connection's thread, with the submit's `context` and the
/// request's tag.
typedef void (*pw_h2_completion)(void *context, uint32_t tag, const pw_h2_result *result);

typedef struct {
  /// Where the TLS session ends: APNs (or the mock). An IP literal is verified against the
  /// certificate's IP addresses, a name against its DNS names (and sent as SNI).
  const char *host;
  int port;
  /// The :authority of each request, `host` or `host:port`.
  const char *authority;
  /// An HTTP proxy to open a CONNECT tunnel through; NULL for none.
  const char *proxy_host;
  int proxy_port;
  /// The Proxy-Authorization header's value ("Basic …"), or NULL.
  const char *proxy_authorization;
  /// PEM CA file to trust instead of the system store; NULL for the system store.
  const char *ca_file;
  /// Client certificate (certificate authentication), NULL for none: a PKCS#12 file when
  /// `certificate_is_p12`, else PEM with the key in `key_file` (or in the certificate file).
  const char *certificate_file;
  int certificate_is_p12;
  const char *key_file;
  const char *password;
  int connect_timeout_ms;
  int request_timeout_ms;
  /// A PING is sent when nothing has been received for this long (0: never), and the
  /// connection is given up when its answer takes longer than `ping_timeout_ms`.
  int ping_interval_ms;
  int ping_timeout_ms;
  /// Our own cap on streams; the server's SETTINGS_MAX_CONCURRENT_STREAMS applies on top.
  uint32_t max_concurrent_streams;
  pw_h2_completion completion;
} pw_h2_config;

/// Copies the configuration and starts the connection's thread; it connects on the first
/// request. NULL (with the reason in `error`) when the thread or its eventfd cannot be made.
pw_h2_conn *pw_h2_start(const pw_h2_config *config, char *error, size_t error_length);

/// Queues `count` POSTs of one `body` with one set of `headers`, to the paths in `paths`
/// (`count` NUL-terminated strings back to back, e.g. `/3/device/<token>`); request i completes
/// with `tags[i]`. A fan-out is one call: one lock and at most one wake-up of the thread for the
/// whole batch. `headers` holds name NUL value NUL pairs (lowercase names). Everything is copied
/// here. Returns 0, or -1 when the connection is shutting down or memory ran out (no request of
/// the batch is then queued, and no completion is called). Any thread.
int pw_h2_submit(pw_h2_conn *conn, size_t count, const char *paths, const uint32_t *tags, const unsigned char *headers,
                 size_t headers_length, const unsigned char *body, size_t body_length, void *context);

/// As pw_h2_submit, but each request has a body of its own (FCM's, which names its device):
/// request i's body is `bodies` from `body_ends[i - 1]` (0 for the first) to `body_ends[i]`,
/// and its content-length is its own. Returns -1 also when the ends go backwards.
int pw_h2_submit_each(pw_h2_conn *conn, size_t count, const char *paths, const uint32_t *tags, const unsigned char *headers,
                      size_t headers_length, const unsigned char *bodies, const size_t *body_ends, void *context);

/// Refuses new requests; the thread finishes those in flight, closes the connection and exits.
void pw_h2_shutdown(pw_h2_conn *conn);

/// Waits for the thread to exit (after pw_h2_shutdown) and frees everything.
void pw_h2_free(pw_h2_conn *conn);

/// Frees the calling thread's OpenSSL state (random generators, error queue) now, rather than
/// when the thread's destructors run: for a thread of another TLS user (libcurl) about to end.
void pw_openssl_thread_stop(void);

/// 1 while a socket to the server (or proxy) is open.
int pw_h2_is_open(const pw_h2_conn *conn);

/// PINGs sent and PING answers received since the start, for tests and metrics.
uint64_t pw_h2_pings_sent(const pw_h2_conn *conn);
uint64_t pw_h2_pings_answered(const pw_h2_conn *conn);

#endif
