#!/usr/bin/env bash
# The demo: a local RabbitMQ, the mock APNs, and a pushworker worker. A job is published the way a
# backend would, the worker sends it, and its results are read back; then an invalid job is
# dead-lettered with its reason. Everything runs on 127.0.0.1; what the demo started, it stops
# at the end (a broker node that was already running is left running).
#
# CLUSTER=1: on a three-node RabbitMQ cluster instead (deploy/local/rabbitmq.sh cluster); at the
# end the node under the worker's jobs connection is killed, and one more job goes through.
set -euo pipefail
cd "$(dirname "$0")/../.."
source deploy/local/swift-path.sh

broker_started_here=false
work=""
cleanup() {
  [ -n "${worker_pid:-}" ] && kill "$worker_pid" 2>/dev/null && wait "$worker_pid" 2>/dev/null || true
  [ -n "${mock_pid:-}" ] && kill "$mock_pid" 2>/dev/null || true
  [ -n "$work" ] && rm -rf "$work"
  if $broker_started_here; then
    if [ -n "${CLUSTER:-}" ]; then deploy/local/rabbitmq.sh cluster stop || true; else deploy/local/rabbitmq.sh stop || true; fi
  fi
}
trap cleanup EXIT

deploy/local/install-deps.sh
if [ -n "${CLUSTER:-}" ]; then
  if ! deploy/local/rabbitmq.sh cluster status >/dev/null 2>&1; then
    deploy/local/rabbitmq.sh cluster start
    broker_started_here=true
  fi
elif ! deploy/local/rabbitmq.sh status >/dev/null 2>&1; then
  deploy/local/rabbitmq.sh start
  broker_started_here=true
fi
echo "== building pushworker and mock-apns (the first build takes about 8 minutes on 2 cores)"
swift build --product pushworker
swift build --product mock-apns
bin="$(swift build --show-bin-path)"
# One URL, or on a cluster every node's, comma-separated (the worker and the commands take both).
if [ -n "${CLUSTER:-}" ]; then url="$(deploy/local/rabbitmq.sh cluster urls)"; else url="$(deploy/local/rabbitmq.sh url)"; fi

work="$(mktemp -d /tmp/pushworker-demo-XXXXXX)"

echo "== making a throw-away CA, server certificate and APNs signing key in $work"
deploy/local/make-pki.sh "$work"

echo "== a throw-away Firebase service account key (what the Firebase console gives), for the app's Android side"
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$work/firebase.key" 2>/dev/null
# The key file names its token endpoint: the mock's, known once it listens (the mock reads the key only).
service_account() {
  python3 - "$work/firebase.key" "$1" <<'PY'
import json, sys
print(json.dumps({"type": "service_account", "project_id": "pushworker-demo", "private_key_id": "demo-key-1",
                  "private_key": open(sys.argv[1]).read(), "client_email": "pushworker@pushworker-demo.iam.gserviceaccount.com",
                  "token_uri": sys.argv[2]}))
PY
}
service_account https://127.0.0.1/token > "$work/firebase.json"
android_gone="gOnE0123456789abcdefgh:APA91bH$(printf 'x%.0s' $(seq 120))"

echo "== starting the mock APNs, which serves FCM too (the third device in examples/job.json is 'unregistered', on APNs; one Android device is on FCM)"
"$bin/mock-apns" --port 0 --cert "$work/server.pem" --key "$work/server.key" \
  --provider-key "DEMOKEY001:DEMOTEAM01:$work/key.pub" --topic com.example.demo --topic com.example.demo.push-type.liveactivity \
  --unregistered deaddeaddeaddeaddeaddeaddeaddeaddeaddeaddeaddeaddeaddeaddeaddead \
  --fcm-service-account "$work/firebase.json" --fcm-unregistered "$android_gone" > "$work/mock.log" 2>&1 &
mock_pid=$!
for _ in $(seq 100); do grep -q listening "$work/mock.log" && break; sleep 0.1; done
apns_url=$(grep -o 'https://[0-9.:]*' "$work/mock.log" | head -1)
echo "   $apns_url"
service_account "$apns_url/token" > "$work/firebase.json"

cat > "$work/pushworker.yaml" <<YAML
metrics_address: 127.0.0.1:0   # any free port: the worker logs the one it took
amqp:
  urls: [$url]
registry: {sqlite: registry.db}
apps:
  - name: demo
    topic: com.example.demo
    environment: sandbox
    url: $apns_url
    ca_file: $work/ca.pem
    token: {key_file: $work/key.p8, key_id: DEMOKEY001, team_id: DEMOTEAM01}
    fcm: {service_account: $work/firebase.json, url: $apns_url, ca_file: $work/ca.pem}
YAML

echo "== starting the worker: pushworker run --config pushworker.yaml"
"$bin/pushworker" run --config "$work/pushworker.yaml" 2> "$work/worker.log" &
worker_pid=$!
for _ in $(seq 100); do grep -q "worker started" "$work/worker.log" && break; sleep 0.1; done

# What a backend does: publish to exchange 'push' (routing key jobs or registry), read push.results.
publish() { echo "$2" | "$bin/pushworker" enqueue --amqp "$url" --exchange push --routing-key "$1" >/dev/null; }
results() { "$bin/pushworker" tail --amqp "$url" --queue push.results --count "$1"; }
registry_command() {
  echo "   $1"
  publish registry "$1"
}

echo "== publishing examples/job.json to exchange 'push' with routing key 'jobs'"
"$bin/pushworker" enqueue --amqp "$url" --exchange push --routing-key jobs --file examples/job.json
echo "== results from push.results (one per device, then the summary):"
results 4

echo "== one job for an iPhone and two Android phones (audience.tokens and audience.fcm_tokens): the notification"
echo "   is the iPhone's alert and FCM's notification; results say the platform; FCM calls one Android device UNREGISTERED"
android="cXyZ0123456789abcdefgh:APA91bH$(printf 'k7-_Qw%.0s' $(seq 20))"
publish jobs '{"id": "goal-1", "app": "demo", "audience": {"tokens": ["3f1c0e5d8a9b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d"], "fcm_tokens": ["'"$android"'", "'"$android_gone"'"]}, "notification": {"title": "Goal!", "body": "Lions 2-1"}, "fcm": {"data": {"match": "42"}}, "priority": 10}'
results 4

echo "== publishing an invalid job (priority 7); it is dead-lettered with its reason:"
publish jobs '{"app": "demo", "audience": {"tokens": []}, "payload": {}, "priority": 7}'
"$bin/pushworker" tail --amqp "$url" --queue push.dead --count 1 --headers

echo "== the registry: commands published to exchange 'push' with routing key 'registry', as a backend would"
a=3f1c0e5d8a9b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d
b=9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d3f1c0e5d8a9b7c6d5e4f3a2b1c0d
c=1111222233334444555566667777888899990000aaaabbbbccccddddeeeeffff
dead=deaddeaddeaddeaddeaddeaddeaddeaddeaddeaddeaddeaddeaddeaddeaddead
while read -r command; do registry_command "$command"; done <<COMMANDS
{"command": "register_device", "app": "demo", "token": "$a", "user": "ada"}
{"command": "register_device", "app": "demo", "token": "$dead", "user": "ada"}
{"command": "register_device", "app": "demo", "token": "$android", "user": "ada", "platform": "fcm"}
{"command": "register_device", "app": "demo", "token": "$b", "user": "bob"}
{"command": "register_device", "app": "demo", "token": "$c", "user": "cy"}
{"command": "add_to_group", "user": "ada", "group": "class-a"}
{"command": "add_to_group", "user": "cy", "group": "class-a"}
{"command": "add_to_group", "user": "bob", "group": "class-b"}
{"command": "add_to_group", "user": "cy", "group": "class-b"}
{"command": "set_preferences", "user": "bob", "blacklist": {"grades": ["final-grade"]}}
COMMANDS
# Until the registry service has applied the commands: the output of the command after WHAT holds it.
wait_for() {
  local what=$1; shift
  for _ in $(seq 100); do
    "$@" | grep -q "$what" && return
    sleep 0.1
  done
}
wait_for filtered "$bin/pushworker" registry status --config "$work/pushworker.yaml" demo "$b" --type grades
echo "== a job to groups class-a and class-b, type grades/midterm: ada's three devices (an iPhone, a dead one, and an"
echo "   Android phone on FCM, shown the APNs alert), cy's once although cy is in both groups, and bob's filtered by his blacklist:"
publish jobs '{"id": "grades-1", "app": "demo", "audience": {"groups": ["class-a", "class-b"]}, "type": "grades", "subtype": "midterm", "payload": {"aps": {"alert": "New grades"}}}'
results 6
echo "== APNs answered 410 for ada's dead device, so the registry dropped it:"
"$bin/pushworker" registry status --config "$work/pushworker.yaml" demo "$dead" | sed 's/^/   /'
echo "== what an operator sees: pushworker registry show user ada, show group class-b"
"$bin/pushworker" registry show user --config "$work/pushworker.yaml" ada | sed 's/^/   /'
"$bin/pushworker" registry show group --config "$work/pushworker.yaml" class-b | sed 's/^/   /'
echo "== the delivery ledger kept every device's result: pushworker deliveries --job grades-1, then --user cy"
"$bin/pushworker" deliveries --config "$work/pushworker.yaml" --job grades-1 | sed 's/^/   /'
"$bin/pushworker" deliveries --config "$work/pushworker.yaml" --user cy | sed 's/^/   /'
echo "== two jobs with one idempotency_key: the first is sent, the second sends nothing and its summary names the first (duplicate_of)"
publish jobs '{"id": "sale-1", "app": "demo", "idempotency_key": "spring-sale", "audience": {"users": ["cy"]}, "payload": {"aps": {"alert": "Sale"}}}'
results 2
publish jobs '{"id": "sale-2", "app": "demo", "idempotency_key": "spring-sale", "audience": {"users": ["cy"]}, "payload": {"aps": {"alert": "Sale"}}}'
results 1
echo "== two jobs for later (send_at): held in the schedule, each answered with a summary saying when (scheduled_for)"
soon=$(date -u -d '+5 seconds' +%Y-%m-%dT%H:%M:%SZ)
later=$(date -u -d '+1 hour' +%Y-%m-%dT%H:%M:%SZ)
publish jobs '{"id": "reminder-1", "app": "demo", "send_at": "'"$soon"'", "audience": {"users": ["ada"]}, "payload": {"aps": {"alert": "Class starts in 10 minutes"}}}'
publish jobs '{"id": "promo-1", "app": "demo", "send_at": "'"$later"'", "idempotency_key": "winter-promo", "audience": {"groups": ["class-b"]}, "payload": {"aps": {"alert": "Winter promo"}}}'
results 2
"$bin/pushworker" schedule list --config "$work/pushworker.yaml" | sed 's/^/   /'
echo "== the promo cancelled over the queue by its idempotency key (cancel_job): it will never be sent"
registry_command '{"command": "cancel_job", "idempotency_key": "winter-promo"}'
echo "== at its send_at a worker releases the reminder: ada's iPhone and Android phone get it, then its summary"
results 3
"$bin/pushworker" schedule list --config "$work/pushworker.yaml" --all | sed 's/^/   /'
echo "== quiet hours: bob's are set to the hour around now (UTC); a job to bob that defers (the default)"
echo "   sends nothing now: its summary counts his device deferred, held in the schedule until they end"
quiet_from=$(date -u -d '-1 minute' +%H:%M)
quiet_to=$(date -u -d '+1 hour' +%H:%M)
registry_command '{"command": "set_quiet_hours", "user": "bob", "quiet_hours": {"from": "'"$quiet_from"'", "to": "'"$quiet_to"'", "zone": "UTC"}}'
sleep 1  # the registry queue and the jobs queue are consumed apart: the command first
publish jobs '{"id": "digest-1", "app": "demo", "audience": {"users": ["bob"]}, "payload": {"aps": {"alert": "Your digest"}}}'
results 1
"$bin/pushworker" schedule list --config "$work/pushworker.yaml" | sed 's/^/   /'

echo "== Live Activities: the app reports push-to-start tokens for ada and cy (iOS 17.2), registered like devices"
start_a=5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a
start_c=5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c
activity_a=a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0
activity_c=c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0
registry_command "{\"command\": \"register_push_to_start_token\", \"app\": \"demo\", \"token\": \"$start_a\", \"user\": \"ada\"}"
registry_command "{\"command\": \"register_push_to_start_token\", \"app\": \"demo\", \"token\": \"$start_c\", \"user\": \"cy\"}"
wait_for push-to-start "$bin/pushworker" registry show user --config "$work/pushworker.yaml" cy
echo "== a Live Activity start to group class-a: the worker builds the aps (event, attributes, content-state),"
echo "   sends it as liveactivity to com.example.demo.push-type.liveactivity, to ada's and cy's push-to-start tokens"
publish jobs '{"id": "match-start", "app": "demo", "audience": {"groups": ["class-a"]}, "live_activity": {"event": "start", "attributes_type": "MatchAttributes", "attributes": {"home": "Lions", "away": "Tigers"}, "content_state": {"score": "0-0"}, "alert": {"title": "Kick-off", "body": "Lions v Tigers"}, "input_push_token": true}}'
results 3
echo "== the started activities report their tokens for activity match-42; an update reaches them, then the end"
registry_command "{\"command\": \"register_activity_token\", \"app\": \"demo\", \"activity\": \"match-42\", \"token\": \"$activity_a\", \"user\": \"ada\"}"
registry_command "{\"command\": \"register_activity_token\", \"app\": \"demo\", \"activity\": \"match-42\", \"token\": \"$activity_c\", \"user\": \"cy\"}"
wait_for match-42 "$bin/pushworker" registry show user --config "$work/pushworker.yaml" cy
publish jobs '{"id": "match-goal", "app": "demo", "audience": {"activity": "match-42"}, "live_activity": {"event": "update", "content_state": {"score": "1-0"}, "alert": {"title": "Goal!", "body": "Lions 1-0"}}}'
results 3
publish jobs '{"id": "match-end", "app": "demo", "audience": {"activity": "match-42"}, "live_activity": {"event": "end", "content_state": {"score": "2-1"}, "dismissal_date": 1900000000}}'
results 3
echo "== a broadcast channel (iOS 18): pushworker channels create, on APNs' channel management API"
channel=$("$bin/pushworker" channels create --config "$work/pushworker.yaml" --app demo)
echo "   channel $channel"
echo "== one broadcast update on the channel: one request, one result naming the channel and APNs' request id"
publish jobs "{\"id\": \"match-broadcast\", \"app\": \"demo\", \"audience\": {\"channel\": \"$channel\"}, \"live_activity\": {\"event\": \"update\", \"content_state\": {\"score\": \"2-1\"}}}"
results 2
echo "== the channel deleted; a broadcast on it comes back rejected with APNs' reason"
"$bin/pushworker" channels delete --config "$work/pushworker.yaml" --app demo "$channel" | sed 's/^/   /'
echo "   channels left: $("$bin/pushworker" channels list --config "$work/pushworker.yaml" --app demo | wc -l)"
publish jobs "{\"id\": \"late-broadcast\", \"app\": \"demo\", \"audience\": {\"channel\": \"$channel\"}, \"live_activity\": {\"event\": \"end\"}}"
results 2

metrics=$(grep -o 'address=127.0.0.1:[0-9]*' "$work/worker.log" | head -1 | cut -d= -f2)
echo "== the worker's operator endpoint on $metrics: /readyz, and the counters of what it did (/metrics)"
echo "   $(curl -s "http://$metrics/readyz")"
curl -s "http://$metrics/metrics" | grep -E '^pushworker_(jobs|notifications|dead_letters|registry_commands)_total' | sed 's/^/   /'

if [ -n "${CLUSTER:-}" ]; then
  node=$(curl -s "http://$metrics/readyz" | grep -o 'jobs → amqp://[^,"]*' | grep -o ':57[0-9]1/' | grep -o '57[0-9]1')
  number=$(( (node - 5701) / 10 + 1 ))
  echo "== CLUSTER: killing node $number (port $node), where the worker's jobs connection is; one more job"
  deploy/local/rabbitmq.sh cluster kill "$number" | sed 's/^/   /'
  publish jobs '{"id": "after-failover", "app": "demo", "audience": {"tokens": ["a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1"]}, "payload": {"aps": {"alert": "Still here"}}}'
  results 2
  echo "   $(curl -s "http://$metrics/readyz")"
  deploy/local/rabbitmq.sh cluster start-node "$number" | sed 's/^/   /'
fi

echo "== stopping the worker with SIGTERM"
kill -TERM "$worker_pid"; wait "$worker_pid"; echo "   exit status $?"; worker_pid=""
echo "== worker log:"
sed 's/^/   /' "$work/worker.log"
