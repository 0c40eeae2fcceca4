#!/usr/bin/env bash
# Benchmarks against the mock APNs, with h2load against the same server, payload and headers in
# the same run, and prints the ratio.
#
#   deploy/local/bench.sh apns [COUNT] [CONNECTIONS] [STREAMS]   the APNs client alone
#   deploy/local/bench.sh e2e  [COUNT] [CONNECTIONS] [STREAMS]   broker → worker → APNs → results
#                                   (the worker's max_in_flight: $MAX_IN_FLIGHT, else its default;
#                                   GROUP=1: also the same devices as a registry group job;
#                                   GROUP_FIRST=1: the group job first;
#                                   COMPARE_METRICS=N: N runs with metrics off and N on, compared;
#                                   JOB_SIZE=N: the devices as jobs of N; NOW_PREFETCH: the worker's
#                                   lanes.now_prefetch; JOBS: one-device jobs timed after, 1000)
#                                   (RESULTS=all|batched|failures|none: the job's results mode)
#   deploy/local/bench.sh modes [COUNT]   e2e once per results mode (all, batched, failures, none),
#                                   each with a new worker, then h2load: one table of devices/s,
#                                   the ratio to h2load, worker and broker CPU per device, worker peak
#   deploy/local/bench.sh resolve [MEMBERS] [sqlite|postgres]   a group job's resolution and
#                                   filtering into chunk jobs, no broker or APNs
#   deploy/local/bench.sh lanes [COUNT]   a broadcast of COUNT devices (default 300000; results:
#                                   failures) alone, then with one-device jobs published every
#                                   INTERVAL_MS (250) while it runs, then alone again: their latency
#                                   and the broadcast's rate with them; NOW_PREFETCH sets
#                                   lanes.now_prefetch
#   deploy/local/bench.sh ledger [COUNT]   e2e of a COUNT-device (default 200000) results: batched job
#                                   with the delivery ledger off, on SQLite, and on PostgreSQL (its
#                                   registry with the ledger off, then on), ROUNDS (2) rounds in
#                                   turns, tokens that look random as APNs's do: devices/s, worker
#                                   and store CPU per device, worker peak memory, and the ratios of
#                                   the mean rates; LEDGER_STORES="sqlite" (or "postgres")
#                                   runs one store's pair only
#   deploy/local/bench.sh schedule [COUNT]   COUNT (default 100000) one-device jobs whose send_at is
#                                   spread over the next minute (after SCHEDULE_LEAD seconds, 20):
#                                   each one's release lag, send_at to summary (p50, p99, worst), on
#                                   SQLite and then on PostgreSQL (SCHEDULE_LEDGERS="sqlite"), with
#                                   the worker's CPU per job; NOW_PREFETCH sets lanes.now_prefetch,
#                                   DUE_PREFETCH lanes.due_prefetch
#   deploy/local/bench.sh cancel [COUNT]   a COUNT-device job (default 200000, results: all) cancelled
#                                   once a quarter of its devices have their result: how many were
#                                   delivered after the cancel returned (SQLite ledger)
#   deploy/local/bench.sh localtime [COUNT]   a registry group of COUNT members (default 1000000) sent
#                                   with a local_time a minute or two ahead: the time to hold it by
#                                   zone, the worker's peak memory, and the rate once released
#   deploy/local/bench.sh fcm [COUNT] [CONNECTIONS] [STREAMS]   the FCM client and the APNs client
#                                   alone, in turns, against the same Go server (default 4
#                                   connections of 100 streams, as FCM serves): messages/s and
#                                   client CPU per message of each, and their ratio (FCM's target:
#                                   no more CPU per device than APNs'); then end to end, broker →
#                                   worker → the same server → results, one job of COUNT Android
#                                   devices beside one of COUNT APNs devices (JOB_SIZE=N: APNs'
#                                   also as jobs of N), and h2load against each endpoint: devices/s
#                                   and worker CPU per device of each, FCM/APNs, each rate over its
#                                   h2load's, and whether the server saturated; ROUNDS (2) rounds,
#                                   in turns; RESULTS as e2e
#   deploy/local/bench.sh transactional [JOBS]   JOBS (default 5000) one-device jobs published back
#                                   to back to pushworker with an SQLite registry and ledger, with a
#                                   PostgreSQL one, with neither (KINDS, default "ledger postgres
#                                   off"; "registry" adds the SQLite registry with ledger: off),
#                                   and to a Go peer worker
#                                   (deploy/local/txbench), on one broker and the Go server: jobs/s,
#                                   CPU per job of the worker, the broker and the server, the ratio
#                                   to the Go worker, and each worker's p50/p99 latency at half its rate;
#                                   LEDGER_FILE=1 gives the ledger kind's ledger a file of its own;
#                                   THREADS=1 adds each worker thread's switches and CPU per job, by
#                                   thread name; PERF=KIND records a perf profile of that worker
#                                   (PERF_EVENTS: other events than 999 samples a second);
#                                   COUNTS=KIND prints that worker's swift_retain and malloc calls,
#                                   tasks made and task jobs run (each a hand-off to Swift's
#                                   pool), system calls and context switches per job; POSTGRES_CONNECTIONS
#                                   sets the PostgreSQL worker's registry.postgres_connections (8),
#                                   NOW_PREFETCH the workers' lanes.now_prefetch (64), LATENCY_RATE
#                                   the rate of the latency runs (jobs/s; default half each one's);
#                                   WORKER_BIN another build of pushworker to run in its place (two
#                                   builds compared on one machine, run after run)
#   deploy/local/bench.sh cluster [COUNT]   e2e on the single node (one worker; quorum results queue,
#                                   then classic) and on a three-node cluster (one worker, then two,
#                                   each preferring another node),
#                                   with the broker's CPU per device (every node's Erlang VM)
#
# TRANSPORT=nghttp2 (default) or curl: the APNs transport measured (apns and e2e).
# RESULTS_TYPE=quorum (the worker's default) or classic: the results queue's type (e2e and modes).
# BATCH=N (apns): notifications per batch send (default 100; 1: a send and a task per notification).
# SERVER=go (default) or mock: the HTTP/2 server both clients talk to. go is a neutral net/http2
# server on all cores (deploy/local/h2server), which does not saturate first at one connection;
# the mock checks every request as APNs does, but serves a connection on one thread and is the
# bottleneck there (the output says so).
set -euo pipefail
cd "$(dirname "$0")/../.."
source deploy/local/swift-path.sh
mode="${1:-apns}"
count="${2:-200000}"
connections="${3:-1}"
streams="${4:-1000}"
case "$mode" in apns|fcm|e2e|modes|resolve|cluster|lanes|ledger|schedule|cancel|localtime|transactional) ;; *) echo "usage: $0 apns|fcm|e2e|modes|resolve|cluster|lanes|ledger|schedule|cancel|localtime|transactional [COUNT] [CONNECTIONS] [STREAMS]" >&2; exit 2 ;; esac
if [ "$mode" = fcm ]; then
  connections="${3:-4}"
  streams="${4:-100}"
fi

deploy/local/install-deps.sh
if [ "$mode" = resolve ]; then
  swift build -c release --product pushworker >/dev/null
  swift build -c release --product pushworker-bench >/dev/null
  bin="$(swift build -c release --show-bin-path)"
  members="${2:-1000000}"
  store="${3:-sqlite}"
  work_resolve="$(mktemp -d /tmp/pushworker-bench-resolve-XXXXXX)"
  if [ "$store" = postgres ]; then
    postgres_started_here=false
    if ! deploy/local/postgres.sh status >/dev/null 2>&1; then deploy/local/postgres.sh start >/dev/null; postgres_started_here=true; fi
    base="$(deploy/local/postgres.sh url)"
    database="bench_$(date +%s)"
    trap 'psql -q "$base" -c "DROP DATABASE IF EXISTS $database" || true; if $postgres_started_here; then deploy/local/postgres.sh stop >/dev/null || true; fi' EXIT
    psql -q "$base" -c "CREATE DATABASE $database"
    target=(--postgres "${base%/*}/$database")
  else
    file="$(mktemp -d /tmp/pushworker-bench-XXXXXX)/registry.db"
    trap 'rm -rf "$(dirname "$file")"' EXIT
    target=(--sqlite "$file")
  fi
  echo "== pushworker-bench resolve ${target[*]} --members $members --load-only"
  "$bin/pushworker-bench" resolve "${target[@]}" --members "$members" --load-only 2>/dev/null
  # Speed: the best of three runs. Memory: each group resolved once in a process of its own, so
  # its peak is that job's and nothing else's (repeated jobs in one process add the allocator's
  # fragmentation, reported by the speed runs' "peak RSS").
  for group in first all; do
    echo "== pushworker-bench resolve ${target[*]} --members $members --no-load --group $group"
    "$bin/pushworker-bench" resolve "${target[@]}" --members "$members" --no-load --group "$group"
    echo "== pushworker-bench resolve ${target[*]} --members $members --no-load --group $group --repeats 1"
    "$bin/pushworker-bench" resolve "${target[@]}" --members "$members" --no-load --group "$group" --repeats 1 | tee "$work_resolve/$group.txt" | grep VmHWM
  done
  small=$(grep -o 'VmHWM): [0-9.]*' "$work_resolve/first.txt" | grep -o '[0-9.]*$')
  big=$(grep -o 'VmHWM): [0-9.]*' "$work_resolve/all.txt" | grep -o '[0-9.]*$')
  echo "== peak memory, $members members − 100000 members: $(python3 -c "print(f'{$big - $small:+.1f}')") MiB (target within 16)"
  exit 0
fi
command -v h2load >/dev/null || { apt-get install -y -q nghttp2-client >/dev/null; }
swift build -c release --product pushworker >/dev/null
swift build -c release --product pushworker-bench >/dev/null
swift build -c release --product mock-apns >/dev/null
bin="$(swift build -c release --show-bin-path)"

work="$(mktemp -d /tmp/pushworker-bench-XXXXXX)"
broker_started_here=false
trap 'kill $mock_pid ${worker_pid:-} 2>/dev/null || true; rm -rf "$work"; if $broker_started_here; then deploy/local/rabbitmq.sh stop >/dev/null || true; fi' EXIT
deploy/local/make-pki.sh "$work"
printf '{"aps":{"alert":{"title":"Benchmark","body":"Hello from pushworker"},"sound":"default"}}' > "$work/payload.json"

# MOCK_THREADS: the mock's event-loop threads (default 2, the machine's cores here). Its CPU use is
# printed beside each client's, so a mock that saturates first (and so sets both rates) shows.
mock_threads="${MOCK_THREADS:-2}"
server="${SERVER:-go}"
server_name=$([ "$server" = go ] && echo "Go server" || echo "mock APNs")
transport="${TRANSPORT:-nghttp2}"
if [ "$server" = go ]; then
  dpkg-query -W golang-golang-x-net-dev >/dev/null 2>&1 || apt-get install -y -q golang-go golang-golang-x-net-dev >/dev/null
  GO111MODULE=off GOPATH=/usr/share/gocode go build -o "$work/h2server" deploy/local/h2server/main.go
  # A port below the ephemeral range (32768+), which outgoing connections may hold.
  "$work/h2server" --port $((20000 + RANDOM % 10000)) --cert "$work/server.pem" --key "$work/server.key" > "$work/mock.log" 2>&1 &
else
  "$bin/mock-apns" --port 0 --threads "$mock_threads" --cert "$work/server.pem" --key "$work/server.key" \
    --provider-key "BENCHKEY01:BENCHTEAM1:$work/key.pub" --topic com.example.app > "$work/mock.log" 2>&1 &
fi
mock_pid=$!
for _ in $(seq 100); do grep -q listening "$work/mock.log" && break; sleep 0.1; done
url=$(grep -o 'https://[0-9.:]*' "$work/mock.log" | head -1)
token_hex=$(printf '0a%.0s' $(seq 32))
if [ "$server" = go ]; then
  echo "== neutral Go net/http2 server at $url (all cores, 1000 streams per connection)"
else
  echo "== mock APNs at $url (release build, $mock_threads event loop threads)"
fi
ticks=$(getconf CLK_TCK)
cores=$(nproc)
# CPU seconds (user + system) a process has used so far.
cpu_of() { awk -v t="$ticks" '{ printf "%.3f", ($14 + $15) / t }' "/proc/$1/stat"; }
now() { date +%s.%N; }
# Prints the mock's share of the CPU it could use between two readings (its threads, the cores, and
# one thread per connection), and whether it saturated.
mock_load() {
  python3 -c "
cpu, wall, threads, cores, connections = $2 - $1, $4 - $3, $mock_threads, $cores, $connections
# SwiftNIO serves each connection on one event loop: a connection's streams use one thread at most.
# Go's server runs a goroutine per stream, on every core.
usable = cores if '$server' == 'go' else min(threads, cores, connections)
share = cpu / wall / usable
verdict = 'the server was the bottleneck' if share > 0.9 else 'the server was not the bottleneck'
print(f'   $server_name: {cpu:.1f} CPU-s in {wall:.1f} s = {cpu / wall * 100:.0f}% of one core, {share * 100:.0f}% of the {usable} it can use: {verdict}')"
}

# The single node, started when it is not running. A run's queues are named
# pushworker.bench.<id>.*, a new id each run, and the worker declares a dozen: a policy makes them
# go once unused for 30 minutes (no consumer, no get: so even a retry queue outlives its run), so
# runs do not pile up thousands of queues that slow the node. It names the benchmarks' queues
# only, and stays on the node.
ensure_broker() {
  if ! deploy/local/rabbitmq.sh status >/dev/null 2>&1; then deploy/local/rabbitmq.sh start >/dev/null; broker_started_here=true; fi
  deploy/local/rabbitmq.sh ctl set_policy --apply-to queues pushworker-bench-expiry '^pushworker\.bench\.' '{"expires":1800000}' >/dev/null
}

if [ "$mode" = transactional ]; then
  # One-device jobs, as most of an app's pushes are: COUNT (default 5000) published back to back,
  # confirmed, to each worker in turn on one broker and one Go HTTP/2 server: pushworker with an
  # SQLite registry and its delivery ledger (as the README sets it up), pushworker with neither,
  # and a Go peer (deploy/local/txbench: amqp091-go and x/net/http2, prefetch 16, one confirmed
  # result per device, no summary, no ledger). Each process's CPU is read over the run (worker,
  # broker, server); then each worker again paced at half its rate, for its latency.
  [ "$server" = go ] || { echo "bench.sh transactional runs against the Go server (SERVER=go)" >&2; exit 2; }
  jobs="${2:-5000}"
  ensure_broker
  broker_pid="$(deploy/local/rabbitmq.sh pid)"
  amqp_url="$(deploy/local/rabbitmq.sh url)"
  GO111MODULE=off GOPATH=/usr/share/gocode go build -o "$work/txbench" deploy/local/txbench/main.go
  jwt=$("$bin/pushworker" token --key-file "$work/key.p8" --key-id BENCHKEY01 --team-id BENCHTEAM1)
  # KINDS: the pushworker configurations measured beside the Go worker: ledger (SQLite registry
  # and ledger), postgres (a PostgreSQL registry and ledger, on the same cores), registry (the
  # SQLite registry, ledger: off), off (neither).
  kinds="${KINDS:-ledger postgres off}"
  postgres_started_here=false
  if [[ " $kinds " == *" postgres "* ]]; then
    if ! deploy/local/postgres.sh status >/dev/null 2>&1; then deploy/local/postgres.sh start >/dev/null; postgres_started_here=true; fi
    trap 'kill $mock_pid ${worker_pid:-} 2>/dev/null || true; rm -rf "$work"; if $broker_started_here; then deploy/local/rabbitmq.sh stop >/dev/null || true; fi; if $postgres_started_here; then deploy/local/postgres.sh stop >/dev/null || true; fi' EXIT
    postgres_base="$(deploy/local/postgres.sh url)"
  fi
  series=0
  # Context switches of all a process's threads so far: each hand-off to a sleeping thread is one.
  switches_of() { cat /proc/$1/task/*/status 2>/dev/null | awk '/ctxt_switches/ { n += $2 } END { print n + 0 }'; }
  # THREADS=1: each thread's switches and CPU so far, as JSON by thread id (its name beside).
  threads_of() {
    python3 - "$1" <<'PY'
import json, os, sys
pid, out = sys.argv[1], {}
for tid in os.listdir(f'/proc/{pid}/task'):
    try:
        base = f'/proc/{pid}/task/{tid}'
        name = open(f'{base}/comm').read().strip()
        stat = open(f'{base}/stat').read()
        fields = stat[stat.rindex(')') + 2:].split()
        cpu = (int(fields[11]) + int(fields[12])) / os.sysconf('SC_CLK_TCK')
        switches = sum(int(line.split()[1]) for line in open(f'{base}/status') if 'ctxt_switches' in line)
        out[tid] = [name, switches, cpu]
    except (OSError, ValueError):
        pass
print(json.dumps(out))
PY
  }
  start_worker() { # KIND PREFIX → worker_pid
    case "$1" in
      go)
        "$work/txbench" worker --amqp "$amqp_url" --queue "$2.jobs" --url "$url" --ca "$work/ca.pem" --bearer "$jwt" > "$work/$1.log" 2>&1 &
        worker_pid=$!
        for _ in $(seq 300); do grep -q "txbench worker started" "$work/$1.log" && return; sleep 0.1; done ;;
      *)
        local registry=""
        [ "$1" = ledger ] && registry="registry: {sqlite: $work/$2.db}"
        # registry: the SQLite registry with no ledger, which tells the ledger's cost from the registry's.
        [ "$1" = registry ] && registry="registry: {sqlite: $work/$2.db}
ledger: off"
        # LEDGER_FILE=1: the ledger in a file of its own (ledger: {sqlite: FILE}), not the registry's.
        [ "$1" = ledger ] && [ "${LEDGER_FILE:-}" = 1 ] && registry="$registry
ledger: {sqlite: $work/$2-ledger.db}"
        if [ "$1" = postgres ]; then
          local database="bench_tx_$(date +%s%N)"
          psql -q "$postgres_base" -c "CREATE DATABASE $database"
          registry="registry: {postgres: \"${postgres_base%/*}/$database\", postgres_connections: ${POSTGRES_CONNECTIONS:-8}}"
        fi
        cat > "$work/$2.yaml" <<YAML
metrics_address: null
amqp: {url: "$amqp_url"}
queues: {exchange: $2.push, jobs: $2.jobs, dead_letter_exchange: $2.dlx, dead_letters: $2.dead, results: $2.results, registry: $2.registry}
$registry
${NOW_PREFETCH:+lanes: {now_prefetch: $NOW_PREFETCH\}}
apps:
  - name: demo
    topic: com.example.app
    environment: sandbox
    url: $url
    ca_file: $work/ca.pem
    token: {key_file: $work/key.p8, key_id: BENCHKEY01, team_id: BENCHTEAM1}
YAML
        "${WORKER_BIN:-$bin/pushworker}" run --config "$work/$2.yaml" > "$work/$1.log" 2>&1 &
        worker_pid=$!
        for _ in $(seq 600); do grep -q "worker started" "$work/$1.log" && return; sleep 0.1; done ;;
    esac
    echo "the $1 worker did not start:" >&2; cat "$work/$1.log" >&2; exit 1
  }
  run_load() { # KIND RATE
    series=$((series + 1))
    local prefix="pushworker.bench.tx$series.$RANDOM"
    start_worker "$1" "$prefix"
    local worker0 broker0 server0 switches0 pg0=0
    # PostgreSQL's processes (its server and the worker's backends), for the postgres kind.
    pg_cpu() { local sum=0; for pid in $(pgrep -x postgres); do sum=$(python3 -c "print($sum + $(cpu_of $pid 2>/dev/null || echo 0))"); done; echo "$sum"; }
    # And its transactions (each statement outside a transaction is one).
    pg_xacts() { psql -qtA "$postgres_base" -c "SELECT sum(xact_commit + xact_rollback) FROM pg_stat_database"; }
    local xacts0=0
    [ "$1" = postgres ] && { pg0=$(pg_cpu); xacts0=$(pg_xacts); }
    worker0=$(cpu_of $worker_pid); switches0=$(switches_of $worker_pid); broker0=0; for pid in $broker_pid; do broker0=$(python3 -c "print($broker0 + $(cpu_of $pid))"); done
    server0=$(cpu_of $mock_pid)
    local threads0=""
    [ -n "${THREADS:-}" ] && [ "$2" = 0 ] && threads0=$(threads_of $worker_pid)
    # PERF=KIND: `perf record -g` of that worker over its back-to-back run, into PERF_OUT.
    local perf_pid=""
    if [ "${PERF:-}" = "$1" ] && [ "$2" = 0 ]; then
      perf record -g ${PERF_EVENTS:--F 999} -p "$worker_pid" -o "${PERF_OUT:-$PWD/perf-$1.data}" 2>/dev/null & perf_pid=$!
      sleep 0.5
    fi
    # COUNTS=KIND: that worker's calls of swift_retain and malloc per job over its back-to-back
    # run, counted by uprobes (`perf probe`, as root), and its system calls and context switches:
    # figures this machine's noise leaves alone.
    local counts_pid=""
    if [ "${COUNTS:-}" = "$1" ] && [ "$2" = 0 ]; then
      perf probe -q -x "$(ldd "$bin/pushworker" | awk '/libswiftCore.so/ {print $3}')" -a swift_retain 2>/dev/null || true
      # malloc of the allocator the running worker has mapped (glibc's, or jemalloc's when a build
      # or a WORKER_BIN wrapper brings it in).
      local allocator; allocator=$(awk '$6 ~ /\/libjemalloc\.so/ { print $6; exit }' "/proc/$worker_pid/maps")
      [ -n "$allocator" ] || allocator=$(ldd "$bin/pushworker" | awk '/libc.so.6/ {print $3}')
      # (A uprobe's name is unique across libraries: jemalloc's is je_malloc.)
      local malloc_event=probe_libc:malloc
      if [[ "$allocator" == */libjemalloc.so* ]]; then malloc_event=probe_libjemalloc:je_malloc; fi
      perf probe -q -x "$allocator" -a "$malloc_event=malloc" 2>/dev/null || true
      local concurrency; concurrency=$(ldd "$bin/pushworker" | awk '/libswift_Concurrency.so/ {print $3}')
      perf probe -q -x "$concurrency" -a swift_job_run 2>/dev/null || true
      perf probe -q -x "$concurrency" -a swift_task_create 2>/dev/null || true
      perf stat -x, -e probe_libswiftCore:swift_retain,"$malloc_event",probe_libswift_Concurrency:swift_job_run,probe_libswift_Concurrency:swift_task_create,raw_syscalls:sys_enter,context-switches \
        -p "$worker_pid" -o "$work/counts-$1.csv" & counts_pid=$!
      sleep 0.5
    fi
    "$work/txbench" load --amqp "$amqp_url" --queue "$prefix.jobs" --jobs "$jobs" --rate "$2" --series "$series" | tee "$work/load-$1-$2.txt"
    if [ -n "$perf_pid" ]; then kill -INT "$perf_pid"; wait "$perf_pid" || true; fi
    if [ -n "$counts_pid" ]; then
      kill -INT "$counts_pid"; wait "$counts_pid" || true
      python3 - "$work/counts-$1.csv" "$jobs" <<'PY' | tee -a "$work/load-$1-$2.txt"
import sys
counts = {line.split(',')[2].split(':')[-1]: int(line.split(',')[0]) for line in open(sys.argv[1]) if line.count(',') > 2 and line.split(',')[0].isdigit()}
jobs = int(sys.argv[2])
print(f"   calls per job: swift_retain {counts.get('swift_retain', 0) / jobs:.0f}, malloc {(counts.get('malloc', 0) + counts.get('je_malloc', 0)) / jobs:.0f}, tasks made {counts.get('swift_task_create', 0) / jobs:.1f}, "
      f"task jobs run {counts.get('swift_job_run', 0) / jobs:.1f} (uprobes; the run is slower for them); system calls {counts.get('sys_enter', 0) / jobs:.1f}, context switches {counts.get('context-switches', 0) / jobs:.1f}")
PY
    fi
    local broker1=0
    for pid in $broker_pid; do broker1=$(python3 -c "print($broker1 + $(cpu_of $pid))"); done
    [ "$1" = postgres ] && python3 -c "print(f'   PostgreSQL CPU per job: {($(pg_cpu) - $pg0) / $jobs * 1e6:.0f} µs, {($(pg_xacts) - $xacts0) / $jobs:.2f} transactions per job')" | tee -a "$work/load-$1-$2.txt"
    python3 -c "
jobs = $jobs
print(f'   CPU per job: worker {($(cpu_of $worker_pid) - $worker0) / jobs * 1e6:.0f} µs, broker {($broker1 - $broker0) / jobs * 1e6:.0f} µs, server {($(cpu_of $mock_pid) - $server0) / jobs * 1e6:.0f} µs; worker threads switched {($(switches_of $worker_pid) - $switches0) / jobs:.1f} times per job')" | tee -a "$work/load-$1-$2.txt"
    # THREADS=1: the switches and CPU per job of each kind of thread (by name), busiest first.
    if [ -n "$threads0" ]; then
      python3 - "$threads0" "$(threads_of $worker_pid)" "$jobs" <<'PY'
import json, sys
before, after, jobs = json.loads(sys.argv[1]), json.loads(sys.argv[2]), int(sys.argv[3])
kinds = {}
for tid, (name, switches, cpu) in after.items():
    was = before.get(tid, [name, 0, 0.0])
    kind = kinds.setdefault(name, [0, 0, 0.0])
    kind[0] += 1
    kind[1] += switches - was[1]
    kind[2] += cpu - was[2]
for name, (threads, switches, cpu) in sorted(kinds.items(), key=lambda item: -item[1][1]):
    if switches or cpu:
        print(f'     {name:<20} {threads:>3} thread(s): {switches / jobs:5.2f} switches, {cpu / jobs * 1e6:6.1f} µs CPU per job')
PY
    fi
    kill -TERM $worker_pid; wait $worker_pid 2>/dev/null || true; worker_pid=""
  }
  for kind in $kinds go; do
    echo "== $kind: $jobs one-device jobs back to back"
    run_load "$kind" 0
  done
  for kind in $kinds go; do
    half=$(python3 -c "import re; print(round(float(re.search(r'= (\d+) jobs/s', open('$work/load-$kind-0.txt').read()).group(1)) / 2))")
    # LATENCY_RATE: every worker's latency at that one rate instead, to compare settings alike.
    why="half its rate"
    [ -z "${LATENCY_RATE:-}" ] || { half="$LATENCY_RATE"; why="LATENCY_RATE"; }
    [[ "$half" =~ ^[1-9][0-9]*$ ]] || { echo "LATENCY_RATE must be a whole number of jobs/s above 0, not '$half'" >&2; exit 2; }
    echo "== $kind: $jobs one-device jobs at $half jobs/s ($why)"
    run_load "$kind" "$half"
  done
  python3 - "$work" "$kinds" <<'PY'
import os, re, sys
work = sys.argv[1]
names = {"ledger": "pushworker, SQLite registry and ledger", "postgres": "pushworker, PostgreSQL registry and ledger",
         "registry": "pushworker, SQLite registry, ledger: off",
         "off": "pushworker, no registry (no ledger)", "go": "Go peer worker"}
names = {kind: name for kind, name in names.items() if kind in sys.argv[2].split() + ["go"]}
figures = {}
for kind in names:
    full, half = open(f"{work}/load-{kind}-0.txt").read(), None
    import glob
    half = open([f for f in glob.glob(f"{work}/load-{kind}-*.txt") if not f.endswith("-0.txt")][0]).read()
    figures[kind] = dict(
        rate=float(re.search(r"= (\d+) jobs/s", full).group(1)),
        worker=float(re.search(r"worker (\d+) µs", full).group(1)), broker=float(re.search(r"broker (\d+) µs", full).group(1)),
        server=float(re.search(r"server (\d+) µs", full).group(1)),
        p50=float(re.search(r"p50 ([\d.]+) ms", half).group(1)), p99=float(re.search(r"p99 ([\d.]+) ms", half).group(1)))
print("== one-device jobs, back to back; latency at " + (f"{os.environ['LATENCY_RATE']} jobs/s" if os.environ.get("LATENCY_RATE") else "half each worker's rate"))
# `CPU vs Go`: the worker's CPU per job over the Go worker's in the same run, a figure that moves
# less from one machine to another than the microseconds do.
print(f"   {'worker':<40} {'jobs/s':>7} {'vs Go':>6} {'worker µs/job':>14} {'CPU vs Go':>10} {'broker µs/job':>14} {'server µs/job':>14} {'p50 ms':>7} {'p99 ms':>7}")
for kind, name in names.items():
    f = figures[kind]
    print(f"   {name:<40} {f['rate']:7.0f} {f['rate'] / figures['go']['rate']:6.2f} {f['worker']:14.0f} {f['worker'] / figures['go']['worker']:10.2f} {f['broker']:14.0f} {f['server']:14.0f} {f['p50']:7.1f} {f['p99']:7.1f}")
if "ledger" in figures and "off" in figures:
    print("== targets: pushworker with the ledger >= 1.0x the Go worker's rate (%.2f), <= 150 µs of worker CPU per job (%.0f); without a ledger <= 120 µs (%.0f)"
          % (figures["ledger"]["rate"] / figures["go"]["rate"], figures["ledger"]["worker"], figures["off"]["worker"]))
    # The microseconds were set on a machine where the Go worker took 138-156 µs a job.
    print("   the same against the Go worker's CPU (set where it took 138-156 µs): ledger <= 1.0x (%.2f), no ledger <= 0.8x (%.2f)"
          % (figures["ledger"]["worker"] / figures["go"]["worker"], figures["off"]["worker"] / figures["go"]["worker"]))
if "ledger" in figures and "postgres" in figures:
    print("== PostgreSQL's rate / SQLite's: %.2f (target >= 0.8); the PostgreSQL server's CPU is not in the worker's figure"
          % (figures["postgres"]["rate"] / figures["ledger"]["rate"]))
PY
  exit 0
fi

if [ "$mode" = fcm ]; then
  [ "$server" = go ] || { echo "bench.sh fcm runs against the Go server only (SERVER=go): it also answers the token endpoint" >&2; exit 2; }
  # A service account whose token endpoint is the Go server's /token (the grant is not checked there).
  openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$work/sa.key" 2>/dev/null
  python3 - "$work/sa.key" "$url/token" > "$work/service-account.json" <<'PY'
import json, sys
print(json.dumps({"type": "service_account", "project_id": "bench", "private_key_id": "bench", "private_key": open(sys.argv[1]).read(),
                  "client_email": "bench@bench.iam.gserviceaccount.com", "token_uri": sys.argv[2]}))
PY
  rounds="${ROUNDS:-2}"
  batch="${BATCH:-100}"
  for round in $(seq "$rounds"); do
    for client in apns fcm; do
      echo "== round $round: pushworker-bench $client --transport $transport --count $count --connections $connections --streams $streams --batch $batch"
      server_cpu=$(cpu_of $mock_pid); wall=$(now)
      if [ "$client" = apns ]; then
        "$bin/pushworker-bench" apns --transport "$transport" --url "$url" --ca-file "$work/ca.pem" --count "$count" --connections "$connections" \
          --streams "$streams" --batch "$batch" --key-file "$work/key.p8" --key-id BENCHKEY01 --team-id BENCHTEAM1 | tee "$work/$client-$round.txt"
      else
        "$bin/pushworker-bench" fcm --transport "$transport" --url "$url" --ca-file "$work/ca.pem" --count "$count" --connections "$connections" \
          --streams "$streams" --batch "$batch" --service-account "$work/service-account.json" | tee "$work/$client-$round.txt"
      fi
      mock_load "$server_cpu" "$(cpu_of $mock_pid)" "$wall" "$(now)"
    done
  done
  python3 - "$work" "$rounds" <<'PY'
import re, sys
work, rounds = sys.argv[1], int(sys.argv[2])
def figures(client, pattern):
    return [float(re.search(pattern, open(f"{work}/{client}-{r}.txt").read()).group(1)) for r in range(1, rounds + 1)]
rate = {c: sum(figures(c, r"= (\d+) (?:notifications|messages)/s")) / rounds for c in ("apns", "fcm")}
cpu = {c: sum(figures(c, r"= ([0-9.]+) µs per (?:notification|message)")) / rounds for c in ("apns", "fcm")}
print(f"== mean of {rounds} round(s): APNs {rate['apns']:.0f}/s at {cpu['apns']:.1f} µs CPU each; FCM {rate['fcm']:.0f}/s at {cpu['fcm']:.1f} µs CPU each")
print(f"== client CPU per message, FCM/APNs: {cpu['fcm'] / cpu['apns']:.2f} (target <= 1.0); rate FCM/APNs: {rate['fcm'] / rate['apns']:.2f}")
PY

  # End to end, the same server: broker → pushworker → APNs or FCM → results: one job of COUNT
  # APNs devices, one of COUNT Android devices (each split by the worker into chunk jobs), and,
  # with JOB_SIZE, APNs' devices again as jobs of that many. Every run's worker has the same
  # configuration (an app with both sides); then h2load against each endpoint, with the
  # connections and streams of the clients' runs. ROUNDS rounds, in turns (each other round the
  # other way round).
  ensure_broker
  broker_pid="$(deploy/local/rabbitmq.sh pid)"
  job_size="${JOB_SIZE:-}"
  jwt=$("$bin/pushworker" token --key-file "$work/key.p8" --key-id BENCHKEY01 --team-id BENCHTEAM1)
  # One device's body as the worker sends it for the e2e jobs (their notification, and android's
  # priority and ttl), with a token of the same form and length.
  python3 - > "$work/fcm-body.json" <<'PY'
import json
token = "bench00000000abcdefghijk:APA91bH" + "k7-_Qw" * 20
print(json.dumps({"message": {"token": token, "android": {"priority": "high", "ttl": "3600s"},
                              "notification": {"body": "Hello from pushworker", "title": "Benchmark"}}}, separators=(",", ":")), end="")
PY
  e2e_run() { # LABEL PLATFORM [JOB_SIZE]
    echo "== round $round: pushworker-bench e2e --platform $2${3:+ --job-size $3} --results ${RESULTS:-all} --count $count --connections $connections"
    local server_cpu
    server_cpu=$(cpu_of $mock_pid)
    "$bin/pushworker-bench" e2e --platform "$2" ${3:+--job-size "$3"} --service-account "$work/service-account.json" --results "${RESULTS:-all}" \
      --broker-pid "$broker_pid" --transport "$transport" --amqp "$(deploy/local/rabbitmq.sh url)" --url "$url" --ca-file "$work/ca.pem" \
      --count "$count" --connections "$connections" --jobs 0 --key-file "$work/key.p8" --key-id BENCHKEY01 --team-id BENCHTEAM1 \
      --topic com.example.app ${MAX_IN_FLIGHT:+--max-in-flight "$MAX_IN_FLIGHT"} ${RESULTS_TYPE:+--results-type "$RESULTS_TYPE"} | tee "$work/e2e-$1-$round.txt"
    # Over the timed window (publish to last result), not the worker's start and stop around it,
    # in which the server idles: its CPU in the whole run, of which the warm-up's is a trifle.
    local seconds
    seconds=$(grep -o 'devices in [0-9.]* s' "$work/e2e-$1-$round.txt" | grep -o '[0-9.]*')
    mock_load "$server_cpu" "$(cpu_of $mock_pid)" 0 "$seconds" | tee -a "$work/e2e-$1-$round.txt"
  }
  h2load_run() { # apns|fcm
    echo "== round $round: h2load -n $count -c $connections -m $streams against the $1 endpoint"
    local server_cpu wall
    server_cpu=$(cpu_of $mock_pid); wall=$(now)
    if [ "$1" = apns ]; then
      h2load -n "$count" -c "$connections" -m "$streams" -d "$work/payload.json" -H "authorization: bearer $jwt" -H "apns-topic: com.example.app" \
        -H "apns-push-type: alert" "$url/3/device/$token_hex" > "$work/h2load-$1-$round.txt"
    else
      h2load -n "$count" -c "$connections" -m "$streams" -d "$work/fcm-body.json" -H "content-type: application/json" \
        -H "authorization: Bearer bench-token" "$url/v1/projects/bench/messages:send" > "$work/h2load-$1-$round.txt"
    fi
    grep -E 'finished in|status codes:' "$work/h2load-$1-$round.txt" | sed 's/^ */   /'
    mock_load "$server_cpu" "$(cpu_of $mock_pid)" "$wall" "$(now)"
  }
  for round in $(seq "$rounds"); do
    order="apns ${job_size:+apns-jobs} fcm h2load-apns h2load-fcm"
    if [ $((round % 2)) = 0 ]; then order="h2load-fcm h2load-apns fcm ${job_size:+apns-jobs} apns"; fi
    for run in $order; do
      case "$run" in
        apns) e2e_run apns apns ;;
        apns-jobs) e2e_run apns-jobs apns "$job_size" ;;
        fcm) e2e_run fcm fcm ;;
        h2load-*) h2load_run "${run#h2load-}" ;;
      esac
    done
  done
  python3 - "$work" "$rounds" "$count" "$job_size" "${RESULTS:-all}" <<'PY'
import re, statistics, sys
work, rounds, count, size, results = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
def text(name, r):
    return open(f"{work}/{name}-{r}.txt").read()
def mean(name, pattern):
    return statistics.mean(float(re.search(pattern, text(name, r)).group(1)) for r in range(1, rounds + 1))
runs = {"apns": "APNs, one job", "fcm": "FCM, one job"}
if size:
    runs["apns-jobs"] = f"APNs, jobs of {size}"
rate = {k: mean(f"e2e-{k}", r"= (\d+) devices/s from publish") for k in runs}
cpu = {k: mean(f"e2e-{k}", r"worker CPU ([\d.]+) µs per device") for k in runs}
broker = {k: mean(f"e2e-{k}", r"broker CPU ([\d.]+) µs per device") for k in runs}
h2 = {k: mean(f"h2load-{k}", r"finished in [^,]*, ([\d.]+) req/s") for k in ("apns", "fcm")}
endpoint = {"apns": "apns", "apns-jobs": "apns", "fcm": "fcm"}
short = [f"{k} round {r}" for k in runs for r in range(1, rounds + 1)
         if int(re.search(r"\((\d+) delivered", text(f"e2e-{k}", r)).group(1)) != count]
bottleneck = [f"{k} round {r}" for k in runs for r in range(1, rounds + 1) if "the server was the bottleneck" in text(f"e2e-{k}", r)]
print(f"== end to end, {count} devices, results {results}, mean of {rounds} round(s); h2load on the same server: "
      f"APNs {h2['apns']:.0f} req/s, FCM {h2['fcm']:.0f} req/s")
for k, label in runs.items():
    print(f"   {label + ':':<21} {rate[k]:6.0f} devices/s, worker CPU {cpu[k]:5.1f} µs per device, broker CPU {broker[k]:5.1f} µs per device, "
          f"rate/h2load {rate[k] / h2[endpoint[k]]:.2f}")
print(f"== worker CPU per device, FCM/APNs: {cpu['fcm'] / cpu['apns']:.2f} (target <= 1.0); rate FCM/APNs: {rate['fcm'] / rate['apns']:.2f}")
print(f"== rate/h2load: APNs {rate['apns'] / h2['apns']:.2f}, FCM {rate['fcm'] / h2['fcm']:.2f} (h2load FCM/APNs {h2['fcm'] / h2['apns']:.2f})")
print("== the server was the bottleneck in an e2e run: " + (", ".join(bottleneck) if bottleneck else "in none"))
if short:
    print("== NOT every device delivered in: " + ", ".join(short))
PY
  exit 0
fi

if [ "$mode" = cluster ]; then
  cluster_started_here=false
  ensure_broker
  if ! deploy/local/rabbitmq.sh cluster status >/dev/null 2>&1; then deploy/local/rabbitmq.sh cluster start >/dev/null; cluster_started_here=true; fi
  trap 'kill $mock_pid ${worker_pid:-} 2>/dev/null || true; rm -rf "$work"; if $broker_started_here; then deploy/local/rabbitmq.sh stop >/dev/null || true; fi; if $cluster_started_here; then deploy/local/rabbitmq.sh cluster stop >/dev/null || true; fi' EXIT
  single_pids="$(deploy/local/rabbitmq.sh pid)"
  cluster_pids="$(deploy/local/rabbitmq.sh cluster pids)"
  brokers_cpu() { local total=0; for pid in $1; do total=$(python3 -c "print($total + $(cpu_of "$pid"))"); done; echo "$total"; }
  run_e2e() { # LABEL URLS WORKERS PIDS [RESULTS_TYPE]
    echo "== $1: pushworker-bench e2e --count $count --workers $3 --results-type ${5:-quorum}"
    local before after server_cpu wall
    before=$(brokers_cpu "$4"); server_cpu=$(cpu_of $mock_pid); wall=$(now)
    "$bin/pushworker-bench" e2e --transport "$transport" --amqp "$2" --url "$url" --ca-file "$work/ca.pem" --count "$count" --jobs 0 \
      --workers "$3" --results-type "${5:-quorum}" --key-file "$work/key.p8" --key-id BENCHKEY01 --team-id BENCHTEAM1 --topic com.example.app | tee "$work/$1.txt"
    after=$(brokers_cpu "$4")
    python3 -c "print(f'   broker CPU (every node): {$after - $before:.1f} s = {($after - $before) / $count * 1e6:.1f} µs per device')"
    mock_load "$server_cpu" "$(cpu_of $mock_pid)" "$wall" "$(now)"
  }
  run_e2e single-node "$(deploy/local/rabbitmq.sh url)" 1 "$single_pids"
  # What the quorum default costs a single node, beside the classic queue it may choose instead.
  run_e2e single-node-classic "$(deploy/local/rabbitmq.sh url)" 1 "$single_pids" classic
  run_e2e cluster-1-worker "$(deploy/local/rabbitmq.sh cluster urls)" 1 "$cluster_pids"
  run_e2e cluster-2-workers "$(deploy/local/rabbitmq.sh cluster urls)" 2 "$cluster_pids"
  rate() { grep -o '= [0-9]* devices/s' "$work/$1.txt" | grep -o '[0-9]*'; }
  echo "== devices/s, single node, classic/quorum results queue: $(python3 -c "print(f'{$(rate single-node-classic)/$(rate single-node):.2f}')")"
  echo "== devices/s, cluster/single node: one worker $(python3 -c "print(f'{$(rate cluster-1-worker)/$(rate single-node):.2f}')"), two workers $(python3 -c "print(f'{$(rate cluster-2-workers)/$(rate single-node):.2f}')")"
  exit 0
fi

if [ "$mode" = localtime ]; then
  [ -n "${2:-}" ] || count=1000000
  ensure_broker
  echo "== pushworker-bench e2e --group --local-time --count $count"
  "$bin/pushworker-bench" e2e --group --local-time --count "$count" --transport "$transport" \
    --amqp "$(deploy/local/rabbitmq.sh url)" --url "$url" --ca-file "$work/ca.pem" --jobs 0 \
    --key-file "$work/key.p8" --key-id BENCHKEY01 --team-id BENCHTEAM1 --topic com.example.app
  exit 0
fi

if [ "$mode" = cancel ]; then
  ensure_broker
  echo "== pushworker-bench e2e --count $count --cancel-after $((count / 4)) --ledger sqlite"
  "$bin/pushworker-bench" e2e --count "$count" --cancel-after "$((count / 4))" --ledger sqlite --transport "$transport" \
    --amqp "$(deploy/local/rabbitmq.sh url)" --url "$url" --ca-file "$work/ca.pem" --jobs 0 \
    --key-file "$work/key.p8" --key-id BENCHKEY01 --team-id BENCHTEAM1 --topic com.example.app
  exit 0
fi

if [ "$mode" = schedule ]; then
  [ -n "${2:-}" ] || count=100000
  ensure_broker
  postgres_started_here=false
  if ! deploy/local/postgres.sh status >/dev/null 2>&1; then deploy/local/postgres.sh start >/dev/null; postgres_started_here=true; fi
  trap 'kill $mock_pid ${worker_pid:-} 2>/dev/null || true; rm -rf "$work"; if $broker_started_here; then deploy/local/rabbitmq.sh stop >/dev/null || true; fi; if $postgres_started_here; then deploy/local/postgres.sh stop >/dev/null || true; fi' EXIT
  base="$(deploy/local/postgres.sh url)"
  for ledger in ${SCHEDULE_LEDGERS:-sqlite postgres}; do
    extra=()
    if [ "$ledger" = postgres ]; then
      database="bench_schedule_$(date +%s%N)"
      psql -q "$base" -c "CREATE DATABASE $database"
      extra=(--postgres-url "${base%/*}/$database")
    fi
    echo "== pushworker-bench e2e --schedule $count --schedule-over ${SCHEDULE_OVER:-60} --ledger $ledger"
    [ -z "${NOW_PREFETCH:-}" ] || extra+=(--now-prefetch "$NOW_PREFETCH")
    [ -z "${DUE_PREFETCH:-}" ] || extra+=(--due-prefetch "$DUE_PREFETCH")
    "$bin/pushworker-bench" e2e --schedule "$count" --schedule-over "${SCHEDULE_OVER:-60}" --schedule-lead "${SCHEDULE_LEAD:-20}" \
      --ledger "$ledger" "${extra[@]}" --transport "$transport" --amqp "$(deploy/local/rabbitmq.sh url)" --url "$url" --ca-file "$work/ca.pem" \
      --jobs 0 --key-file "$work/key.p8" --key-id BENCHKEY01 --team-id BENCHTEAM1 --topic com.example.app
    if [ "$ledger" = postgres ]; then psql -q "$base" -c "DROP DATABASE IF EXISTS $database" || true; fi
  done
  exit 0
fi

if [ "$mode" = ledger ]; then
  stores="${LEDGER_STORES:-sqlite postgres}"
  for store in $stores; do
    case "$store" in sqlite|postgres) ;; *) echo "LEDGER_STORES holds sqlite and/or postgres, not '$store'" >&2; exit 2 ;; esac
  done
  [ -n "${stores// /}" ] || { echo "LEDGER_STORES names no store (sqlite and/or postgres)" >&2; exit 2; }
  ensure_broker
  postgres_started_here=false
  if ! deploy/local/postgres.sh status >/dev/null 2>&1; then deploy/local/postgres.sh start >/dev/null; postgres_started_here=true; fi
  trap 'kill $mock_pid ${worker_pid:-} 2>/dev/null || true; rm -rf "$work"; if $broker_started_here; then deploy/local/rabbitmq.sh stop >/dev/null || true; fi; if $postgres_started_here; then deploy/local/postgres.sh stop >/dev/null || true; fi' EXIT
  base="$(deploy/local/postgres.sh url)"
  broker_pid="$(deploy/local/rabbitmq.sh pid)"
  # CPU seconds of the PostgreSQL server so far: the postmaster, the backends it has reaped (its
  # cutime and cstime: a benchmark's worker exits, and its backends with it, before the reading)
  # and those still running.
  postmaster="$(head -1 "${PUSHWORKER_POSTGRES_DIR:-/tmp/pushworker-postgres-15432}/data/postmaster.pid")"
  postgres_cpu() {
    { awk -v t="$ticks" '{ printf "%.3f\n", ($14 + $15 + $16 + $17) / t }' "/proc/$postmaster/stat"
      for child in $(pgrep -P "$postmaster"); do cpu_of "$child" 2>/dev/null && echo; done; } | awk '{ total += $1 } END { printf "%.2f", total }'
  }
  # ROUNDS (default 2) rounds, in turns (off, SQLite, PostgreSQL off, on; then the other way
  # round; …), so that a machine that slows down or speeds up during the run weighs on both
  # sides of each ratio alike. The ratios are of the mean rates.
  rounds="${ROUNDS:-2}"
  [[ "$rounds" =~ ^[1-9][0-9]*$ ]] || { echo "ROUNDS must be a whole number of 1 or more, not '$rounds'" >&2; exit 2; }
  for round in $(seq "$rounds"); do
    order=""
    for store in $stores; do
      case "$store" in sqlite) order="$order off sqlite" ;; postgres) order="$order postgres-off postgres" ;; esac
    done
    if [ $((round % 2)) = 0 ]; then order="$(echo $order | tr ' ' '\n' | tac | tr '\n' ' ')"; fi
    for ledger in $order; do
      extra=()
      if [[ "$ledger" == postgres* ]]; then
        database="bench_ledger_$(date +%s%N)"
        psql -q "$base" -c "CREATE DATABASE $database"
        extra=(--postgres-url "${base%/*}/$database")
      fi
      echo "== round $round: pushworker-bench e2e --results batched --ledger $ledger --count $count"
      before=$(postgres_cpu); server_cpu=$(cpu_of $mock_pid); wall=$(now)
      "$bin/pushworker-bench" e2e --results batched --ledger "$ledger" "${extra[@]}" --random-tokens --broker-pid "$broker_pid" --transport "$transport" \
        --amqp "$(deploy/local/rabbitmq.sh url)" --url "$url" --ca-file "$work/ca.pem" --count "$count" --connections "$connections" --jobs 0 \
        --key-file "$work/key.p8" --key-id BENCHKEY01 --team-id BENCHTEAM1 --topic com.example.app \
        ${MAX_IN_FLIGHT:+--max-in-flight "$MAX_IN_FLIGHT"} | tee "$work/ledger-$ledger-$round.txt"
      after=$(postgres_cpu)
      python3 -c "print(f'   PostgreSQL CPU (server and backends): {$after - $before:.2f} s = {($after - $before) / $count * 1e6:.1f} µs per device')" |
        tee -a "$work/ledger-$ledger-$round.txt"
      mock_load "$server_cpu" "$(cpu_of $mock_pid)" "$wall" "$(now)"
      if [[ "$ledger" == postgres* ]]; then
        # Committed transactions in the run's database: the registry's reads, and one per ledger batch.
        psql -tAq "$base" -c "SELECT 'PostgreSQL transactions committed: ' || xact_commit FROM pg_stat_database WHERE datname = '$database'" | sed 's/^/   /'
        psql -q "$base" -c "DROP DATABASE IF EXISTS $database" || true
      fi
    done
  done
  python3 - "$work" "$rounds" <<'PY'
import os, re, statistics, sys
work, rounds = sys.argv[1], int(sys.argv[2])
def figures(ledger, pattern):
    return [float(re.search(pattern, open(f"{work}/ledger-{ledger}-{r}.txt").read()).group(1)) for r in range(1, rounds + 1)]
ran = [l for l in ("off", "sqlite", "postgres-off", "postgres") if os.path.exists(f"{work}/ledger-{l}-1.txt")]
rate = {l: figures(l, r"= (\d+) devices/s") for l in ran}
cpu = {l: statistics.mean(figures(l, r"worker CPU ([\d.]+) µs")) for l in rate}
store = {l: statistics.mean(figures(l, r"PostgreSQL CPU \(server and backends\): [\d.]+ s = ([\d.]+) µs")) for l in rate}
peak = {l: max(figures(l, r"VmHWM of the pushworker run process\) ([\d.]+)")) for l in rate}
mean = {l: statistics.mean(v) for l, v in rate.items()}
each = lambda on, off: ", ".join(f"{a / b:.3f}" for a, b in zip(rate[on], rate[off]))
ratios, cpus, peaks = [], [f"off {cpu['off']:.1f} µs"] if "off" in rate else [], []
if "sqlite" in rate:
    ratios.append(f"SQLite {mean['sqlite'] / mean['off']:.3f} (off {mean['off']:.0f}, on {mean['sqlite']:.0f}; each round {each('sqlite', 'off')})")
    cpus.append(f"SQLite {cpu['sqlite']:.1f} µs")
    peaks.append(f"off {peak['off']} MiB, SQLite {peak['sqlite']} MiB ({peak['sqlite'] - peak['off']:+.1f})")
if "postgres" in rate:
    ratios.append(f"PostgreSQL {mean['postgres'] / mean['postgres-off']:.3f} (registry, ledger off {mean['postgres-off']:.0f}, on {mean['postgres']:.0f}; "
                  f"each round {each('postgres', 'postgres-off')})")
    cpus.append(f"PostgreSQL registry off {cpu['postgres-off']:.1f} µs, on {cpu['postgres']:.1f} µs; "
                f"PostgreSQL server CPU per device: registry off {store['postgres-off']:.1f} µs, ledger on {store['postgres']:.1f} µs")
    peaks.append(f"PostgreSQL off {peak['postgres-off']} MiB, on {peak['postgres']} MiB ({peak['postgres'] - peak['postgres-off']:+.1f})")
print(f"== devices/s with the ledger / without, mean of {rounds} round(s) in turns: {'; '.join(ratios)}; target >= 0.90")
print(f"== worker CPU per device: {', '.join(cpus)}")
print(f"== worker peak memory: {', '.join(peaks)}; target +10 MiB at most")
PY
  exit 0
fi

if [ "$mode" = lanes ]; then
  ensure_broker
  count="${2:-300000}"
  echo "== pushworker-bench e2e --lanes --count $count --interval-ms ${INTERVAL_MS:-250} --connections $connections"
  server_cpu=$(cpu_of $mock_pid); wall=$(now)
  "$bin/pushworker-bench" e2e --lanes --interval-ms "${INTERVAL_MS:-250}" --transport "$transport" --amqp "$(deploy/local/rabbitmq.sh url)" --url "$url" \
    --ca-file "$work/ca.pem" --count "$count" --connections "$connections" --jobs 0 --key-file "$work/key.p8" --key-id BENCHKEY01 \
    --team-id BENCHTEAM1 --topic com.example.app ${MAX_IN_FLIGHT:+--max-in-flight "$MAX_IN_FLIGHT"} ${NOW_PREFETCH:+--now-prefetch "$NOW_PREFETCH"}
  mock_load "$server_cpu" "$(cpu_of $mock_pid)" "$wall" "$(now)"
  exit 0
fi

mock_cpu_0=$(cpu_of $mock_pid); wall_0=$(now)
if [ "$mode" = apns ]; then
  batch="${BATCH:-100}"
  echo "== pushworker-bench apns --transport $transport --count $count --connections $connections --streams $streams --batch $batch"
  "$bin/pushworker-bench" apns --transport "$transport" --url "$url" --ca-file "$work/ca.pem" --count "$count" --connections "$connections" \
    --streams "$streams" --batch "$batch" --key-file "$work/key.p8" --key-id BENCHKEY01 --team-id BENCHTEAM1 \
    --payload-file "$work/payload.json" --token "$token_hex" | tee "$work/ours.txt"
  rate_pattern='= [0-9]* notifications/s'
else
  ensure_broker
  broker_pid="$(deploy/local/rabbitmq.sh pid)"
  if [ "$mode" = modes ]; then
    # One e2e run per results mode, each with a new worker (the large job only; the latency
    # of one-device jobs once, after the last), then h2load below.
    for results in all batched failures none; do
      echo "== pushworker-bench e2e --results $results --transport $transport --count $count --connections $connections"
      "$bin/pushworker-bench" e2e --results "$results" --broker-pid "$broker_pid" --transport "$transport" --amqp "$(deploy/local/rabbitmq.sh url)" \
        --url "$url" --ca-file "$work/ca.pem" --count "$count" --connections "$connections" --jobs "$([ $results = none ] && echo 1000 || echo 0)" \
        --key-file "$work/key.p8" --key-id BENCHKEY01 --team-id BENCHTEAM1 --topic com.example.app \
        ${MAX_IN_FLIGHT:+--max-in-flight "$MAX_IN_FLIGHT"} ${RESULTS_TYPE:+--results-type "$RESULTS_TYPE"} | tee "$work/mode-$results.txt"
    done
    cp "$work/mode-all.txt" "$work/ours.txt"
  else
    echo "== pushworker-bench e2e --results ${RESULTS:-all} --transport $transport --count $count --connections $connections (broker $(deploy/local/rabbitmq.sh url | sed 's/:[^:@]*@/:***@/'))"
    "$bin/pushworker-bench" e2e --results "${RESULTS:-all}" --broker-pid "$broker_pid" --transport "$transport" --amqp "$(deploy/local/rabbitmq.sh url)" --url "$url" --ca-file "$work/ca.pem" --count "$count" \
      --connections "$connections" --key-file "$work/key.p8" --key-id BENCHKEY01 --team-id BENCHTEAM1 \
      --topic com.example.app ${JOB_SIZE:+--job-size "$JOB_SIZE"} ${NOW_PREFETCH:+--now-prefetch "$NOW_PREFETCH"} ${JOBS:+--jobs "$JOBS"} ${MAX_IN_FLIGHT:+--max-in-flight "$MAX_IN_FLIGHT"} ${RESULTS_TYPE:+--results-type "$RESULTS_TYPE"} ${GROUP:+--group} ${GROUP_FIRST:+--group-first} ${COMPARE_METRICS:+--compare-metrics "$COMPARE_METRICS"} | tee "$work/ours.txt"
  fi
  rate_pattern="= [0-9]* devices/s from publish"
  [ -n "${COMPARE_METRICS:-}" ] && rate_pattern="= [0-9]* devices/s"
fi

mock_cpu_1=$(cpu_of $mock_pid); wall_1=$(now)
mock_load "$mock_cpu_0" "$mock_cpu_1" "$wall_0" "$wall_1"

jwt=$("$bin/pushworker" token --key-file "$work/key.p8" --key-id BENCHKEY01 --team-id BENCHTEAM1)
echo "== h2load -n $count -c $connections -m $streams -d payload.json $url/3/device/<token>"
TIMEFORMAT='%U %S'
{ time h2load -n "$count" -c "$connections" -m "$streams" -d "$work/payload.json" \
  -H "authorization: bearer $jwt" -H "apns-topic: com.example.app" -H "apns-push-type: alert" \
  "$url/3/device/$token_hex" > "$work/h2load.txt" ; } 2> "$work/h2load.time"
mock_cpu_2=$(cpu_of $mock_pid); wall_2=$(now)
grep -E 'finished in|requests:|status codes:' "$work/h2load.txt"
h2load_cpu=$(awk '{ print $1 + $2 }' "$work/h2load.time")
echo "   h2load CPU (user + system) $h2load_cpu s = $(python3 -c "print(f'{$h2load_cpu / $count * 1e6:.1f}')") µs per request"
mock_load "$mock_cpu_1" "$mock_cpu_2" "$wall_1" "$wall_2"

ours=$(grep -o "$rate_pattern" "$work/ours.txt" | head -1 | grep -o "[0-9]*")
theirs=$(grep -o 'finished in [^,]*, [0-9.]* req/s' "$work/h2load.txt" | grep -o '[0-9.]* req/s' | grep -o '[0-9.]*')
target=$([ "$mode" = apns ] && echo 0.9 || echo 0.7)
echo "== ratio pushworker/h2load: $(python3 -c "print(f'{$ours/$theirs:.2f}')") (target >= $target)"
if [ "$mode" = modes ]; then
  echo "== results modes, $count devices, h2load $theirs req/s against the same server in the same run"
  printf '%-9s %12s %9s %18s %18s %12s\n' results devices/s /h2load "worker µs/device" "broker µs/device" "worker peak"
  for results in all batched failures none; do
    file="$work/mode-$results.txt"
    rate=$(grep -o '= [0-9]* devices/s from publish' "$file" | grep -o '[0-9]*' | head -1)
    worker_us=$(grep -o 'worker CPU [0-9.]* µs per device' "$file" | grep -o '[0-9.]*' | head -1)
    broker_us=$(grep -o 'broker CPU [0-9.]* µs per device' "$file" | grep -o '[0-9.]*' | head -1)
    peak=$(grep -o 'process) [0-9.]* MiB' "$file" | grep -o '[0-9.]* MiB')
    printf '%-9s %12s %9s %18s %18s %12s\n' "$results" "$rate" "$(python3 -c "print(f'{$rate/$theirs:.2f}')")" "$worker_us" "$broker_us" "$peak"
  done
  grep -h 'one-device job latency' "$work"/mode-*.txt || true
fi
if [ "$mode" = apns ]; then
  client_us=$(grep -o '[0-9.]* µs per notification' "$work/ours.txt" | grep -o '^[0-9.]*')
  echo "== client CPU per notification, pushworker/h2load: $(python3 -c "print(f'{$client_us / ($h2load_cpu / $count * 1e6):.2f}')") (target <= 1.3)"
fi
