#!/usr/bin/env bash
# The README's test command: installs what is missing, starts a throw-away RabbitMQ node, a
# throw-away three-node RabbitMQ cluster and a throw-away PostgreSQL (for the registry's
# PostgreSQL store), runs every test against them, stops
# what it started, and exits with the tests' status.
set -euo pipefail
cd "$(dirname "$0")/../.."
source deploy/local/swift-path.sh

port="${PUSHWORKER_RABBITMQ_PORT:-5672}"
export PUSHWORKER_RABBITMQ_PORT="$port"
export PUSHWORKER_RABBITMQ_DIR="${PUSHWORKER_RABBITMQ_DIR:-/tmp/pushworker-rabbitmq-$port}"
export PUSHWORKER_TEST_AMQP_URL="${PUSHWORKER_TEST_AMQP_URL:-amqp://guest:guest@127.0.0.1:$port/}"
export PUSHWORKER_TEST_AMQPS_URL="${PUSHWORKER_TEST_AMQPS_URL:-amqps://guest:guest@localhost:$((port - 1))/?cacertfile=$PUSHWORKER_RABBITMQ_DIR/tls/ca.pem}"
export PUSHWORKER_TEST_RABBITMQ_NODE="${PUSHWORKER_RABBITMQ_NODE:-rabbit@localhost}"

deploy/local/install-deps.sh

started_here=false
if ! deploy/local/rabbitmq.sh status >/dev/null 2>&1; then
  # A node of our own starts empty: tests leave durable queues behind.
  deploy/local/rabbitmq.sh reset
  deploy/local/rabbitmq.sh start
  started_here=true
fi
# The three-node cluster for the cluster suite (ClusterTests), on ports 5701/5711/5721.
cluster_started_here=false
if ! deploy/local/rabbitmq.sh cluster status >/dev/null 2>&1; then
  deploy/local/rabbitmq.sh cluster reset
  deploy/local/rabbitmq.sh cluster start
  cluster_started_here=true
fi
export PUSHWORKER_TEST_CLUSTER_URLS="${PUSHWORKER_TEST_CLUSTER_URLS:-$(deploy/local/rabbitmq.sh cluster urls)}"
postgres_started_here=false
if ! deploy/local/postgres.sh status >/dev/null 2>&1; then
  deploy/local/postgres.sh reset
  deploy/local/postgres.sh start
  postgres_started_here=true
fi
export PUSHWORKER_TEST_POSTGRES_URL="${PUSHWORKER_TEST_POSTGRES_URL:-$(deploy/local/postgres.sh url)}"
# The tests' temporary files (configurations, keys, databases, the workers' files) go to a
# directory of this run, removed at the end. Others may read it: rabbitmqctl runs as the rabbitmq
# user and reads the definitions files the tests write there, so it is under /tmp whatever the
# caller's TMPDIR (which that user may not be able to reach).
test_tmp="$(mktemp -d /tmp/pushworker-tests.XXXXXX)"
chmod 755 "$test_tmp"
stop_servers() {
  rm -rf "$test_tmp"
  if $started_here; then deploy/local/rabbitmq.sh stop || true; fi
  if $postgres_started_here; then deploy/local/postgres.sh stop || true; fi
  if $cluster_started_here; then deploy/local/rabbitmq.sh cluster stop || true; fi
}
trap stop_servers EXIT

# Log lines of the AMQP and APNs clients inside the test process go to a file: the broker-restart
# and fault tests make them log reconnects and failures on purpose.
export PUSHWORKER_TEST_LOG="${PUSHWORKER_TEST_LOG:-$PWD/.build/test-logs/tests-$(date +%Y%m%d-%H%M%S).log}"
mkdir -p "$(dirname "$PUSHWORKER_TEST_LOG")"
echo "== log lines of the clients inside the tests (reconnects and faults are expected there): $PUSHWORKER_TEST_LOG"

# Each pass's output is kept beside the client log, and its failures are printed again at the end:
# with tests running in parallel, a failure's lines are far from the summary a CI log shows.
outputs="${PUSHWORKER_TEST_LOG%.log}"
rm -f "$outputs.swift-test.out" "$outputs.swift-test-curl.out"
failures() {
  grep -a -A8 -E 'recorded an issue|recorded [0-9]+ issues' "$1" || true
}
started_at=$SECONDS
status=0
TMPDIR="$test_tmp" swift test "$@" 2>&1 | tee "$outputs.swift-test.out" || status=$?
echo "== swift test exited $status after $((SECONDS - started_at)) s (build included)"
# The worker-level suites again on the second APNs transport (libcurl): the first pass ran them on
# the default (nghttp2), and the client's own tests already run on both. The SIGKILL, broker-restart
# and registry-concurrency suites are left out: what they exercise does not depend on the transport.
curl_suites=(WorkerProcessTests JobContractTests LiveActivityWorkerTests BatchedResultsTests InvalidJobCorpusTests OperatorEndpointTests RegistryWorkerTests SendCommandTests JobProcessorTests WorkerVolumeTests)
if [ $# -eq 0 ] && [ $status -eq 0 ]; then
  # A suite renamed or removed would otherwise drop out of this pass without a word.
  listed="$(swift test list --skip-build 2>/dev/null)"
  for suite in "${curl_suites[@]}"; do
    grep -q "\.$suite/" <<<"$listed" || { echo "== the curl pass names $suite, which has no tests: update curl_suites in $0" >&2; status=1; }
  done
  curl_started_at=$SECONDS
  TMPDIR="$test_tmp" PUSHWORKER_TEST_TRANSPORT=curl swift test --skip-build --filter "$(IFS='|'; echo "${curl_suites[*]}")" 2>&1 | tee "$outputs.swift-test-curl.out" || status=$?
  echo "== worker suites on the curl transport: swift test exited $status after $((SECONDS - curl_started_at)) s"
fi
# The deployment manifests against Kubernetes' schemas (offline); only on a full run.
if [ $# -eq 0 ]; then
  deploy/check.sh || status=$?
fi
if [ $status -ne 0 ]; then
  for out in "$outputs.swift-test.out" "$outputs.swift-test-curl.out"; do
    [ -f "$out" ] || continue
    echo "== failures in $(basename "$out") (the whole output is in $out)"
    failures "$out"
  done
fi
exit $status
