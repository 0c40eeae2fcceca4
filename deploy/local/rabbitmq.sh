#!/usr/bin/env bash
# Starts or stops a user-space RabbitMQ node for tests and the demo, listening on 127.0.0.1 only.
#
#   deploy/local/rabbitmq.sh start|stop|reset|status|url
#
# PUSHWORKER_RABBITMQ_PORT      AMQP port (default 5672); TLS listens on PORT-1 (default 5671)
# PUSHWORKER_RABBITMQ_NODE      Erlang node name (default rabbit@localhost)
# PUSHWORKER_RABBITMQ_DIR       data, logs, config and test TLS certificates
#                               (default /tmp/pushworker-rabbitmq-PORT)
#
# `start` returns only when the node accepts connections. The TLS listener uses a throw-away CA
# generated here (DIR/tls/ca.pem), so tests can check amqps:// with verification on.
set -euo pipefail

port="${PUSHWORKER_RABBITMQ_PORT:-5672}"
tls_port="${PUSHWORKER_RABBITMQ_TLS_PORT:-$((port - 1))}"
node="${PUSHWORKER_RABBITMQ_NODE:-rabbit@localhost}"
dir="${PUSHWORKER_RABBITMQ_DIR:-/tmp/pushworker-rabbitmq-$port}"

ctl() { rabbitmqctl -n "$node" "$@"; }

running() { ctl status >/dev/null 2>&1; }

make_certificates() {
  local tls="$dir/tls"
  [ -f "$tls/server.pem" ] && return
  mkdir -p "$tls"
  openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj "/CN=pushworker test CA" \
    -keyout "$tls/ca.key" -out "$tls/ca.pem" 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" \
    -keyout "$tls/server.key" -out "$tls/server.csr" 2>/dev/null
  printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' > "$tls/san.ext"
  openssl x509 -req -in "$tls/server.csr" -CA "$tls/ca.pem" -CAkey "$tls/ca.key" -CAcreateserial \
    -days 30 -extfile "$tls/san.ext" -out "$tls/server.pem" 2>/dev/null
  chmod 644 "$tls"/*.pem "$tls/server.key"
}

start() {
  if running; then
    echo "RabbitMQ node $node is already running"
    return
  fi
  mkdir -p "$dir/mnesia" "$dir/log"
  make_certificates
  cat > "$dir/rabbitmq.conf" <<CONF
listeners.tcp.1 = 127.0.0.1:$port
listeners.ssl.1 = 127.0.0.1:$tls_port
ssl_options.cacertfile = $dir/tls/ca.pem
ssl_options.certfile = $dir/tls/server.pem
ssl_options.keyfile = $dir/tls/server.key
ssl_options.verify = verify_none
ssl_options.fail_if_no_peer_cert = false
loopback_users = none
log.file.level = info
CONF
  : > "$dir/enabled_plugins"
  echo "[]." > "$dir/enabled_plugins"
  chown -R rabbitmq:rabbitmq "$dir"
  # rabbitmq-server switches to the rabbitmq user and keeps these variables.
  RABBITMQ_NODENAME="$node" \
  RABBITMQ_MNESIA_BASE="$dir/mnesia" \
  RABBITMQ_LOG_BASE="$dir/log" \
  RABBITMQ_CONFIG_FILE="$dir/rabbitmq.conf" \
  RABBITMQ_ENABLED_PLUGINS_FILE="$dir/enabled_plugins" \
  RABBITMQ_DIST_PORT="$((port + 20000))" \
    rabbitmq-server -detached
  # await_startup fails at once until the Erlang node has registered, so poll for that first.
  local deadline=$((SECONDS + 180))
  until ctl await_startup --timeout 30 >/dev/null 2>&1; do
    [ $SECONDS -lt $deadline ] || break
    sleep 1
  done
  if ! ctl await_startup --timeout 10 >/dev/null 2>&1; then
    echo "RabbitMQ did not start; its log:" >&2
    tail -50 "$dir"/log/*.log >&2 || true
    exit 1
  fi
  echo "RabbitMQ node $node ready on amqp://127.0.0.1:$port and amqps://localhost:$tls_port (CA $dir/tls/ca.pem)"
}

stop() {
  if running; then
    ctl stop >/dev/null
    echo "RabbitMQ node $node stopped"
  fi
}

# Removes the node's data: queues and messages left by earlier runs. Tests and CI start from here so
# that hundreds of leftover quorum queues do not slow the node's start and restarts.
reset() {
  stop
  rm -rf "$dir/mnesia" "$dir/log"
}

case "${1:-}" in
  start) start ;;
  reset) reset ;;
  stop) stop ;;
  status) running && echo running || { echo stopped; exit 1; } ;;
  url) echo "amqp://guest:guest@127.0.0.1:$port/" ;;
  *) echo "usage: $0 start|stop|reset|status|url" >&2; exit 2 ;;
esac
