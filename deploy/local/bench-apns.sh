#!/usr/bin/env bash
# Benchmarks the APNs client against the mock APNs and, in the same run, h2load against the same
# server with the same payload and headers. Prints both rates and their ratio.
#
#   deploy/local/bench-apns.sh [COUNT] [CONNECTIONS] [STREAMS]
set -euo pipefail
cd "$(dirname "$0")/../.."
count="${1:-200000}"
connections="${2:-1}"
streams="${3:-1000}"

deploy/local/install-deps.sh
command -v h2load >/dev/null || { apt-get install -y -q nghttp2-client >/dev/null; }
swift build -c release --product pushworker >/dev/null
swift build -c release --product mock-apns >/dev/null
bin="$(swift build -c release --show-bin-path)"

work="$(mktemp -d /tmp/pushworker-bench-XXXXXX)"
trap 'kill $mock_pid 2>/dev/null || true; rm -rf "$work"' EXIT
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj "/CN=bench CA" \
  -keyout "$work/ca.key" -out "$work/ca.pem" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=localhost" \
  -keyout "$work/server.key" -out "$work/server.csr" 2>/dev/null
printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' > "$work/san.ext"
openssl x509 -req -in "$work/server.csr" -CA "$work/ca.pem" -CAkey "$work/ca.key" -CAcreateserial -days 2 \
  -extfile "$work/san.ext" -out "$work/server.pem" 2>/dev/null
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$work/key.p8"
openssl pkey -in "$work/key.p8" -pubout -out "$work/key.pub"
printf '{"aps":{"alert":{"title":"Benchmark","body":"Hello from pushworker"},"sound":"default"}}' > "$work/payload.json"

"$bin/mock-apns" --port 0 --cert "$work/server.pem" --key "$work/server.key" \
  --provider-key "BENCHKEY01:BENCHTEAM1:$work/key.pub" --topic com.example.app > "$work/mock.log" 2>&1 &
mock_pid=$!
for _ in $(seq 100); do grep -q listening "$work/mock.log" && break; sleep 0.1; done
url=$(grep -o 'https://[0-9.:]*' "$work/mock.log" | head -1)
token_hex=$(printf '0a%.0s' $(seq 32))
echo "== mock APNs at $url (release build, 1 event loop thread)"

echo "== pushworker bench apns --count $count --connections $connections --streams $streams"
"$bin/pushworker" bench apns --url "$url" --ca-file "$work/ca.pem" --count "$count" --connections "$connections" \
  --streams "$streams" --key-file "$work/key.p8" --key-id BENCHKEY01 --team-id BENCHTEAM1 \
  --payload-file "$work/payload.json" --token "$token_hex" | tee "$work/ours.txt"

jwt=$("$bin/pushworker" token --key-file "$work/key.p8" --key-id BENCHKEY01 --team-id BENCHTEAM1)
echo "== h2load -n $count -c $connections -m $streams -d payload.json $url/3/device/<token>"
h2load -n "$count" -c "$connections" -m "$streams" -d "$work/payload.json" \
  -H "authorization: bearer $jwt" -H "apns-topic: com.example.app" -H "apns-push-type: alert" \
  "$url/3/device/$token_hex" > "$work/h2load.txt"
grep -E 'finished in|requests:|status codes:' "$work/h2load.txt"

ours=$(grep -o '= [0-9]* notifications/s' "$work/ours.txt" | grep -o '[0-9]*')
theirs=$(grep -o 'finished in [^,]*, [0-9.]* req/s' "$work/h2load.txt" | grep -o '[0-9.]* req/s' | grep -o '[0-9.]*')
echo "== ratio pushworker/h2load: $(python3 -c "print(f'{$ours/$theirs:.2f}')") (target >= 0.6)"
