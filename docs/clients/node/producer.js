#!/usr/bin/env node
// Publishes one push job to pushworker and prints its results, one JSON object per line.
//
//   npm ci && AMQP_URL=amqp://user:password@host:5672/ node producer.js TOKEN...
//
// AMQP_URL may list a cluster's nodes, comma-separated: tried in a shuffled order, the first that
// answers is used (amqplib connects to one address).
//
// Needs amqplib (package.json pins it). Exits 1 if the broker refuses the job, no queue takes
// it, or no summary comes within a minute.
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
  const tokens = process.argv.slice(2);
  if (tokens.length === 0) throw new Error('usage: producer.js TOKEN...');

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

  const jobId = randomUUID();
  const job = { id: jobId, audience: { tokens }, payload: { aps: { alert: 'Hello from Node.js' } }, reply_to: replyTo };
  channel.publish(exchange, 'jobs', Buffer.from(JSON.stringify(job)), {
    persistent: true, mandatory: true, contentType: 'application/json', messageId: jobId, replyTo,
  });
  await channel.waitForConfirms(); // rejects when the broker nacks
  // The broker sends a return before the confirm of an unroutable mandatory message.
  if (returned) throw new Error(`no queue is bound to exchange '${exchange}' with routing key 'jobs': is a worker running?`);

  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('no summary within 60 s')), 60000);
    channel.consume(replyTo, (message) => {
      channel.ack(message);
      if (message.properties.correlationId !== jobId) return;
      console.log(message.content.toString());
      if (message.properties.type === 'summary') { clearTimeout(timer); resolve(); }
    });
  });
  await connection.close();
}

main().catch((error) => { console.error(error.message); process.exit(1); });
