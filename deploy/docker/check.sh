#!/usr/bin/env bash
# Builds the container images and checks them for real (not part of the test command: it takes
# ~25 minutes on 2 cores, most of it the release build inside Docker):
#
#   deploy/docker/check.sh
#
# 1. Starts a Docker engine if none answers (`dockerd --storage-driver vfs --iptables=false
#    --bridge=none`, as on the project machine) and stops it again at the end, unless asked not to.
# 2. Base images: pulled when Docker Hub answers, and then pinned by digest in the build;
#    otherwise stand-ins are made here under the official names: debian:bookworm-slim (debootstrap
#    minbase, slimmed as the official image is: no documentation, man pages or translations, apt's
#    caches cleaned after each install), swift:6.3-bookworm (the same root, the official image's
#    packages, and this machine's Swift toolchain in /usr) and rabbitmq:3.10-management (Debian's
#    rabbitmq-server 3.10, deploy/docker/standin/rabbitmq.Dockerfile). The imported stand-ins are
#    marked by their commit message, not a label, so that nothing of them reaches an image built on
#    them.
# 3. Builds pushworker:local (the worker only), pushworker-mock-apns:local and pushworker-pki:local
#    from the files git knows (tracked or new, not ignored), with OCI labels (version, revision,
#    source, creation time, base) and the Swift packages the build resolves copied into the build
#    context's deploy/docker/packages when this machine serves them from local copies.
# 4. Checks the image: a non-root user, a read-only root file system, `pushworker --version`, no
#    missing shared library, the HEALTHCHECK, the labels (and no stand-in's), no mock in it.
# 5. Brings the compose stack up (RabbitMQ, the mock APNs, three workers; Compose v2 where the
#    machine has it, else docker-compose v1), waits until every worker's healthcheck says healthy,
#    starts Prometheus (Debian's) scraping the three workers with the alert rules loaded, publishes
#    examples/job.json with the Python producer and reads its three results and the summary; kills
#    one worker (`docker kill`) in the middle of a 20,000-device job and checks that every device
#    gets a result; restarts RabbitMQ and waits for the workers to be healthy again; asks Prometheus
#    every query of the Grafana dashboard (deploy/grafana) and requires data from each; prints the
#    images' sizes. Then takes the stack down, removes the build stage and says what is left.
#
# Exits non-zero on the first failed check. Run as root. Variables:
#   KEEP=1         leave the stack (and so the engine) running
#   KEEP_ENGINE=1  leave an engine this script started running
#   KEEP_BUILD=1   keep the build stage's images: the next run rebuilds only what changed
#   SOURCE=URL     the org.opencontainers.image.source label (default: git's origin remote)
set -euo pipefail
cd "$(dirname "$0")/../.."
root="$PWD"
[ "$(id -u)" = 0 ] || { echo "run as root: it starts dockerd, runs debootstrap and chroot" >&2; exit 2; }
source deploy/local/swift-path.sh 2>/dev/null || true
project=pwcheck
compose=(docker-compose -p "$project" -f deploy/docker/compose.yaml)
compose_name="docker-compose v1"
# Host ports below the ephemeral range: the broker's AMQP port and the three workers' endpoints.
export PUSHWORKER_AMQP_PORT="${PUSHWORKER_AMQP_PORT:-25670}"
export PUSHWORKER_METRICS_PORTS="${PUSHWORKER_METRICS_PORTS:-29090-29092}"
export PUSHWORKER_MANAGEMENT_PORT="${PUSHWORKER_MANAGEMENT_PORT:-25680}"
prometheus_port="${PUSHWORKER_PROMETHEUS_PORT:-29099}"
prometheus_pid=""
engine_started_here=false
work=/nonexistent
trap cleanup EXIT
work="$(mktemp -d /var/tmp/pushworker-docker-check-XXXXXX)"
step() { echo "== $*"; }
fail() { echo "FAILED: $*" >&2; exit 1; }

cleanup() {
  local status=$?
  set +e
  [ -n "$prometheus_pid" ] && kill "$prometheus_pid" 2>/dev/null && wait "$prometheus_pid" 2>/dev/null
  if [ "${KEEP:-}" != 1 ] && docker info >/dev/null 2>&1; then
    "${compose[@]}" down -v --remove-orphans >/dev/null 2>&1
  fi
  # Anything mounted under the scratch directory (a chroot's /proc) first, then the directory on
  # its own file system only.
  grep -o " $work/[^ ]*" /proc/mounts | sort -r | while read -r mounted; do umount -l "$mounted"; done
  rm -rf --one-file-system "$work"
  if [ "${KEEP_BUILD:-}" != 1 ] && docker info >/dev/null 2>&1; then
    # The stages' images no tag names: the build stage (the release build, ~1 GB beyond the Swift
    # image), the others, and earlier runs' images whose tags moved on. KEEP_BUILD=1 keeps them.
    docker image prune -f --filter label=pushworker.stage >/dev/null 2>&1
    # BuildKit's cache is the engine's, shared with other projects: emptied only on an engine
    # started here.
    $engine_started_here && docker builder prune -f >/dev/null 2>&1
  fi
  if docker info >/dev/null 2>&1; then
    echo "== left behind: $(docker images -q | wc -l) images ($(docker images --format '{{.Repository}}:{{.Tag}}' | grep -v '<none>' | sort | tr '\n' ' ')); engine storage $(du -sh "$(docker info -f '{{.DockerRootDir}}')" 2>/dev/null | cut -f1) in $(docker info -f '{{.DockerRootDir}}')"
    echo "   docker rmi pushworker:local pushworker-mock-apns:local pushworker-pki:local removes the images built here; docker system prune -a removes everything unused"
  fi
  if $engine_started_here && [ "${KEEP:-}" != 1 ] && [ "${KEEP_ENGINE:-}" != 1 ]; then
    kill "$(cat /var/run/docker.pid 2>/dev/null)" 2>/dev/null
    echo "== the Docker engine started by this script is stopped (KEEP_ENGINE=1 leaves it running)"
  elif $engine_started_here; then
    echo "== the Docker engine started by this script is left running (pid $(cat /var/run/docker.pid 2>/dev/null))"
  fi
  exit $status
}

# --- 0. tools ---------------------------------------------------------------------------------
missing=()
command -v dockerd >/dev/null || missing+=(docker.io)
command -v docker-compose >/dev/null || docker compose version >/dev/null 2>&1 || missing+=(docker-compose)
command -v debootstrap >/dev/null || missing+=(debootstrap)
command -v prometheus >/dev/null || missing+=(prometheus)
/usr/bin/python3 -c 'import pika' 2>/dev/null || missing+=(python3-pika)
command -v curl >/dev/null || missing+=(curl)
if [ ${#missing[@]} -gt 0 ]; then
  step "installing ${missing[*]}"
  apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
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
# Compose v2 (the docker CLI's plugin) where the machine has it; Debian bookworm ships v1 only.
if docker compose version >/dev/null 2>&1; then
  compose=(docker compose -p "$project" -f deploy/docker/compose.yaml)
  compose_name="Compose $(docker compose version --short)"
fi
step "compose: $compose_name"

# --- 2. base images -----------------------------------------------------------------------------
standin_mark="pushworker stand-in"
# The imported stand-ins carry the mark as their commit message (labels would be inherited by every
# image built on them); the RabbitMQ stand-in, a base of nothing here, as a label.
stand_in() {
  [ "$(docker image inspect -f '{{.Comment}}' "$1" 2>/dev/null)" = "$standin_mark" ] \
    || [ "$(docker image inspect -f '{{index .Config.Labels "pushworker.stand-in"}}' "$1" 2>/dev/null)" = true ]
}
# A stand-in of an earlier version of this script: labelled, so made again.
labelled_import() {
  [ "$1" != rabbitmq:3.10-management ] && [ "$(docker image inspect -f '{{index .Config.Labels "pushworker.stand-in"}}' "$1" 2>/dev/null)" = true ]
}
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
  local dir="$work/debian-root"
  bookworm_root "$dir"
  # What the official slim image does (debuerreotype's slimify and its apt settings): packages
  # installed later bring no documentation, man pages or translations, and apt cleans its caches.
  cat > "$dir/etc/dpkg/dpkg.cfg.d/docker" <<'CFG'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
path-exclude /usr/share/man/*
CFG
  cat > "$dir/etc/apt/apt.conf.d/docker-clean" <<'CFG'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
CFG
  echo 'Acquire::Languages "none";' > "$dir/etc/apt/apt.conf.d/docker-no-languages"
  echo 'Acquire::GzipIndexes "true";' > "$dir/etc/apt/apt.conf.d/docker-gzip-indexes"
  find "$dir/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
  find "$dir/usr/share/doc" -mindepth 1 -type d -empty -delete
  find "$dir/usr/share/locale" -mindepth 1 -maxdepth 1 -not -name locale.alias -exec rm -rf {} +
  rm -rf "$dir"/usr/share/man/* "$dir"/usr/share/info/* "$dir"/usr/share/groff/* "$dir"/usr/share/lintian/* \
    "$dir"/var/cache/apt/*.bin "$dir"/var/cache/debconf/*-old "$dir"/var/lib/dpkg/*-old "$dir"/var/log/*.log "$dir"/var/log/apt/*
  tar -C "$dir" -c . | docker import -m "$standin_mark" --change 'CMD ["bash"]' - "$1" >/dev/null
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
  tar -C "$dir" -c . | docker import -m "$standin_mark" --change 'CMD ["bash"]' - "$1" >/dev/null
  rm -rf "$dir"
}

make_rabbitmq() {
  docker build -q --network host -f deploy/docker/standin/rabbitmq.Dockerfile --label pushworker.stand-in=true -t "$1" . >/dev/null
}

base() {  # IMAGE MAKER
  if labelled_import "$1"; then
    step "$1: a stand-in of an earlier check.sh, labelled; made again"
    docker rmi -f "$1" >/dev/null
  fi
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

# A base pulled from its registry is pinned by its digest; a stand-in has none.
pinned() {
  if stand_in "$1"; then echo "$1"; else docker image inspect -f '{{index .RepoDigests 0}}' "$1" 2>/dev/null || echo "$1"; fi
}
swift_base="$(pinned "$swift_image")"
runtime_base="$(pinned debian:bookworm-slim)"
step "bases: $swift_base, $runtime_base$([[ "$runtime_base" == *@sha256:* ]] || echo ' (stand-ins: no digest to pin)')"

# --- 3. the image ---------------------------------------------------------------------------------
step "build context: the files git knows, and the resolved Swift packages"
context="$work/context"
mkdir -p "$context"
# (A file deleted but not yet committed is still listed: --ignore-failed-read skips it.)
git ls-files -z -co --exclude-standard | tar --null --ignore-failed-read -T - -c 2>/dev/null | tar -C "$context" -x
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

version="$(sed -n 's/.*static let version = "\(.*\)"/\1/p' Sources/PushWorkerCLI/PushWorkerCommand.swift)"
revision="$(git rev-parse HEAD)"
# The build context is the work tree: a change not committed makes the revision say so.
[ -z "$(git status --porcelain --untracked-files=normal)" ] || revision="$revision-dirty"
source_url="${SOURCE:-$(git remote get-url origin 2>/dev/null | sed -E 's#//[^/@]*@#//#' || true)}"
build_args=(--network host -f deploy/docker/Dockerfile
  --build-arg "SWIFT_IMAGE=$swift_base" --build-arg "RUNTIME_IMAGE=$runtime_base"
  --build-arg "VERSION=$version" --build-arg "REVISION=$revision" --build-arg "SOURCE=${source_url:-unknown}"
  --build-arg "CREATED=$(date -u +%Y-%m-%dT%H:%M:%SZ)")
step "docker build pushworker:local, pushworker-mock-apns:local, pushworker-pki:local (the release build: ~20 minutes on 2 cores)"
build_started=$SECONDS
docker build "${build_args[@]}" -t pushworker:local "$context" > "$work/build.log" 2>&1 \
  || { tail -40 "$work/build.log"; fail "docker build failed"; }
docker build "${build_args[@]}" --target mock-apns -t pushworker-mock-apns:local "$context" > "$work/build-mock.log" 2>&1 \
  || { tail -20 "$work/build-mock.log"; fail "docker build of the mock-apns stage failed"; }
docker build "${build_args[@]}" --target pki -t pushworker-pki:local "$context" > "$work/build-pki.log" 2>&1 \
  || { tail -20 "$work/build-pki.log"; fail "docker build of the pki stage failed"; }
step "built in $((SECONDS - build_started)) s"

# --- 4. the image itself ------------------------------------------------------------------------------
step "image: user, read-only root, --version (every library loads), what it holds"
user="$(docker image inspect -f '{{.Config.User}}' pushworker:local)"
[ "$user" = 10001 ] || fail "the image runs as '$user', not 10001"
# Nothing but the worker can run in the image (no shell, no id): the loader resolving every library
# at the start of `--version` is the shared-library check.
version_output="$(docker run --rm --read-only --network none pushworker:local --version)" || fail "pushworker --version in the image"
echo "   runs as uid $user with a read-only root; pushworker --version: $version_output"
container="$(docker create pushworker:local)"
docker export "$container" | tar -t > "$work/image-files.txt"
docker rm "$container" >/dev/null
grep -qx 'usr/local/bin/pushworker' "$work/image-files.txt" || fail "no usr/local/bin/pushworker in the image"
container="$(docker create pushworker:local)"
home="$(docker export "$container" | tar -tv --numeric-owner | awk '$NF == "var/lib/pushworker/" { print $2 }')"
docker rm "$container" >/dev/null
[ "$home" = 10001/10001 ] || fail "/var/lib/pushworker is owned by '$home', not the worker (10001)"
! grep -Eq '(^|/)(mock-apns|sh|bash|apt|dpkg)$' "$work/image-files.txt" || fail "the image holds $(grep -E '(^|/)(mock-apns|sh|bash|apt|dpkg)$' "$work/image-files.txt" | tr '\n' ' ')"
echo "   $(grep -vc '/$' "$work/image-files.txt") files: pushworker, $(grep -c '\.so' "$work/image-files.txt") shared libraries, CA certificates, $(grep -c 'var/lib/dpkg/status.d/.' "$work/image-files.txt") package records; no shell, no mock, no package manager"
missing_libraries="$(docker run --rm --read-only --network none --entrypoint /bin/sh pushworker-mock-apns:local -c \
  'ldd /usr/local/bin/mock-apns | grep "not found" || true')"
[ -z "$missing_libraries" ] || fail "missing shared libraries in the mock's image: $missing_libraries"
healthcheck="$(docker image inspect -f '{{json .Config.Healthcheck.Test}}' pushworker:local)"
[ "$healthcheck" = '["CMD","pushworker","health","--timeout","5"]' ] || fail "the image's HEALTHCHECK is $healthcheck"
labels="$(docker image inspect -f '{{json .Config.Labels}}' pushworker:local)"
python3 - "$labels" "$version" "$revision" <<'PY' || fail "the image's labels"
import json, sys
labels, version, revision = json.loads(sys.argv[1]) or {}, sys.argv[2], sys.argv[3]
assert not [k for k in labels if "stand-in" in k], f"a stand-in's label reached the image: {labels}"
oci = {k.removeprefix("org.opencontainers.image."): v for k, v in labels.items() if k.startswith("org.opencontainers.image.")}
assert oci.get("version") == version and oci.get("revision") == revision, oci
assert oci.get("created", "unknown") != "unknown" and oci.get("title") == "pushworker", oci
print("   HEALTHCHECK pushworker health; labels: " + ", ".join(f"{k}={v}" for k, v in sorted(oci.items()) if v))
PY

# --- 5. the compose stack ---------------------------------------------------------------------------
step "$compose_name up (RabbitMQ, the mock APNs and 3 workers, these read-only); AMQP on 127.0.0.1:$PUSHWORKER_AMQP_PORT, workers' endpoints on $PUSHWORKER_METRICS_PORTS"
"${compose[@]}" up -d --no-build > "$work/up.log" 2>&1 || { cat "$work/up.log"; fail "compose up failed"; }
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

# Each worker's healthcheck (`pushworker health`) says healthy: what `docker ps` shows.
workers_healthy() {
  local container
  for _ in $(seq 90); do
    local healthy=0
    for container in $("${compose[@]}" ps -q worker); do
      [ "$(docker inspect -f '{{.State.Health.Status}}' "$container")" = healthy ] && healthy=$((healthy + 1))
    done
    [ "$healthy" = 3 ] && return 0
    sleep 2
  done
  for container in $("${compose[@]}" ps -a -q worker); do
    docker inspect -f '{{.Name}}: {{.State.Health.Status}} {{range .State.Health.Log}}{{.ExitCode}} {{.Output}}{{end}}' "$container"
  done
  return 1
}
workers_healthy || fail "a worker's healthcheck does not say healthy"
echo "   docker ps: $(docker ps --filter "label=com.docker.compose.project=$project" --filter health=healthy --format '{{.Names}}' | grep -c worker) workers healthy (pushworker health)"
for container in $("${compose[@]}" ps -q worker mock-apns); do
  hardening="$(docker inspect -f '{{.HostConfig.CapDrop}} {{.HostConfig.SecurityOpt}} {{.HostConfig.ReadonlyRootfs}} {{.Config.User}}' "$container")"
  [ "$hardening" = "[ALL] [no-new-privileges:true] true 10001" ] || fail "$(docker inspect -f '{{.Name}}' "$container"): $hardening"
  if docker inspect -f '{{json .Config.Env}}' "$container" | grep -q 'pushworker:pushworker@'; then
    fail "the broker password is in $(docker inspect -f '{{.Name}}' "$container")'s environment"
  fi
done
echo "   workers and mock: no capabilities, no-new-privileges, read-only root, uid 10001; the broker URL from a secret file, not in docker inspect"

step "Prometheus (Debian's $(prometheus --version 2>&1 | sed -n 's/^prometheus, version \([^ ]*\).*/\1/p')) scrapes the three workers every 2 s, with deploy/prometheus/alerts.yaml loaded"
cat > "$work/prometheus.yml" <<YAML
global: {scrape_interval: 2s, evaluation_interval: 2s}
rule_files: [$root/deploy/prometheus/alerts.yaml]
scrape_configs:
  - job_name: pushworker
    static_configs:
      - targets: [$(for port in $(seq "$first_port" "$last_port"); do printf '"127.0.0.1:%s",' "$port"; done | sed 's/,$//')]
YAML
prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/prometheus-data" \
  --web.listen-address="127.0.0.1:$prometheus_port" > "$work/prometheus.log" 2>&1 &
prometheus_pid=$!
prometheus_started="$(date +%s)"
for _ in $(seq 60); do
  [ "$(curl -s "http://127.0.0.1:$prometheus_port/api/v1/query?query=count(up%3D%3D1)" | python3 -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if r else 0)' 2>/dev/null)" = 3 ] && break
  sleep 1
done
[ "$(curl -s "http://127.0.0.1:$prometheus_port/api/v1/rules" | python3 -c 'import json,sys; print(sum(len(g["rules"]) for g in json.load(sys.stdin)["data"]["groups"]))')" -gt 0 ] \
  || { tail -20 "$work/prometheus.log"; fail "Prometheus did not load the alert rules"; }
echo "   3 targets up; $(curl -s "http://127.0.0.1:$prometheus_port/api/v1/rules" | python3 -c 'import json,sys; print(sum(len(g["rules"]) for g in json.load(sys.stdin)["data"]["groups"]))') alert rules loaded"

step "config check inside the image, on the stack's configuration and credentials (read-only root)"
printf 'amqp://pushworker:secret@rabbitmq:5672/\n' > "$work/amqp-url"
chmod 644 "$work/amqp-url"
docker run --rm --read-only --network none -v "${project}_pki:/pki:ro" -v "$work/amqp-url:/run/secrets/amqp_url:ro" \
  -v "$root/deploy/docker/pushworker.yaml:/etc/pushworker/pushworker.yaml:ro" -e PUSHWORKER_AMQP_URL_FILE=/run/secrets/amqp_url \
  pushworker:local config check --config /etc/pushworker/pushworker.yaml > "$work/config-check.txt" || { cat "$work/config-check.txt"; fail "config check"; }
grep -q 'secret' "$work/config-check.txt" && fail "config check printed the broker password"
grep -q 'pushworker:\*\*\*@rabbitmq:5672' "$work/config-check.txt" || fail "config check did not read PUSHWORKER_AMQP_URL_FILE"
echo "   config check: exit 0, $(wc -l < "$work/config-check.txt") lines, the URL read from PUSHWORKER_AMQP_URL_FILE, the password masked"

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

step "an invalid job is dead-lettered with its reason (the dashboard's dead-letter panel)"
AMQP_URL="$amqp_url" /usr/bin/python3 - <<'PY'
import os, time, pika
connection = pika.BlockingConnection(pika.URLParameters(os.environ["AMQP_URL"]))
channel = connection.channel()
channel.confirm_delivery()
channel.basic_publish("push", "jobs", b"{not json", pika.BasicProperties(delivery_mode=2, message_id="check-invalid"), mandatory=True)
for _ in range(60):
    method, properties, body = channel.basic_get("push.dead", auto_ack=True)
    if method and properties.message_id == "check-invalid":
        code = (properties.headers or {}).get("x-pushworker-error")
        assert code == "invalid_json", properties.headers
        print(f"   push.dead holds it, x-pushworker-error: {code}")
        break
    time.sleep(1)
else:
    raise SystemExit("the invalid job did not reach push.dead")
connection.close()
PY

step "RabbitMQ restarted: every worker reconnects and is healthy again"
docker restart "$rabbitmq" >/dev/null
for _ in $(seq 120); do
  [ "$(docker inspect -f '{{.State.Health.Status}}' "$rabbitmq" 2>/dev/null)" = healthy ] && break
  sleep 2
done
workers_healthy || fail "the workers did not come back after RabbitMQ's restart"
echo "   $(docker ps --filter "label=com.docker.compose.project=$project" --filter health=healthy --format '{{.Names}}' | grep -c worker) workers healthy again"

step "after the restart: 12 one-device jobs to the unregistered device (the APNs reasons panel)"
# The demo job's Unregistered may have been counted by the worker killed since; these land on the
# workers now up, and a worker's second and later ones show on a rate() panel (its first count is
# the series' start).
AMQP_URL="$amqp_url" /usr/bin/python3 - <<'PY'
import json, os, uuid
import pika
connection = pika.BlockingConnection(pika.URLParameters(os.environ["AMQP_URL"]))
channel = connection.channel()
reply = f"check.reasons.{uuid.uuid4().hex[:8]}"
channel.queue_declare(reply, durable=True, arguments={"x-expires": 600000})
channel.confirm_delivery()
for index in range(12):
    job = {"id": f"unregistered-{index}", "app": "demo", "audience": {"tokens": ["dead" * 16]}, "payload": {"aps": {"alert": "x"}}, "reply_to": reply}
    channel.basic_publish("push", "jobs", json.dumps(job).encode(), pika.BasicProperties(delivery_mode=2), mandatory=True)
rejected = 0
for method, properties, body in channel.consume(reply, inactivity_timeout=60):
    if method is None:
        raise SystemExit(f"no result for 60 s; {rejected} of 12 rejected so far")
    channel.basic_ack(method.delivery_tag)
    if properties.type == "result":
        result = json.loads(body)
        assert result["outcome"] == "rejected" and result["reason"] == "Unregistered", result
        rejected += 1
    if rejected == 12:
        break
channel.cancel()
connection.close()
print("   12 rejected: Unregistered")
PY
sleep 6  # a scrape or two after the reconnections and the rejections

step "every panel of deploy/grafana/pushworker-dashboard.json has data in Prometheus (its queries over this run)"
python3 - "$root/deploy/grafana/pushworker-dashboard.json" "http://127.0.0.1:$prometheus_port" "$prometheus_started" <<'PY'
import json, math, sys, time, urllib.parse, urllib.request
dashboard, prometheus, started = json.load(open(sys.argv[1])), sys.argv[2], float(sys.argv[3])
def panels(items):
    for item in items:
        yield item
        yield from panels(item.get("panels", []))
# Grafana's variables, as the dashboard opens: every app, the rate window of a 2 s scrape.
substitutions = {"$__rate_interval": "1m", "$__range": "15m", "$__interval": "5s", "$app": ".*", "$lane": ".*"}
empty, lines = [], []
for panel in panels(dashboard["panels"]):
    for target in panel.get("targets", []):
        expr = target["expr"]
        for variable, value in substitutions.items():
            expr = expr.replace(variable, value)
        query = urllib.parse.urlencode({"query": expr, "start": started, "end": time.time(), "step": 5})
        answer = json.load(urllib.request.urlopen(f"{prometheus}/api/v1/query_range?{query}"))
        assert answer["status"] == "success", (panel["title"], expr, answer)
        values = [float(v) for series in answer["data"]["result"] for _, v in series["values"] if not math.isnan(float(v))]
        name = f'{panel["title"]} [{target.get("refId", "A")}]'
        if not values:
            empty.append(f"{name}: {expr}")
        else:
            lines.append(f"   {name}: {len(answer['data']['result'])} series, highest {max(values):.4g}")
print("\n".join(lines))
if empty:
    sys.exit("no data for:\n  " + "\n  ".join(empty))
print(f"   {len(lines)} queries, every one with data")
PY

mib() { python3 -c "print(f'{$1 / 1048576:.1f}')"; }
step "images: pushworker:local $(mib "$(docker image inspect -f '{{.Size}}' pushworker:local)") MiB ($(grep -vc '/$' "$work/image-files.txt") files, no base); pushworker-mock-apns:local $(mib "$(docker image inspect -f '{{.Size}}' pushworker-mock-apns:local)") MiB and pushworker-pki:local $(mib "$(docker image inspect -f '{{.Size}}' pushworker-pki:local)") MiB, on debian:bookworm-slim $(mib "$(docker image inspect -f '{{.Size}}' debian:bookworm-slim)") MiB$(stand_in debian:bookworm-slim && echo ' (the stand-in)')"
step "all checks passed"
