#ifndef PUSHWORKER_CRABBITMQ_H
#define PUSHWORKER_CRABBITMQ_H

// Debian's librabbitmq-dev 0.11 installs the older header layout: amqp.h and friends at the
// include root (newer releases use <rabbitmq-c/amqp.h>).
#include <amqp.h>
#include <amqp_framing.h>
#include <amqp_tcp_socket.h>
#include <amqp_ssl_socket.h>
#include <sys/eventfd.h>

/// A non-blocking eventfd to wake an I/O thread from poll(); Glibc's Swift overlay lacks eventfd.
static inline int pw_wake_eventfd(void) { return eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC); }

// The method ids are macros with casts, which Swift does not import; these constants carry them.
static const amqp_method_number_t PW_CONNECTION_CLOSE = AMQP_CONNECTION_CLOSE_METHOD;
static const amqp_method_number_t PW_CONNECTION_CLOSE_OK = AMQP_CONNECTION_CLOSE_OK_METHOD;
static const amqp_method_number_t PW_CONNECTION_BLOCKED = AMQP_CONNECTION_BLOCKED_METHOD;
static const amqp_method_number_t PW_CONNECTION_UNBLOCKED = AMQP_CONNECTION_UNBLOCKED_METHOD;
static const amqp_method_number_t PW_CHANNEL_CLOSE = AMQP_CHANNEL_CLOSE_METHOD;
static const amqp_method_number_t PW_CHANNEL_CLOSE_OK = AMQP_CHANNEL_CLOSE_OK_METHOD;
static const amqp_method_number_t PW_BASIC_DELIVER = AMQP_BASIC_DELIVER_METHOD;
static const amqp_method_number_t PW_BASIC_ACK = AMQP_BASIC_ACK_METHOD;
static const amqp_method_number_t PW_BASIC_NACK = AMQP_BASIC_NACK_METHOD;
static const amqp_method_number_t PW_BASIC_RETURN = AMQP_BASIC_RETURN_METHOD;
static const amqp_method_number_t PW_BASIC_CANCEL = AMQP_BASIC_CANCEL_METHOD;
static const amqp_method_number_t PW_BASIC_CANCEL_OK = AMQP_BASIC_CANCEL_OK_METHOD;

static const amqp_flags_t PW_FLAG_CONTENT_TYPE = AMQP_BASIC_CONTENT_TYPE_FLAG;
static const amqp_flags_t PW_FLAG_CONTENT_ENCODING = AMQP_BASIC_CONTENT_ENCODING_FLAG;
static const amqp_flags_t PW_FLAG_HEADERS = AMQP_BASIC_HEADERS_FLAG;
static const amqp_flags_t PW_FLAG_DELIVERY_MODE = AMQP_BASIC_DELIVERY_MODE_FLAG;
static const amqp_flags_t PW_FLAG_PRIORITY = AMQP_BASIC_PRIORITY_FLAG;
static const amqp_flags_t PW_FLAG_CORRELATION_ID = AMQP_BASIC_CORRELATION_ID_FLAG;
static const amqp_flags_t PW_FLAG_REPLY_TO = AMQP_BASIC_REPLY_TO_FLAG;
static const amqp_flags_t PW_FLAG_EXPIRATION = AMQP_BASIC_EXPIRATION_FLAG;
static const amqp_flags_t PW_FLAG_MESSAGE_ID = AMQP_BASIC_MESSAGE_ID_FLAG;
static const amqp_flags_t PW_FLAG_TIMESTAMP = AMQP_BASIC_TIMESTAMP_FLAG;
static const amqp_flags_t PW_FLAG_TYPE = AMQP_BASIC_TYPE_FLAG;
static const amqp_flags_t PW_FLAG_USER_ID = AMQP_BASIC_USER_ID_FLAG;
static const amqp_flags_t PW_FLAG_APP_ID = AMQP_BASIC_APP_ID_FLAG;

/// amqp_login_with_properties with SASL PLAIN: the library's call is variadic, which Swift cannot call.
amqp_rpc_reply_t pw_amqp_login_plain(amqp_connection_state_t state, const char *vhost,
                                     int channel_max, int frame_max, int heartbeat,
                                     const amqp_table_t *properties, const char *user,
                                     const char *password);

#endif
