<?php
// Publishes one push job to pushworker and prints its results, one JSON object per line; or one
// registry command or query, and prints its answer.
//
//   AMQP_URL=amqp://user:password@host:5672/ php producer.php TOKEN...
//   AMQP_URL=… php producer.php --registry '{"command": "status", "app": "news", "token": "…"}'
//
// PUSHWORKER_RESULTS sets the job's "results" (all, batched, failures or none; default: the app's).
// A "results" message (results: batched) holds many devices' results: each is printed on its own line.
//
// Needs php-amqplib (Debian: php-amqplib; Composer: php-amqplib/php-amqplib). Exits 1 if the
// broker refuses the message, no queue takes it, no summary (or answer) comes within a minute, or
// the registry answers "ok": false.
require_once getenv('PHP_AMQPLIB_AUTOLOAD') ?: (file_exists(__DIR__ . '/vendor/autoload.php')
    ? __DIR__ . '/vendor/autoload.php' : '/usr/share/php/PhpAmqpLib/autoload.php');

use PhpAmqpLib\Connection\AMQPStreamConnection;
use PhpAmqpLib\Message\AMQPMessage;

function fail(string $message): never { fwrite(STDERR, $message . "\n"); exit(1); }

// AMQP_URL may list a cluster's nodes, comma-separated: they are tried in turn (shuffled, so
// producers spread over the nodes).
$urls = array_map('trim', explode(',', getenv('AMQP_URL') ?: 'amqp://guest:guest@127.0.0.1:5672/'));
shuffle($urls);
$exchange = getenv('PUSHWORKER_EXCHANGE') ?: 'push';
$arguments = array_slice($argv, 1);
if (!$arguments || ($arguments[0] === '--registry' && count($arguments) !== 2)) {
    fail('usage: producer.php TOKEN... | producer.php --registry COMMAND_JSON');
}

$hosts = array_map(function (string $text): array {
    $url = parse_url($text);
    return ['host' => $url['host'], 'port' => $url['port'] ?? 5672,
        'user' => rawurldecode($url['user'] ?? 'guest'), 'password' => rawurldecode($url['pass'] ?? 'guest'),
        'vhost' => isset($url['path']) && strlen($url['path']) > 1 ? rawurldecode(substr($url['path'], 1)) : '/'];
}, $urls);
// php-amqplib waits 3 s by default for a connection and for each read: too little for a broker
// under load. Each node's error is kept, so a failure names them all, not just the last one tried.
$connection = null;
$errors = [];
foreach ($hosts as $host) {
    try {
        $connection = new AMQPStreamConnection($host['host'], $host['port'], $host['user'], $host['password'], $host['vhost'],
            connection_timeout: 10.0, read_write_timeout: 30.0, heartbeat: 15);
        break;
    } catch (Exception $error) {
        $errors[] = "{$host['host']}:{$host['port']}: {$error->getMessage()}";
    }
}
$connection ?? fail("no broker node could be reached:\n  " . implode("\n  ", $errors));
$channel = $connection->channel();
// The reply queue must exist before the job is taken: a server-named one, private to this connection.
[$replyTo] = $channel->queue_declare('', false, false, true, true);
$channel->confirm_select();
$acked = null;
$returned = false;
$channel->set_ack_handler(function () use (&$acked) { $acked ??= true; });
$channel->set_nack_handler(function () use (&$acked) { $acked = false; });
$channel->set_return_listener(function () use (&$returned) { $returned = true; });

$messageId = vsprintf('%s%s-%s-%s-%s-%s%s%s', str_split(bin2hex(random_bytes(16)), 4));
if ($arguments[0] === '--registry') {
    [$routingKey, $body] = ['registry', $arguments[1]];
} else {
    $routingKey = 'jobs';
    $job = ['id' => $messageId, 'audience' => ['tokens' => $arguments],
        'payload' => ['aps' => ['alert' => 'Hello from PHP']], 'reply_to' => $replyTo];
    if (getenv('PUSHWORKER_RESULTS')) $job['results'] = getenv('PUSHWORKER_RESULTS');
    $body = json_encode($job);
}
$message = new AMQPMessage($body, [
    'content_type' => 'application/json', 'delivery_mode' => AMQPMessage::DELIVERY_MODE_PERSISTENT,
    'message_id' => $messageId, 'reply_to' => $replyTo,
]);
$channel->basic_publish($message, $exchange, $routingKey, true);
$channel->wait_for_pending_acks_returns(30);
// The broker sends a return before the confirm of an unroutable mandatory message.
if ($returned) fail("no queue is bound to exchange '$exchange' with routing key '$routingKey': is a worker running?");
if ($acked !== true) fail('the broker refused the message');

$done = null;
$channel->basic_consume($replyTo, '', false, false, false, false, function (AMQPMessage $reply) use ($messageId, &$done) {
    $reply->ack();
    if ($reply->get('correlation_id') !== $messageId) return;
    $type = $reply->has('type') ? $reply->get('type') : null;
    if ($type === 'results') {
        foreach (json_decode($reply->getBody(), true)['results'] as $result) {
            echo json_encode($result, JSON_UNESCAPED_SLASHES | JSON_UNESCAPED_UNICODE), "\n";
        }
    } else {
        echo $reply->getBody(), "\n";
    }
    if ($type === 'registry_reply') $done = (json_decode($reply->getBody(), true)['ok'] ?? false) ? 'ok' : 'refused';
    if ($type === 'summary') $done = 'ok';
});
try {
    while ($done === null) $channel->wait(null, false, 60);
} catch (PhpAmqpLib\Exception\AMQPTimeoutException) {
    fail('no answer within 60 s');
}
$channel->close();
$connection->close();
if ($done === 'refused') fail('the registry refused the command');
