#!/usr/bin/env node
// Publishes one push job to pushworker and prints its results, one JSON object per line; or one
// registry command or query, and prints its answer.
//
//   npm ci && AMQP_URL=amqp://user:password@host:5672/ node producer.js TOKEN...
//   AMQP_URL=… node producer.js --registry '{"command": "status", "app": "news", "token": "…"}'
//
// PUSHWORKER_RESULTS sets the job's "results" (all, batched, failures or none; default: the app's).
// A "results" message (results: batched) holds many devices' results: each is printed on its own line.
//
// AMQP_URL may list a cluster's nodes, comma-separated: tried in a shuffled order, the first that
// answers is used (amqplib connects to one address).
//
// Needs amqplib (package.json pins it). Exits 1 if the broker refuses the message, no queue takes
// it, no summary (or answer) comes within a minute, or the registry answers "ok": false.
'use strict';
const amqp = require('amqplib');
const { randomUUID } = require('crypto');

async function main() {
  const urls = (process.env.AMQP_URL || 'amqp://guest:guest@127.0.0.1:5672/').split(',').map((url) => url.trim());
  for (let i = urls.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [urls[i], urls[j]] = [urls[j], urls[i]];
  }
  const exchange = process.env.PUSHWORKER_EXCHANGE || 'push';
  const args = process.argv.slice(2);
  if (args.length === 0 || (args[0] === '--registry' && args.length !== 2)) {
    throw new Error('usage: producer.js TOKEN... | producer.js --registry COMMAND_JSON');
  }

  let connection;
  for (const [index, url] of urls.entries()) {
    try {
      connection = await amqp.connect(url);
      break;
    } catch (error) {
      if (index === urls.length - 1) throw error;
    }
  }
  const channel = await connection.createConfirmChannel();
  // The reply queue must exist before the job is taken: a server-named one, private to this connection.
  const { queue: replyTo } = await channel.assertQueue('', { exclusive: true });
  let returned = false;
  channel.on('return', () => { returned = true; });

  const messageId = randomUUID();
  const registry = args[0] === '--registry';
  const routingKey = registry ? 'registry' : 'jobs';
  const body = registry ? args[1] : JSON.stringify(
    { id: messageId, audience: { tokens: args }, payload: { aps: { alert: 'Hello from Node.js' } }, reply_to: replyTo,
      ...(process.env.PUSHWORKER_RESULTS ? { results: process.env.PUSHWORKER_RESULTS } : {}) });
  channel.publish(exchange, routingKey, Buffer.from(body), {
    persistent: true, mandatory: true, contentType: 'application/json', messageId, replyTo,
  });
  await channel.waitForConfirms(); // rejects when the broker nacks
  // The broker sends a return before the confirm of an unroutable mandatory message.
  if (returned) throw new Error(`no queue is bound to exchange '${exchange}' with routing key '${routingKey}': is a worker running?`);

  const ok = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('no answer within 60 s')), 60000);
    channel.consume(replyTo, (message) => {
      channel.ack(message);
      if (message.properties.correlationId !== messageId) return;
      const type = message.properties.type;
      if (type === 'results') {
        for (const result of JSON.parse(message.content.toString()).results) console.log(JSON.stringify(result));
      } else {
        console.log(message.content.toString());
      }
      if (type === 'registry_reply') { clearTimeout(timer); resolve(JSON.parse(message.content.toString()).ok === true); }
      if (type === 'summary') { clearTimeout(timer); resolve(true); }
    });
  });
  await connection.close();
  if (!ok) throw new Error('the registry refused the command');
}

main().catch((error) => { console.error(error.message); process.exit(1); });
