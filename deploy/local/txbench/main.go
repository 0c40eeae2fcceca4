// The transactional benchmark's two Go programs, built by deploy/local/bench.sh transactional
// from Debian's amqp091-go and x/net/http2, offline:
//
//	txbench worker: the simplest worker a Go team would write instead of pushworker: one-device
//	jobs from a queue (prefetch 16), each device's request to an APNs stand-in over HTTP/2, one
//	confirmed result per device to the job's reply queue, then the job's ack. No summary, no
//	ledger, no registry: the peer pushworker's per-job cost is compared with.
//	txbench load: publishes N one-device jobs back to back (or paced at -rate jobs/s), confirmed,
//	and times them from the first publish to the last result; with -rate, each job's latency
//	from its publish to its result (p50, p99).
package main

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"golang.org/x/net/http2"
)

func main() {
	if len(os.Args) < 2 {
		log.Fatal("usage: txbench worker|load [flags]")
	}
	switch os.Args[1] {
	case "worker":
		worker(os.Args[2:])
	case "load":
		load(os.Args[2:])
	default:
		log.Fatalf("unknown command %q: worker or load", os.Args[1])
	}
}

type job struct {
	ID       string `json:"id"`
	Audience struct {
		Tokens []string `json:"tokens"`
	} `json:"audience"`
	Payload json.RawMessage `json:"payload"`
	ReplyTo string          `json:"reply_to"`
}

func worker(args []string) {
	flags := flag.NewFlagSet("worker", flag.ExitOnError)
	url := flags.String("amqp", "amqp://guest:guest@127.0.0.1:5672/", "broker")
	queue := flags.String("queue", "", "jobs queue (declared durable)")
	apns := flags.String("url", "", "APNs base URL")
	caFile := flags.String("ca", "", "PEM CA of the APNs stand-in")
	bearer := flags.String("bearer", "", "provider token")
	topic := flags.String("topic", "com.example.app", "apns-topic")
	prefetch := flags.Int("prefetch", 16, "jobs taken at once")
	flags.Parse(args)

	pem, err := os.ReadFile(*caFile)
	if err != nil {
		log.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	client := &http.Client{Transport: &http2.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}, Timeout: 15 * time.Second}

	conn, err := amqp.Dial(*url)
	if err != nil {
		log.Fatal(err)
	}
	consume, err := conn.Channel()
	if err != nil {
		log.Fatal(err)
	}
	if _, err := consume.QueueDeclare(*queue, true, false, false, false, nil); err != nil {
		log.Fatal(err)
	}
	consume.Qos(*prefetch, 0, false)
	deliveries, err := consume.Consume(*queue, "", false, false, false, false, nil)
	if err != nil {
		log.Fatal(err)
	}
	publish := startPublisher(conn)
	fmt.Println("txbench worker started")
	for delivery := range deliveries {
		go func(d amqp.Delivery) {
			var j job
			if err := json.Unmarshal(d.Body, &j); err != nil || j.ReplyTo == "" {
				d.Reject(false)
				return
			}
			confirms := make([]chan bool, 0, len(j.Audience.Tokens))
			for _, token := range j.Audience.Tokens {
				request, _ := http.NewRequest("POST", *apns+"/3/device/"+token, strings.NewReader(string(j.Payload)))
				request.Header.Set("authorization", "bearer "+*bearer)
				request.Header.Set("apns-topic", *topic)
				request.Header.Set("apns-push-type", "alert")
				result := map[string]any{"job_id": j.ID, "token": token}
				if response, err := client.Do(request); err != nil {
					result["outcome"], result["reason"] = "failed", err.Error()
				} else {
					io.Copy(io.Discard, response.Body)
					response.Body.Close()
					result["status"], result["apns_id"] = response.StatusCode, response.Header.Get("apns-id")
					if response.StatusCode == 200 {
						result["outcome"] = "delivered"
					} else {
						result["outcome"] = "rejected"
					}
				}
				body, _ := json.Marshal(result)
				confirmed := make(chan bool, 1)
				publish <- outgoing{key: j.ReplyTo, message: amqp.Publishing{
					ContentType: "application/json", DeliveryMode: amqp.Persistent, CorrelationId: j.ID, Type: "result", Body: body,
				}, confirmed: confirmed}
				confirms = append(confirms, confirmed)
			}
			for _, confirmed := range confirms {
				if !<-confirmed {
					d.Nack(false, true)
					return
				}
			}
			d.Ack(false)
		}(delivery)
	}
}

type outgoing struct {
	key       string
	message   amqp.Publishing
	confirmed chan bool
}

// startPublisher publishes from one goroutine and hands each publish its broker confirm, in
// order: amqp091-go's deferred confirmations are not to be shared by goroutines publishing at once.
func startPublisher(conn *amqp.Connection) chan<- outgoing {
	ch, err := conn.Channel()
	if err != nil {
		log.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		log.Fatal(err)
	}
	confirmations := ch.NotifyPublish(make(chan amqp.Confirmation, 4096))
	requests := make(chan outgoing, 256)
	go func() {
		var pending []chan bool
		for {
			select {
			case request := <-requests:
				if err := ch.PublishWithContext(context.Background(), "", request.key, false, false, request.message); err != nil {
					request.confirmed <- false
					continue
				}
				pending = append(pending, request.confirmed)
			case confirmation := <-confirmations:
				pending[0] <- confirmation.Ack
				pending = pending[1:]
			}
		}
	}()
	return requests
}

func load(args []string) {
	flags := flag.NewFlagSet("load", flag.ExitOnError)
	url := flags.String("amqp", "amqp://guest:guest@127.0.0.1:5672/", "broker")
	queue := flags.String("queue", "", "jobs queue (not declared: the worker's)")
	count := flags.Int("jobs", 5000, "one-device jobs")
	rate := flags.Float64("rate", 0, "jobs per second (0: back to back)")
	series := flags.Int("series", 0, "token series, so runs send to distinct devices")
	flags.Parse(args)

	conn, err := amqp.Dial(*url)
	if err != nil {
		log.Fatal(err)
	}
	ch, err := conn.Channel()
	if err != nil {
		log.Fatal(err)
	}
	reply, err := ch.QueueDeclare("", false, true, true, false, nil)
	if err != nil {
		log.Fatal(err)
	}
	results, err := ch.Consume(reply.Name, "", true, true, false, false, nil)
	if err != nil {
		log.Fatal(err)
	}
	publisher, err := conn.Channel()
	if err != nil {
		log.Fatal(err)
	}
	if err := publisher.Confirm(false); err != nil {
		log.Fatal(err)
	}
	sent := make([]time.Time, *count)
	var sentLock sync.Mutex
	done := make(chan []time.Duration)
	go func() {
		latencies := make([]time.Duration, 0, *count)
		for delivery := range results {
			if delivery.Type != "result" {
				continue
			}
			var index int
			fmt.Sscanf(strings.TrimPrefix(delivery.CorrelationId, "tx-"), "%d", &index)
			sentLock.Lock()
			latencies = append(latencies, time.Since(sent[index]))
			sentLock.Unlock()
			if len(latencies) == *count {
				done <- latencies
				return
			}
		}
	}()
	start := time.Now()
	confirms := make(chan *amqp.DeferredConfirmation, 1024)
	go func() {
		for confirm := range confirms {
			if !confirm.Wait() {
				log.Fatal("the broker refused a job")
			}
		}
	}()
	for index := 0; index < *count; index++ {
		if *rate > 0 {
			if wait := time.Until(start.Add(time.Duration(float64(index) / *rate * float64(time.Second)))); wait > 0 {
				time.Sleep(wait)
			}
		}
		id := fmt.Sprintf("tx-%d", index)
		// A device token is 32 bytes that look random, as APNs issues them: a digest of the series
		// and the index, so runs still send to distinct devices and tokens do not share their first
		// eight characters (almost surely), as they did when made from the series then the index.
		token := sha256.Sum256([]byte(fmt.Sprintf("%d/%d", *series, index)))
		body := fmt.Sprintf(`{"id": %q, "audience": {"tokens": ["%x"]}, "payload": {"aps": {"alert": {"title": "Order", "body": "Your code is 4711"}}}, "reply_to": %q}`,
			id, token, reply.Name)
		sentLock.Lock()
		sent[index] = time.Now()
		sentLock.Unlock()
		confirm, err := publisher.PublishWithDeferredConfirmWithContext(context.Background(), "", *queue, true, false, amqp.Publishing{
			ContentType: "application/json", DeliveryMode: amqp.Persistent, MessageId: id, Body: []byte(body),
		})
		if err != nil {
			log.Fatal(err)
		}
		confirms <- confirm
	}
	var latencies []time.Duration
	select {
	case latencies = <-done:
	case <-time.After(10 * time.Minute):
		log.Fatal("not every job's result came within 10 minutes")
	}
	seconds := time.Since(start).Seconds()
	sort.Slice(latencies, func(a, b int) bool { return latencies[a] < latencies[b] })
	p50, p99 := latencies[len(latencies)/2], latencies[len(latencies)*99/100]
	fmt.Printf("txbench load: %d jobs in %.2f s = %.0f jobs/s; latency publish to result p50 %.1f ms, p99 %.1f ms\n",
		*count, seconds, float64(*count)/seconds, float64(p50.Microseconds())/1000, float64(p99.Microseconds())/1000)
}
