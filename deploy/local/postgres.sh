#!/usr/bin/env bash
# Starts or stops a throw-away, user-space PostgreSQL 15 for the registry's tests, benchmarks and
# the demo, listening on 127.0.0.1 only, the way rabbitmq.sh runs the broker.
#
#   deploy/local/postgres.sh start|stop|reset|status|url
#
# PUSHWORKER_POSTGRES_PORT   port (default 15432: below the ephemeral range)
# PUSHWORKER_POSTGRES_DIR    data directory and log (default /tmp/pushworker-postgres-PORT)
#
# The cluster trusts local connections and runs without fsync: it holds test data only. `start`
# returns once the server accepts connections and database `pushworker` exists; `url` prints the
# URL that `registry: {postgres: …}` and the tests take.
set -euo pipefail

port="${PUSHWORKER_POSTGRES_PORT:-15432}"
dir="${PUSHWORKER_POSTGRES_DIR:-/tmp/pushworker-postgres-$port}"
bin="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)"
[ -n "$bin" ] || { echo "PostgreSQL server binaries not found; run deploy/local/install-deps.sh" >&2; exit 1; }

# The server refuses to run as root: it runs as the postgres user the Debian package creates.
as_postgres() {
  if [ "$(id -un)" = postgres ]; then "$@"; else runuser -u postgres -- "$@"; fi
}

url() { echo "postgres://postgres@127.0.0.1:$port/pushworker"; }

running() { [ -f "$dir/data/postmaster.pid" ] && as_postgres "$bin/pg_ctl" -D "$dir/data" status >/dev/null 2>&1; }

start() {
  if running; then
    echo "PostgreSQL is already running on $(url)"
    return
  fi
  mkdir -p "$dir"
  chown postgres:postgres "$dir"
  if [ ! -f "$dir/data/PG_VERSION" ]; then
    as_postgres "$bin/initdb" -D "$dir/data" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 || {
      echo "initdb failed:" >&2; cat "$dir/initdb.log" >&2; exit 1; }
  fi
  as_postgres "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 120 \
    -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200" \
    start >/dev/null || { echo "PostgreSQL did not start; its log:" >&2; tail -30 "$dir/server.log" >&2; exit 1; }
  as_postgres psql -h 127.0.0.1 -p "$port" -U postgres -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname = 'pushworker'" | grep -q 1 ||
    as_postgres psql -h 127.0.0.1 -p "$port" -U postgres -d postgres -qc "CREATE DATABASE pushworker"
  echo "PostgreSQL ready on $(url)"
}

stop() {
  if running; then
    as_postgres "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null
    echo "PostgreSQL on port $port stopped"
  fi
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  reset) stop; rm -rf "$dir" ;;
  status) running && echo "running on $(url)" || { echo "not running"; exit 1; } ;;
  url) url ;;
  *) echo "usage: $0 start|stop|reset|status|url" >&2; exit 2 ;;
esac
