#!/usr/bin/env ruby
# Publishes one push job to pushworker and prints its results, one JSON object per line.
#
#   AMQP_URL=amqp://user:password@host:5672/ ruby producer.rb TOKEN...
#
# AMQP_URL may list a cluster's nodes, comma-separated: tried in a shuffled order, the first that
# answers is used (bunny's own hosts: option would share one user and vhost among them).
#
# Needs bunny (Debian: ruby-bunny; gem: bunny). Exits 1 if the broker refuses the job, no queue
# takes it, or no summary comes within a minute.
require "bunny"
require "logger"
require "json"
require "securerandom"

urls = ENV.fetch("AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/").split(",").map(&:strip).shuffle
# Bunny reads a lone trailing "/" as the vhost "" (as the AMQP URI spec says); RabbitMQ's default
# vhost is "/", which other clients take it to mean.
urls = urls.map { |url| url.count("/") == 3 ? url.chomp("/") : url }
exchange_name = ENV.fetch("PUSHWORKER_EXCHANGE", "push")
tokens = ARGV
abort "usage: producer.rb TOKEN..." if tokens.empty?

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

job_id = SecureRandom.uuid
job = { id: job_id, audience: { tokens: tokens }, payload: { aps: { alert: "Hello from Ruby" } }, reply_to: reply.name }
exchange.publish(JSON.generate(job), routing_key: "jobs", mandatory: true, persistent: true,
                 content_type: "application/json", message_id: job_id, reply_to: reply.name)
abort "the broker refused the job" unless channel.wait_for_confirms
# The broker sends a return before the confirm of an unroutable mandatory message.
abort "no queue is bound to exchange '#{exchange_name}' with routing key 'jobs': is a worker running?" if returned

done = Queue.new
reply.subscribe(manual_ack: true) do |delivery, properties, body|
  channel.ack(delivery.delivery_tag)
  next unless properties.correlation_id == job_id
  puts body
  $stdout.flush
  done << true if properties.type == "summary"
end
waiter = Thread.new { done.pop }
abort "no summary within 60 s" unless waiter.join(60)
connection.close
