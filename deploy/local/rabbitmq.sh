#!/usr/bin/env bash
# Starts or stops user-space RabbitMQ nodes for tests, the demo and benchmarks, listening on
# 127.0.0.1 only.
#
#   deploy/local/rabbitmq.sh start|stop|reset|status|url|pid|ctl ARGS...
#   deploy/local/rabbitmq.sh cluster start|stop|reset|status|urls|pids|kill N|restart N|stop-node N|start-node N|ctl N ARGS...
#
# PUSHWORKER_RABBITMQ_PORT      AMQP port (default 5672); TLS listens on PORT-1 (default 5671)
# PUSHWORKER_RABBITMQ_NODE      Erlang node name (default rabbit@localhost)
# PUSHWORKER_RABBITMQ_DIR       data, logs, config and test TLS certificates
#                               (default /tmp/pushworker-rabbitmq-PORT)
#
# `start` returns only when the node accepts connections. The TLS listener uses a throw-away CA
# generated here (DIR/tls/ca.pem), so tests can check amqps:// with verification on.
#
# `cluster` runs three nodes, pushworker-1..3@localhost, clustered, on AMQP ports
# PUSHWORKER_CLUSTER_PORT+0, +10, +20 (default 5701, 5711, 5721; TLS one below each), their
# Erlang distribution ports 20000 above (25701...), all below the ephemeral range, data under
# /tmp/pushworker-rabbitmq-cluster/N. `kill N` is a SIGKILL of node N's Erlang VM (a machine lost);
# `restart N` stops it cleanly and starts it again (a rolling restart's step); `start-node N` brings
# back a killed or stopped node, which rejoins the cluster by itself. `pid`/`pids`: the Erlang VMs'
# process ids (for CPU figures); `ctl N ARGS`: rabbitmqctl against node N (`ctl ARGS` without
# `cluster`: against the single node).
set -euo pipefail

port="${PUSHWORKER_RABBITMQ_PORT:-5672}"
tls_port="${PUSHWORKER_RABBITMQ_TLS_PORT:-$((port - 1))}"
node="${PUSHWORKER_RABBITMQ_NODE:-rabbit@localhost}"
dir="${PUSHWORKER_RABBITMQ_DIR:-/tmp/pushworker-rabbitmq-$port}"
cluster_port="${PUSHWORKER_CLUSTER_PORT:-5701}"
cluster_dir="${PUSHWORKER_CLUSTER_DIR:-/tmp/pushworker-rabbitmq-cluster}"

# rabbitmqctl is an Erlang node too; without these its distribution port is the node's + 10000,
# inside the ephemeral range.
ctl_env() {
  local dist=$((port + 20000))
  RABBITMQ_CTL_DIST_PORT_MIN=$((dist + 1000)) RABBITMQ_CTL_DIST_PORT_MAX=$((dist + 1009)) "$@"
}

ctl() { ctl_env rabbitmqctl -n "$node" "$@"; }

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
  # Open files: `su` (which rabbitmq-server runs) gives the node a soft limit of 1024. Its file
  # handle cache then allows 927 handles; the test suites' classic queues and connections used them
  # all, and classic queues waited for a handle forever: a node that accepted connections and
  # answered nothing (seen as "no delivery within 20 s" and workers that never started). The node's
  # environment file, which rabbitmq-server sources as the rabbitmq user, raises the soft limit to
  # the hard one, at most 65536 (what RabbitMQ's own packages set).
  cat > "$dir/rabbitmq-env.conf" <<'ENV'
open_files="$(ulimit -Hn)"
if [ "$open_files" = unlimited ] || [ "$open_files" -gt 65536 ]; then open_files=65536; fi
ulimit -n "$open_files"
ENV
  chown rabbitmq:rabbitmq "$dir/rabbitmq-env.conf"
  # rabbitmq-server switches to the rabbitmq user and keeps these variables. Its output goes to a
  # file: the detached node would otherwise hold the caller's stdout open, and a caller reading
  # it to the end (a test) would wait forever.
  RABBITMQ_NODENAME="$node" \
  RABBITMQ_MNESIA_BASE="$dir/mnesia" \
  RABBITMQ_LOG_BASE="$dir/log" \
  RABBITMQ_CONFIG_FILE="$dir/rabbitmq.conf" \
  RABBITMQ_ENABLED_PLUGINS_FILE="$dir/enabled_plugins" \
  RABBITMQ_CONF_ENV_FILE="$dir/rabbitmq-env.conf" \
  RABBITMQ_DIST_PORT="$((port + 20000))" \
    rabbitmq-server -detached </dev/null >"$dir/log/startup.out" 2>&1
  # await_startup fails at once until the Erlang node has registered, so poll for that first.
  local deadline=$((SECONDS + 180))
  until ctl await_startup --timeout 30 >/dev/null 2>&1; do
    [ $SECONDS -lt $deadline ] || break
    sleep 1
  done
  if ! ctl await_startup --timeout 10 >/dev/null 2>&1; then
    echo "RabbitMQ did not start; its log:" >&2
    tail -n 50 "$dir"/log/*.log >&2 || true
    exit 1
  fi
  local files
  files="$(awk '/Max open files/ { print $4 }' "/proc/$(pid_of_node)/limits" 2>/dev/null || true)"
  echo "RabbitMQ node $node ready on amqp://127.0.0.1:$port and amqps://localhost:$tls_port (CA $dir/tls/ca.pem; open files limit ${files:-unknown})"
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

# Node N of the cluster: sets the variables the single-node functions use.
cluster_node() {
  local n="$1"
  case "$n" in 1|2|3) ;; *) echo "no cluster node '$n': nodes are 1, 2 and 3" >&2; exit 2 ;; esac
  port=$((cluster_port + (n - 1) * 10))
  tls_port=$((port - 1))
  node="pushworker-$n@localhost"
  dir="$cluster_dir/$n"
}

# The OS process id of the node's Erlang VM (rabbitmq-server -detached writes it under the data dir).
pid_of_node() {
  local pid
  pid="$(cat "$dir/mnesia/$node.pid" 2>/dev/null || true)"
  [ -z "$pid" ] || echo "$pid"
}

cluster_start() {
  for n in 1 2 3; do
    cluster_node "$n"
    start >/dev/null
  done
  cluster_node 1
  local first="$node"
  for n in 2 3; do
    cluster_node "$n"
    if ! ctl cluster_status 2>/dev/null | grep -q "$first"; then
      ctl stop_app >/dev/null
      ctl join_cluster "$first" >/dev/null
      ctl start_app >/dev/null
    fi
  done
  cluster_node 1
  ctl await_startup >/dev/null
  echo "RabbitMQ cluster of 3 nodes ready: $(cluster_urls)"
}

cluster_urls() {
  local urls=()
  for n in 1 2 3; do
    cluster_node "$n"
    urls+=("amqp://guest:guest@127.0.0.1:$port/")
  done
  (IFS=,; echo "${urls[*]}")
}

cluster_command() {
  case "${1:-}" in
    start) cluster_start ;;
    stop) for n in 3 2 1; do cluster_node "$n"; stop; done ;;
    reset) for n in 3 2 1; do cluster_node "$n"; stop; done; rm -rf "$cluster_dir" ;;
    status)
      local down=0
      for n in 1 2 3; do
        cluster_node "$n"
        if running; then echo "node $n ($node, port $port): running"; else echo "node $n ($node, port $port): stopped"; down=1; fi
      done
      return $down ;;
    urls) cluster_urls ;;
    pids) for n in 1 2 3; do cluster_node "$n"; pid_of_node; done ;;
    ctl) cluster_node "${2:-}"; shift 2; ctl "$@" ;;
    kill)
      local pid
      cluster_node "${2:-}"
      pid="$(pid_of_node)"
      [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null || { echo "node ${2:-} is not running" >&2; exit 1; }
      # Wait until the VM is gone, so the caller sees the node down.
      while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
      echo "RabbitMQ node $node killed (pid $pid)" ;;
    restart)
      # A rolling restart's step: wait until stopping this node leaves every quorum queue a
      # majority (the last restarted node has caught up), as an operator's upgrade would.
      cluster_node "${2:-}"
      local deadline=$((SECONDS + 180))
      until ctl_env rabbitmq-queues -n "$node" check_if_node_is_quorum_critical >/dev/null 2>&1; do
        [ $SECONDS -lt $deadline ] || { echo "node $node stays critical for quorum queues; restarting it anyway" >&2; break; }
        sleep 1
      done
      stop; start ;;
    stop-node) cluster_node "${2:-}"; stop ;;
    start-node) cluster_node "${2:-}"; start ;;
    *) echo "usage: $0 cluster start|stop|reset|status|urls|pids|kill N|restart N|stop-node N|start-node N|ctl N ARGS..." >&2; exit 2 ;;
  esac
}

case "${1:-}" in
  start) start ;;
  reset) reset ;;
  stop) stop ;;
  status) running && echo running || { echo stopped; exit 1; } ;;
  url) echo "amqp://guest:guest@127.0.0.1:$port/" ;;
  pid) pid_of_node ;;
  ctl) shift; ctl "$@" ;;
  cluster) shift; cluster_command "$@" ;;
  *) echo "usage: $0 start|stop|reset|status|url|pid|ctl ARGS...|cluster ..." >&2; exit 2 ;;
esac
