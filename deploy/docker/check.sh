#!/usr/bin/env bash
# Builds the container image and checks it for real (not part of the test command: it takes
# ~20 minutes on 2 cores, most of it the release build inside Docker; a few with the layers cached):
#
#   deploy/docker/check.sh
#
# 1. Starts a Docker engine if none answers (`dockerd --storage-driver vfs --iptables=false
#    --bridge=none`, as on the project machine) and stops it again at the end.
# 2. Base images: pulled when Docker Hub answers; otherwise stand-ins are made here and tagged
#    with the official names: debian:bookworm-slim (debootstrap minbase + docker import),
#    swift:6.3-bookworm (the same root, the official image's packages, and this machine's Swift
#    toolchain in /usr) and rabbitmq:3.10-management (Debian's rabbitmq-server 3.10, built by
#    deploy/docker/standin/rabbitmq.Dockerfile). Stand-ins carry the label pushworker.stand-in.
# 3. Builds the image from the files git knows (tracked or new, not ignored), with the Swift
#    packages the build resolves copied into the build context's deploy/docker/packages when this
#    machine serves them from local copies (a git insteadOf rule a build inside Docker cannot see).
# 4. Checks the image: a non-root user, a read-only root file system, `pushworker --version`, no
#    missing shared library; with the stack up, `config check` of its configuration.
# 5. Brings the compose stack up (RabbitMQ, the mock APNs, three workers), waits until it is
#    healthy, publishes examples/job.json with the Python producer and reads its three results and
#    the summary; kills one worker (`docker kill`) in the middle of a 20,000-device job and checks
#    that every device gets a result; reads /readyz and /metrics through the published ports;
#    prints the image's size. Then takes the stack down.
#
# Exits non-zero on the first failed check. KEEP=1 leaves the stack running. Run as root.
set -euo pipefail
cd "$(dirname "$0")/../.."
root="$PWD"
[ "$(id -u)" = 0 ] || { echo "run as root: it starts dockerd, runs debootstrap and chroot" >&2; exit 2; }
source deploy/local/swift-path.sh 2>/dev/null || true
project=pwcheck
compose=(docker-compose -p "$project" -f deploy/docker/compose.yaml)
# Host ports below the ephemeral range: the broker's AMQP port and the three workers' endpoints.
export PUSHWORKER_AMQP_PORT="${PUSHWORKER_AMQP_PORT:-25670}"
export PUSHWORKER_METRICS_PORTS="${PUSHWORKER_METRICS_PORTS:-29090-29092}"
export PUSHWORKER_MANAGEMENT_PORT="${PUSHWORKER_MANAGEMENT_PORT:-25680}"
engine_started_here=false
work=/nonexistent
trap cleanup EXIT
work="$(mktemp -d /var/tmp/pushworker-docker-check-XXXXXX)"
step() { echo "== $*"; }
fail() { echo "FAILED: $*" >&2; exit 1; }

cleanup() {
  local status=$?
  set +e
  if [ "${KEEP:-}" != 1 ] && docker info >/dev/null 2>&1; then
    "${compose[@]}" down -v --remove-orphans >/dev/null 2>&1
  fi
  # Anything mounted under the scratch directory (a chroot's /proc) first, then the directory on
  # its own file system only.
  grep -o " $work/[^ ]*" /proc/mounts | sort -r | while read -r mounted; do umount -l "$mounted"; done
  rm -rf --one-file-system "$work"
  if $engine_started_here && [ "${KEEP:-}" != 1 ]; then
    kill "$(cat /var/run/docker.pid 2>/dev/null)" 2>/dev/null
  fi
  exit $status
}

# --- 0. tools ---------------------------------------------------------------------------------
missing=()
command -v dockerd >/dev/null || missing+=(docker.io)
command -v docker-compose >/dev/null || missing+=(docker-compose)
command -v debootstrap >/dev/null || missing+=(debootstrap)
/usr/bin/python3 -c 'import pika' 2>/dev/null || missing+=(python3-pika)
command -v curl >/dev/null || missing+=(curl)
if [ ${#missing[@]} -gt 0 ]; then
  step "installing ${missing[*]}"
  apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >/dev/null
fi

# --- 1. engine ----------------------------------------------------------------------------------
if ! docker info >/dev/null 2>&1; then
  step "starting dockerd (vfs storage, no iptables, no default bridge); log /var/log/pushworker-dockerd.log"
  nohup dockerd --storage-driver vfs --iptables=false --bridge=none > /var/log/pushworker-dockerd.log 2>&1 &
  engine_started_here=true
  for _ in $(seq 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
  docker info >/dev/null 2>&1 || fail "dockerd did not answer within 60 s (see /var/log/pushworker-dockerd.log)"
fi
step "engine $(docker version --format '{{.Server.Version}}')"

# --- 2. base images -----------------------------------------------------------------------------
stand_in() { [ "$(docker image inspect -f '{{index .Config.Labels "pushworker.stand-in"}}' "$1" 2>/dev/null)" = true ]; }
have() { docker image inspect "$1" >/dev/null 2>&1; }
pulled() { timeout 120 docker pull -q "$1" >/dev/null 2>&1; }

bookworm_root() {  # a minbase bookworm root at $1 (made once per run)
  if [ ! -d "$work/bookworm" ]; then
    debootstrap --variant=minbase bookworm "$work/bookworm" http://deb.debian.org/debian > "$work/debootstrap.log" 2>&1 \
      || fail "debootstrap failed (see $work/debootstrap.log)"
    rm -rf "$work/bookworm/var/cache/apt/archives"/*.deb "$work/bookworm/var/lib/apt/lists"/*
  fi
  cp -a "$work/bookworm" "$1"
}

make_debian() {
  bookworm_root "$work/debian-root"
  tar -C "$work/debian-root" -c . | docker import --change 'CMD ["bash"]' --change 'LABEL pushworker.stand-in=true' - "$1" >/dev/null
}

make_swift() {
  local dir="$work/swift-root"
  bookworm_root "$dir"
  cp /etc/resolv.conf "$dir/etc/resolv.conf"
  mount -t proc proc "$dir/proc"
  # The packages swift-docker's 6.3/debian/12 Dockerfile installs.
  chroot "$dir" /bin/sh -c 'apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q binutils libicu-dev \
    libcurl4-openssl-dev libedit-dev libsqlite3-dev libncurses-dev libpython3-dev libxml2-dev pkg-config uuid-dev tzdata git gcc \
    libstdc++-12-dev ca-certificates && rm -rf /var/lib/apt/lists/*' > "$work/swift-apt.log" 2>&1 || fail "apt in the Swift root failed (see $work/swift-apt.log)"
  umount "$dir/proc"
  # This machine's toolchain where the official image has it, without what a build does not use
  # (the debugger, the language server, documentation, formatting, the embedded stdlib).
  local swift toolchain
  swift="$(command -v swift)" || fail "no swift on PATH: the stand-in takes this machine's toolchain"
  toolchain="$(dirname "$(dirname "$(readlink -f "$swift")")")"
  tar -C "$toolchain" -c --exclude='./bin/lldb*' --exclude='./bin/sourcekit-lsp' --exclude='./bin/clangd' --exclude='./bin/docc' \
    --exclude='./bin/swift-format' --exclude='./lib/liblldb*' --exclude='./lib/libsourcekitdInProc.so' --exclude='./lib/swift/embedded' \
    --exclude='./share/doc' --exclude='./share/docc' . | tar -C "$dir/usr" -x
  tar -C "$dir" -c . | docker import --change 'CMD ["bash"]' --change 'LABEL pushworker.stand-in=true' - "$1" >/dev/null
  rm -rf "$dir"
}

make_rabbitmq() {
  docker build -q --network host -f deploy/docker/standin/rabbitmq.Dockerfile --label pushworker.stand-in=true -t "$1" . >/dev/null
}

base() {  # IMAGE MAKER
  if have "$1" && ! stand_in "$1"; then
    step "$1: present"
  elif pulled "$1"; then
    # A stand-in of an earlier run is replaced by the real image once Docker Hub answers.
    step "$1: pulled"
  elif have "$1"; then
    step "$1: present (a stand-in made here; Docker Hub does not answer)"
  else
    step "$1: Docker Hub does not answer; making a stand-in"
    local started=$SECONDS
    "$2" "$1"
    step "$1: stand-in made in $((SECONDS - started)) s"
  fi
}
swift_image="$(sed -n 's/^ARG SWIFT_IMAGE=//p' deploy/docker/Dockerfile)"
base debian:bookworm-slim make_debian
base "$swift_image" make_swift
base rabbitmq:3.10-management make_rabbitmq

# --- 3. the image ---------------------------------------------------------------------------------
step "build context: the files git knows, and the resolved Swift packages"
context="$work/context"
mkdir -p "$context"
git ls-files -z -co --exclude-standard | tar --null -T - -c | tar -C "$context" -x
insteadof="$(git config --get-regexp '^url\..*\.insteadof$' 'https://github.com/' | head -1 | sed 's/^url\.\(.*\)\.insteadof .*/\1/' || true)"
if [ -n "$insteadof" ] && [ -d "$insteadof" ]; then
  # This machine resolves GitHub from local copies: bring those the build resolves.
  swift package resolve >/dev/null 2>&1 || fail "swift package resolve failed"
  python3 - "$insteadof" "$context/deploy/docker/packages" <<'PY'
import json, os, shutil, sys
source, target = sys.argv[1], sys.argv[2]
pins = json.load(open("Package.resolved"))["pins"]
for pin in pins:
    path = pin["location"].removeprefix("https://github.com/").removesuffix(".git")
    found = next((p for p in (os.path.join(source, path + ".git"), os.path.join(source, path)) if os.path.isdir(p)), None)
    if not found:
        sys.exit(f"{pin['location']}: no local copy under {source}")
    shutil.copytree(found, os.path.join(target, path + ".git"), symlinks=True)
print(f"   {len(pins)} packages copied from {source}")
PY
fi

step "docker build --network host -f deploy/docker/Dockerfile -t pushworker:local (the release build: ~20 minutes on 2 cores)"
build_started=$SECONDS
docker build --network host -f deploy/docker/Dockerfile -t pushworker:local "$context" > "$work/build.log" 2>&1 \
  || { tail -40 "$work/build.log"; fail "docker build failed"; }
docker build --network host -f deploy/docker/Dockerfile --target pki -t pushworker-pki:local "$context" > "$work/build-pki.log" 2>&1 \
  || { tail -20 "$work/build-pki.log"; fail "docker build of the pki stage failed"; }
step "built in $((SECONDS - build_started)) s"

# --- 4. the image itself ------------------------------------------------------------------------------
step "image: user, read-only root, --version, shared libraries"
user="$(docker image inspect -f '{{.Config.User}}' pushworker:local)"
[ "$user" = 10001 ] || fail "the image runs as '$user', not 10001"
uid="$(docker run --rm --read-only --network none --entrypoint id pushworker:local -u)"
[ "$uid" = 10001 ] || fail "id -u in the image: $uid"
version="$(docker run --rm --read-only --network none pushworker:local --version)"
echo "   runs as uid $uid with a read-only root; pushworker --version: $version"
missing_libraries="$(docker run --rm --read-only --network none --entrypoint /bin/sh pushworker:local -c \
  'ldd /usr/local/bin/pushworker /usr/local/bin/mock-apns | grep "not found" || true')"
[ -z "$missing_libraries" ] || fail "missing shared libraries: $missing_libraries"
echo "   ldd: no missing library in pushworker or mock-apns"

# --- 5. the compose stack ---------------------------------------------------------------------------
step "docker-compose up (RabbitMQ, the mock APNs and 3 workers, these read-only); AMQP on 127.0.0.1:$PUSHWORKER_AMQP_PORT, workers' endpoints on $PUSHWORKER_METRICS_PORTS"
"${compose[@]}" up -d --no-build > "$work/up.log" 2>&1 || { cat "$work/up.log"; fail "docker-compose up failed"; }
rabbitmq="$("${compose[@]}" ps -q rabbitmq)"
for _ in $(seq 120); do
  [ "$(docker inspect -f '{{.State.Health.Status}}' "$rabbitmq" 2>/dev/null)" = healthy ] && break
  sleep 2
done
[ "$(docker inspect -f '{{.State.Health.Status}}' "$rabbitmq")" = healthy ] || { "${compose[@]}" logs rabbitmq | tail -30; fail "RabbitMQ did not become healthy"; }
first_port="${PUSHWORKER_METRICS_PORTS%-*}"
last_port="${PUSHWORKER_METRICS_PORTS#*-}"
for port in $(seq "$first_port" "$last_port"); do
  for _ in $(seq 60); do curl -sf "http://127.0.0.1:$port/readyz" >/dev/null && break; sleep 1; done
  curl -sf "http://127.0.0.1:$port/readyz" >/dev/null || { "${compose[@]}" logs worker | tail -30; fail "no worker ready on port $port"; }
done
echo "   RabbitMQ healthy; /readyz 200 on every worker's published port ($PUSHWORKER_METRICS_PORTS)"

step "config check inside the image, on the stack's configuration and credentials (read-only root)"
docker run --rm --read-only --network none -v "${project}_pki:/pki:ro" \
  -v "$root/deploy/docker/pushworker.yaml:/etc/pushworker/pushworker.yaml:ro" -e PUSHWORKER_AMQP_URL=amqp://pushworker:secret@rabbitmq:5672/ \
  pushworker:local config check --config /etc/pushworker/pushworker.yaml > "$work/config-check.txt" || { cat "$work/config-check.txt"; fail "config check"; }
grep -q 'secret' "$work/config-check.txt" && fail "config check printed the broker password"
echo "   config check: exit 0, $(wc -l < "$work/config-check.txt") lines, the password masked"

amqp_url="amqp://pushworker:pushworker@127.0.0.1:$PUSHWORKER_AMQP_PORT/"
step "the Python producer publishes examples/job.json"
AMQP_URL="$amqp_url" /usr/bin/python3 docs/clients/python/producer.py --job examples/job.json > "$work/producer.txt" \
  || fail "the producer exited $?"
cat "$work/producer.txt" | sed 's/^/   /'
python3 - "$work/producer.txt" <<'PY'
import json, sys
lines = [json.loads(line) for line in open(sys.argv[1])]
results = [line for line in lines if "token" in line]
summary = lines[-1]
outcomes = sorted(result["outcome"] for result in results)
assert len(results) == 3 and len({r["token"] for r in results}) == 3, results
assert outcomes == ["delivered", "delivered", "rejected"], outcomes
assert summary["job_id"] == "demo-1" and summary["devices"] == 3, summary
print("   3 results (2 delivered, 1 rejected: Unregistered) and the summary")
PY

step "20,000-device job; one worker killed (docker kill) in the middle"
victim="$("${compose[@]}" ps -q worker | sed -n 2p)"
AMQP_URL="$amqp_url" /usr/bin/python3 - "$victim" <<'PY'
import json, subprocess, sys, time, uuid
import pika

victim = sys.argv[1]
connection = pika.BlockingConnection(pika.URLParameters(__import__("os").environ["AMQP_URL"]))
channel = connection.channel()
reply = f"check.results.{uuid.uuid4().hex[:8]}"
channel.queue_declare(reply, durable=True, arguments={"x-expires": 600000})
channel.confirm_delivery()
count = 20000
tokens = [f"{0xD0C0000 + i:064x}" for i in range(count)]
job = {"id": "kill-check", "app": "demo", "audience": {"tokens": tokens}, "payload": {"aps": {"alert": "kill check"}}, "reply_to": reply}
channel.basic_publish("push", "jobs", json.dumps(job).encode(),
                      pika.BasicProperties(content_type="application/json", delivery_mode=2, message_id="kill-check"), mandatory=True)
seen, repeated, killed, last = {}, 0, False, time.monotonic()
for method, properties, body in channel.consume(reply, inactivity_timeout=120):
    if method is None:
        sys.exit(f"no result for 120 s; {len(seen)} of {count} devices have one")
    channel.basic_ack(method.delivery_tag)
    if properties.type == "result":
        token = json.loads(body)["token"]
        repeated += token in seen
        seen[token] = True
    if not killed and len(seen) >= count // 4:
        subprocess.run(["docker", "kill", victim], check=True, capture_output=True)
        killed = True
        print(f"   killed {victim} after {len(seen)} devices had their result")
    if len(seen) == count:
        break
channel.cancel()
missing = set(tokens) - set(seen)
assert not missing, f"{len(missing)} devices without a result"
# At least once: what comes twice is what the killed worker held, at most its bulk lane's
# prefetch (4 chunk jobs by default) of chunk_size (1000) devices, and its now lane's jobs.
assert repeated <= 4 * 1000 + 1000, f"{repeated} devices got a second result: more than the killed worker held"
print(f"   every one of the {count} devices has a result; {repeated} repeated (the killed worker's chunks in flight, sent again)")
connection.close()
PY

step "the killed worker started again; /readyz and /metrics through the published ports"
docker start "$victim" >/dev/null
for port in $(seq "$first_port" "$last_port"); do
  for _ in $(seq 60); do curl -sf "http://127.0.0.1:$port/readyz" >/dev/null && break; sleep 1; done
done
for port in $(seq "$first_port" "$last_port"); do
  code="$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/readyz" || true)"
  sent="$(curl -sf "http://127.0.0.1:$port/metrics" | grep -c '^pushworker_notifications_total' || true)"
  echo "   127.0.0.1:$port: /readyz $code, /metrics $sent pushworker_notifications_total series"
done
for port in $(seq "$first_port" "$last_port"); do
  curl -sf "http://127.0.0.1:$port/readyz" >/dev/null || fail "/readyz on 127.0.0.1:$port"
  page="$(curl -sf "http://127.0.0.1:$port/metrics")" || fail "/metrics on 127.0.0.1:$port"
  grep -q '^# TYPE pushworker_' <<<"$page" || fail "no pushworker metrics on 127.0.0.1:$port"
done
sent=0
for port in $(seq "$first_port" "$last_port"); do
  sent=$((sent + $(curl -sf "http://127.0.0.1:$port/metrics" | awk '/^pushworker_notifications_total/ { sum += $NF } END { print sum + 0 }')))
done
echo "   every worker ready; pushworker_notifications_total over the workers: $sent (the killed worker's own count went with it)"

size="$(docker image inspect -f '{{.Size}}' pushworker:local)"
base_size="$(docker image inspect -f '{{.Size}}' debian:bookworm-slim)"
step "image pushworker:local: $((size / 1024 / 1024)) MiB, of which $((base_size / 1024 / 1024)) MiB is debian:bookworm-slim$(stand_in debian:bookworm-slim && echo ' (the stand-in)')"
step "all checks passed"
