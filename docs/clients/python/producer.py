#!/usr/bin/env python3
"""Publishes one push job to pushworker and prints its results, one JSON object per line; or one
registry command or query, and prints its answer.

    AMQP_URL=amqp://user:password@host:5672/ python3 producer.py TOKEN...
    AMQP_URL=… python3 producer.py --registry '{"command": "replace_token", "app": "news", "old": "…", "new": "…"}'
    AMQP_URL=… python3 producer.py --job examples/job.json     (a job file as it is; its id, if any, is the message id)

PUSHWORKER_RESULTS sets the job's `results` (all, batched, failures or none; default: the app's).
A `results` message (results: batched) holds many devices' results: each is printed on its own line.

AMQP_URL may list a cluster's nodes, comma-separated: pika tries them in turn (shuffled here, so
producers spread over the nodes) and connects to the first that answers.

Needs pika (Debian: python3-pika; pip: pika). Exits 1 if the broker refuses the message, no queue
takes it, no summary (or answer) comes within a minute, or the registry answers "ok": false.
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
arguments = sys.argv[1:]
if not arguments or (arguments[0] in ("--registry", "--job") and len(arguments) != 2):
    sys.exit("usage: producer.py TOKEN... | producer.py --registry COMMAND_JSON | producer.py --job FILE")

connection = pika.BlockingConnection([pika.URLParameters(url.strip()) for url in urls])
channel = connection.channel()
# The reply queue must exist before the message is taken: a server-named one, private to this connection.
reply_to = channel.queue_declare("", exclusive=True).method.queue
channel.confirm_delivery()

message_id = str(uuid.uuid4())
if arguments[0] == "--registry":
    routing_key, body = "registry", arguments[1].encode()
elif arguments[0] == "--job":
    with open(arguments[1], encoding="utf-8") as file:
        job = json.load(file)
    # Results carry the job's id as their correlation_id: it is the message id too.
    message_id = str(job.setdefault("id", message_id))
    job["reply_to"] = reply_to
    if os.environ.get("PUSHWORKER_RESULTS"):
        job["results"] = os.environ["PUSHWORKER_RESULTS"]
    routing_key, body = "jobs", json.dumps(job).encode()
else:
    routing_key = "jobs"
    body = json.dumps({
        "id": message_id,
        "audience": {"tokens": arguments},
        "payload": {"aps": {"alert": "Hello from Python"}},
        "reply_to": reply_to,
        **({"results": os.environ["PUSHWORKER_RESULTS"]} if os.environ.get("PUSHWORKER_RESULTS") else {}),
    }).encode()
properties = pika.BasicProperties(
    content_type="application/json", delivery_mode=2, message_id=message_id, reply_to=reply_to)
try:
    # Returns once the broker has confirmed the message; raises if it refused or routed it nowhere.
    channel.basic_publish(exchange, routing_key, body, properties, mandatory=True)
except pika.exceptions.UnroutableError:
    sys.exit(f"no queue is bound to exchange '{exchange}' with routing key '{routing_key}': is a worker running?")
except pika.exceptions.NackError:
    sys.exit("the broker refused the message")

for method, props, reply in channel.consume(reply_to, inactivity_timeout=60):
    if method is None:
        sys.exit("no answer within 60 s")
    channel.basic_ack(method.delivery_tag)
    if props.correlation_id != message_id:
        continue
    if props.type == "results":
        for result in json.loads(reply)["results"]:
            print(json.dumps(result, separators=(",", ":"), ensure_ascii=False), flush=True)
    else:
        print(reply.decode(), flush=True)
    if props.type == "registry_reply":
        if not json.loads(reply).get("ok"):
            sys.exit("the registry refused the command")
        break
    if props.type == "summary":
        break
channel.cancel()
connection.close()
