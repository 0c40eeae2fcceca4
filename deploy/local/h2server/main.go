// A neutral HTTP/2 server for the benchmarks: answers every request with 200 and an apns-id, on
// all cores (a goroutine per stream), with room for 1000 streams per connection. For FCM's
// benchmark it also answers /token with an access token (the grant is not checked: the tests
// check it against the project's mock) and FCM's messages:send with a message name. It is not the
// project's mock, whose SwiftNIO event loop serves a connection on one thread and saturates
// first: a client measured against it would be measured against the mock's limit.
//
// Built by deploy/local/bench.sh (SERVER=go) from Debian's golang-golang-x-net-dev, offline.
package main

import (
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strings"

	"golang.org/x/net/http2"
)

func main() {
	cert := flag.String("cert", "", "PEM certificate (chain)")
	key := flag.String("key", "", "PEM key")
	port := flag.Int("port", 0, "port on 127.0.0.1; 0 picks one")
	flag.Parse()
	pair, err := tls.LoadX509KeyPair(*cert, *key)
	if err != nil {
		log.Fatal(err)
	}
	listener, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", *port))
	if err != nil {
		log.Fatal(err)
	}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		switch {
		case r.URL.Path == "/token":
			w.Header().Set("content-type", "application/json")
			w.WriteHeader(http.StatusOK)
			io.WriteString(w, `{"access_token":"bench-token","expires_in":3599,"token_type":"Bearer"}`)
		case strings.HasPrefix(r.URL.Path, "/v1/projects/"):
			w.Header().Set("content-type", "application/json")
			w.WriteHeader(http.StatusOK)
			io.WriteString(w, `{"name":"projects/bench/messages/0:1700000000000000%0000000000000000"}`)
		default:
			w.Header().Set("apns-id", "3b9f1c1e-0000-4000-8000-000000000000")
			w.WriteHeader(http.StatusOK)
		}
	})
	server := &http.Server{Handler: handler, TLSConfig: &tls.Config{Certificates: []tls.Certificate{pair}}, ErrorLog: log.New(io.Discard, "", 0)}
	if err := http2.ConfigureServer(server, &http2.Server{MaxConcurrentStreams: 1000}); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("listening on https://%s\n", listener.Addr())
	log.Fatal(server.ServeTLS(listener, "", ""))
}
