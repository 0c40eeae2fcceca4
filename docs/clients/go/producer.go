// Publishes one push job to pushworker and prints its results, one JSON object per line; or one
// registry command or query, and prints its answer.
//
//	AMQP_URL=amqp://user:password@host:5672/ go run producer.go TOKEN...
//	AMQP_URL=… go run producer.go --registry '{"command": "status", "app": "news", "token": "…"}'
//
// PUSHWORKER_RESULTS sets the job's "results" (all, batched, failures or none; default: the
// app's). A "results" message (results: batched) holds many devices' results: each is printed on
// its own line.
//
// AMQP_URL may list a cluster's nodes, comma-separated: tried in a shuffled order, the first
// that answers is used (amqp091-go dials one address).
//
// Needs github.com/rabbitmq/amqp091-go (Debian: golang-github-rabbitmq-amqp091-go-dev). Exits 1
// if the broker refuses the message, no queue takes it, no summary (or answer) comes within a
// minute, or the registry answers "ok": false.
package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"log"
	mathrand "math/rand"
	"os"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

func main() {
	log.SetFlags(0)
	urls := strings.Split(getenv("AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/"), ",")
	mathrand.Shuffle(len(urls), func(i, j int) { urls[i], urls[j] = urls[j], urls[i] })
	exchange := getenv("PUSHWORKER_EXCHANGE", "push")
	arguments := os.Args[1:]
	if len(arguments) == 0 || (arguments[0] == "--registry" && len(arguments) != 2) {
		log.Fatal("usage: producer TOKEN... | producer --registry COMMAND_JSON")
	}

	var conn *amqp.Connection
	var err error
	for _, url := range urls {
		if conn, err = amqp.Dial(strings.TrimSpace(url)); err == nil {
			break
		}
	}
	check(err, "connect")
	defer conn.Close()
	ch, err := conn.Channel()
	check(err, "open a channel")
	// The reply queue must exist before the job is taken: a server-named one, private to this connection.
	reply, err := ch.QueueDeclare("", false, true, true, false, nil)
	check(err, "declare the reply queue")
	check(ch.Confirm(false), "enable publisher confirms")
	confirms := ch.NotifyPublish(make(chan amqp.Confirmation, 1))
	returns := ch.NotifyReturn(make(chan amqp.Return, 1))

	messageID := uuid()
	routingKey := "jobs"
	var body []byte
	if arguments[0] == "--registry" {
		routingKey, body = "registry", []byte(arguments[1])
	} else {
		job := map[string]any{
			"id":       messageID,
			"audience": map[string]any{"tokens": arguments},
			"payload":  map[string]any{"aps": map[string]any{"alert": "Hello from Go"}},
			"reply_to": reply.Name,
		}
		if results := os.Getenv("PUSHWORKER_RESULTS"); results != "" {
			job["results"] = results
		}
		body, _ = json.Marshal(job)
	}
	err = ch.PublishWithContext(context.Background(), exchange, routingKey, true, false, amqp.Publishing{
		ContentType: "application/json", DeliveryMode: amqp.Persistent, MessageId: messageID, ReplyTo: reply.Name, Body: body,
	})
	check(err, "publish")
	// The broker sends a return before the confirm of an unroutable mandatory message.
	select {
	case confirm, open := <-confirms:
		if !open {
			log.Fatal("the broker closed the channel (does the exchange exist?)")
		}
		select {
		case <-returns:
			log.Fatalf("no queue is bound to exchange '%s' with routing key '%s': is a worker running?", exchange, routingKey)
		default:
		}
		if !confirm.Ack {
			log.Fatal("the broker refused the message")
		}
	case <-time.After(30 * time.Second):
		log.Fatal("no confirm within 30 s")
	}

	deliveries, err := ch.Consume(reply.Name, "", false, false, false, false, nil)
	check(err, "consume the reply queue")
	for {
		select {
		case d := <-deliveries:
			d.Ack(false)
			if d.CorrelationId != messageID {
				continue
			}
			if d.Type == "results" {
				var batch struct{ Results []json.RawMessage }
				check(json.Unmarshal(d.Body, &batch), "read a results message")
				for _, result := range batch.Results {
					fmt.Println(string(result))
				}
			} else {
				fmt.Println(string(d.Body))
			}
			if d.Type == "registry_reply" {
				var answer struct{ Ok bool }
				if json.Unmarshal(d.Body, &answer) != nil || !answer.Ok {
					log.Fatal("the registry refused the command")
				}
				return
			}
			if d.Type == "summary" {
				return
			}
		case <-time.After(60 * time.Second):
			log.Fatal("no answer within 60 s")
		}
	}
}

func getenv(name, fallback string) string {
	if value := os.Getenv(name); value != "" {
		return value
	}
	return fallback
}

func check(err error, what string) {
	if err != nil {
		log.Fatalf("cannot %s: %v", what, err)
	}
}

func uuid() string {
	var b [16]byte
	rand.Read(b[:])
	b[6], b[8] = b[6]&0x0f|0x40, b[8]&0x3f|0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}
