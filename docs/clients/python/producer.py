#!/usr/bin/env python3
"""Publishes one push job to pushworker and prints its results, one JSON object per line.

    AMQP_URL=amqp://user:password@host:5672/ python3 producer.py TOKEN...

AMQP_URL may list a cluster's nodes, comma-separated: pika tries them in turn (shuffled here, so
producers spread over the nodes) and connects to the first that answers.

Needs pika (Debian: python3-pika; pip: pika). Exits 1 if the broker refuses the job, no queue
takes it, or no summary comes within a minute.
"""
import json
import os
import random
import sys
import uuid

import pika

urls = os.environ.get("AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/").split(",")
random.shuffle(urls)
exchange = os.environ.get("PUSHWORKER_EXCHANGE", "push")
tokens = sys.argv[1:]
if not tokens:
    sys.exit("usage: producer.py TOKEN...")

connection = pika.BlockingConnection([pika.URLParameters(url.strip()) for url in urls])
channel = connection.channel()
# The reply queue must exist before the job is taken: a server-named one, private to this connection.
reply_to = channel.queue_declare("", exclusive=True).method.queue
channel.confirm_delivery()

job_id = str(uuid.uuid4())
job = {
    "id": job_id,
    "audience": {"tokens": tokens},
    "payload": {"aps": {"alert": "Hello from Python"}},
    "reply_to": reply_to,
}
properties = pika.BasicProperties(
    content_type="application/json", delivery_mode=2, message_id=job_id, reply_to=reply_to)
try:
    # Returns once the broker has confirmed the job; raises if it refused or routed it nowhere.
    channel.basic_publish(exchange, "jobs", json.dumps(job).encode(), properties, mandatory=True)
except pika.exceptions.UnroutableError:
    sys.exit(f"no queue is bound to exchange '{exchange}' with routing key 'jobs': is a worker running?")
except pika.exceptions.NackError:
    sys.exit("the broker refused the job")

for method, props, body in channel.consume(reply_to, inactivity_timeout=60):
    if method is None:
        sys.exit("no summary within 60 s")
    channel.basic_ack(method.delivery_tag)
    if props.correlation_id != job_id:
        continue
    print(body.decode(), flush=True)
    if props.type == "summary":
        break
channel.cancel()
connection.close()
