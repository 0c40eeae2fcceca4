#!/usr/bin/env bash
# Installs the Debian packages pushworker builds and tests with, when any is missing.
set -euo pipefail
source "$(dirname "$0")/swift-path.sh"

packages=(librabbitmq-dev libcurl4-openssl-dev libnghttp2-dev libssl-dev libsqlite3-dev libyajl-dev rabbitmq-server postgresql-15 postgresql-client-15 openssl curl python3-jsonschema
  # the producer examples in docs/clients, run by the tests
  python3-pika golang-go golang-github-rabbitmq-amqp091-go-dev ruby-bunny php-cli php-amqplib nodejs
  # the /deliveries page, driven in a real browser by its test
  chromium chromium-driver python3-selenium
  # promtool, for the alert rules' unit tests (deploy/check.sh)
  prometheus)
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed' || missing+=("$package")
done

if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -q
  # The package's own init script must not start a system-wide broker; we run a user-space node.
  DEBIAN_FRONTEND=noninteractive RUNLEVEL=1 $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

command -v swift >/dev/null || { echo "swift is not on PATH; install Swift 6 (https://www.swift.org/install/linux/)" >&2; exit 1; }
