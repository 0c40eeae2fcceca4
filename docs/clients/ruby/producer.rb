#!/usr/bin/env ruby
# Publishes one push job to pushworker and prints its results, one JSON object per line; or one
# registry command or query, and prints its answer.
#
#   AMQP_URL=amqp://user:password@host:5672/ ruby producer.rb TOKEN...
#   AMQP_URL=… ruby producer.rb --registry '{"command": "status", "app": "news", "token": "…"}'
#
# PUSHWORKER_RESULTS sets the job's "results" (all, batched, failures or none; default: the app's).
# A "results" message (results: batched) holds many devices' results: each is printed on its own line.
#
# AMQP_URL may list a cluster's nodes, comma-separated: tried in a shuffled order, the first that
# answers is used (bunny's own hosts: option would share one user and vhost among them).
#
# Needs bunny (Debian: ruby-bunny; gem: bunny). Exits 1 if the broker refuses the message, no queue
# takes it, no summary (or answer) comes within a minute, or the registry answers "ok": false.
require "bunny"
require "logger"
require "json"
require "securerandom"

urls = ENV.fetch("AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/").split(",").map(&:strip).shuffle
# Bunny reads a lone trailing "/" as the vhost "" (as the AMQP URI spec says); RabbitMQ's default
# vhost is "/", which other clients take it to mean.
urls = urls.map { |url| url.count("/") == 3 ? url.chomp("/") : url }
exchange_name = ENV.fetch("PUSHWORKER_EXCHANGE", "push")
arguments = ARGV
if arguments.empty? || (arguments.first == "--registry" && arguments.size != 2)
  abort "usage: producer.rb TOKEN... | producer.rb --registry COMMAND_JSON"
end

connection = nil
urls.each_with_index do |url, index|
  connection = Bunny.new(url, logger: Logger.new(IO::NULL), automatically_recover: false)
  connection.start
  break
rescue Bunny::TCPConnectionFailed, Bunny::NetworkFailure => e
  raise if index == urls.size - 1
end
channel = connection.create_channel
# The reply queue must exist before the job is taken: a server-named one, private to this connection.
reply = channel.queue("", exclusive: true)
channel.confirm_select
exchange = channel.exchange(exchange_name, passive: true)
returned = false
exchange.on_return { returned = true }

message_id = SecureRandom.uuid
if arguments.first == "--registry"
  routing_key, body = "registry", arguments[1]
else
  routing_key = "jobs"
  job = { id: message_id, audience: { tokens: arguments }, payload: { aps: { alert: "Hello from Ruby" } }, reply_to: reply.name }
  job[:results] = ENV["PUSHWORKER_RESULTS"] unless ENV.fetch("PUSHWORKER_RESULTS", "").empty?
  body = JSON.generate(job)
end
exchange.publish(body, routing_key: routing_key, mandatory: true, persistent: true,
                 content_type: "application/json", message_id: message_id, reply_to: reply.name)
abort "the broker refused the message" unless channel.wait_for_confirms
# The broker sends a return before the confirm of an unroutable mandatory message.
abort "no queue is bound to exchange '#{exchange_name}' with routing key '#{routing_key}': is a worker running?" if returned

done = Queue.new
reply.subscribe(manual_ack: true) do |delivery, properties, body|
  channel.ack(delivery.delivery_tag)
  next unless properties.correlation_id == message_id
  if properties.type == "results"
    JSON.parse(body)["results"].each { |result| puts JSON.generate(result) }
  else
    puts body
  end
  $stdout.flush
  done << (JSON.parse(body)["ok"] ? :ok : :refused) if properties.type == "registry_reply"
  done << :ok if properties.type == "summary"
end
waiter = Thread.new { done.pop }
abort "no answer within 60 s" unless waiter.join(60)
connection.close
abort "the registry refused the command" if waiter.value == :refused
