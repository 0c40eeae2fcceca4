#!/usr/bin/env bash
# The demo: a local RabbitMQ, a sample push job published with `pushworker enqueue`, and the
# job read back from its queue. (The worker that sends it to APNs comes with `pushworker run`.)
set -euo pipefail
cd "$(dirname "$0")/../.."

deploy/local/install-deps.sh
deploy/local/rabbitmq.sh start
swift build --product pushworker
bin="$(swift build --show-bin-path)/pushworker"

url="$(deploy/local/rabbitmq.sh url)"
queue="pushworker.demo"
echo "== publishing examples/job.json to the queue $queue"
id=$("$bin" enqueue --amqp "$url" --queue "$queue" --declare-queue --file examples/job.json)
echo "== published job with message id $id"
echo "== a document that is not JSON is refused before anything is published:"
printf '{"app": "demo",\n "payload": {aps: 1}}\n' | "$bin" enqueue --amqp "$url" --queue "$queue" || true
echo "== messages in the queue, as the broker last counted them (it recounts every few seconds):"
for _ in $(seq 10); do
  line=$(rabbitmqctl -q -n "${PUSHWORKER_RABBITMQ_NODE:-rabbit@localhost}" list_queues name messages | grep -E "^$queue\s" || true)
  [ "${line##*[[:space:]]}" != "0" ] && break
  sleep 1
done
echo "$line messages"
