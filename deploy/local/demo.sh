#!/usr/bin/env bash
# The demo: a local RabbitMQ, the mock APNs, and a pushworker worker. A job is published the way a
# backend would, the worker sends it, and its results are read back; then an invalid job is
# dead-lettered with its reason. Everything runs on 127.0.0.1; what the demo started, it stops
# at the end (a broker node that was already running is left running).
set -euo pipefail
cd "$(dirname "$0")/../.."
source deploy/local/swift-path.sh

broker_started_here=false
work=""
cleanup() {
  [ -n "${worker_pid:-}" ] && kill "$worker_pid" 2>/dev/null && wait "$worker_pid" 2>/dev/null || true
  [ -n "${mock_pid:-}" ] && kill "$mock_pid" 2>/dev/null || true
  [ -n "$work" ] && rm -rf "$work"
  if $broker_started_here; then deploy/local/rabbitmq.sh stop || true; fi
}
trap cleanup EXIT

deploy/local/install-deps.sh
if ! deploy/local/rabbitmq.sh status >/dev/null 2>&1; then
  deploy/local/rabbitmq.sh start
  broker_started_here=true
fi
echo "== building pushworker and mock-apns (the first build takes about 8 minutes on 2 cores)"
swift build --product pushworker
swift build --product mock-apns
bin="$(swift build --show-bin-path)"
url="$(deploy/local/rabbitmq.sh url)"

work="$(mktemp -d /tmp/pushworker-demo-XXXXXX)"

echo "== making a throw-away CA, server certificate and APNs signing key in $work"
deploy/local/make-pki.sh "$work"

echo "== starting the mock APNs (the third device in examples/job.json is 'unregistered')"
"$bin/mock-apns" --port 0 --cert "$work/server.pem" --key "$work/server.key" \
  --provider-key "DEMOKEY001:DEMOTEAM01:$work/key.pub" --topic com.example.demo \
  --unregistered deaddeaddeaddeaddeaddeaddeaddeaddeaddeaddeaddeaddeaddeaddeaddead > "$work/mock.log" 2>&1 &
mock_pid=$!
for _ in $(seq 100); do grep -q listening "$work/mock.log" && break; sleep 0.1; done
apns_url=$(grep -o 'https://[0-9.:]*' "$work/mock.log" | head -1)
echo "   $apns_url"

cat > "$work/pushworker.yaml" <<YAML
amqp:
  url: $url
apps:
  - name: demo
    topic: com.example.demo
    environment: sandbox
    url: $apns_url
    ca_file: $work/ca.pem
    token: {key_file: $work/key.p8, key_id: DEMOKEY001, team_id: DEMOTEAM01}
YAML

echo "== starting the worker: pushworker run --config pushworker.yaml"
"$bin/pushworker" run --config "$work/pushworker.yaml" 2> "$work/worker.log" &
worker_pid=$!
for _ in $(seq 100); do grep -q "worker started" "$work/worker.log" && break; sleep 0.1; done

echo "== publishing examples/job.json to exchange 'push' with routing key 'jobs'"
"$bin/pushworker" enqueue --amqp "$url" --exchange push --routing-key jobs --file examples/job.json
echo "== results from push.results (one per device, then the summary):"
"$bin/pushworker" tail --amqp "$url" --queue push.results --count 4

echo "== publishing an invalid job (priority 7); it is dead-lettered with its reason:"
echo '{"app": "demo", "audience": {"tokens": []}, "payload": {}, "priority": 7}' \
  | "$bin/pushworker" enqueue --amqp "$url" --exchange push --routing-key jobs >/dev/null
"$bin/pushworker" tail --amqp "$url" --queue push.dead --count 1 --headers

echo "== stopping the worker with SIGTERM"
kill -TERM "$worker_pid"; wait "$worker_pid"; echo "   exit status $?"; worker_pid=""
echo "== worker log:"
sed 's/^/   /' "$work/worker.log"
