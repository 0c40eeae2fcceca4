#!/usr/bin/env bash
# Makes throw-away credentials for local runs against the mock APNs, in DIR:
# ca.pem/ca.key, server.pem/server.key (localhost, 127.0.0.1), key.p8 and key.pub (ES256).
#
#   deploy/local/make-pki.sh DIR
#
# PKI_EXTRA_SAN adds names to the server certificate, e.g. DNS:mock-apns for a compose stack.
set -euo pipefail
dir="${1:?usage: $0 DIR}"
mkdir -p "$dir"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj "/CN=pushworker local CA" \
  -keyout "$dir/ca.key" -out "$dir/ca.pem" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=localhost" \
  -keyout "$dir/server.key" -out "$dir/server.csr" 2>/dev/null
printf 'subjectAltName=DNS:localhost,IP:127.0.0.1%s\n' "${PKI_EXTRA_SAN:+,$PKI_EXTRA_SAN}" > "$dir/san.ext"
openssl x509 -req -in "$dir/server.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" -CAcreateserial -days 2 \
  -extfile "$dir/san.ext" -out "$dir/server.pem" 2>/dev/null
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$dir/key.p8"
openssl pkey -in "$dir/key.p8" -pubout -out "$dir/key.pub"
