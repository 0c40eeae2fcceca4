#!/bin/sh
# Assembles the worker image's root file system at ROOTFS (run by the Dockerfile's rootfs stage, on
# the Debian release the binary was built on, its runtime packages installed):
#
#   rootfs.sh ROOTFS BINARY...
#
# What the binaries load (ldd: the dynamic loader, glibc, libstdc++, librabbitmq, libcurl and what
# it links, libnghttp2, OpenSSL, SQLite, YAJL) and the CA certificates APNs' TLS is checked
# against; a passwd with the worker's user; the loader's cache; and, for image scanners, the Debian
# release and the status of every package a file was taken from (as distroless images do). No
# shell, no package manager, no coreutils: the worker is the only program.
set -eu
rootfs="$1"
shift
mkdir -p "$rootfs/etc"

# A file at its own path in ROOTFS, symbolic links resolved (the loader finds libraries by the
# names ldd printed).
take() {
  mkdir -p "$rootfs$(dirname "$1")"
  cp -L "$1" "$rootfs$1"
  copied="$copied $1"
  taken="$taken $(readlink -f "$1")"
}
copied=""
taken=""
for binary in "$@"; do
  ldd "$binary" > /tmp/ldd.txt
  if grep -q "not found" /tmp/ldd.txt; then cat /tmp/ldd.txt >&2; exit 1; fi
  for library in $(awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' /tmp/ldd.txt); do
    [ -e "$rootfs$library" ] || take "$library"
  done
done

# The loader's search path and cache, for the directories the libraries came from.
for library in $copied; do dirname "$library"; done | sort -u > "$rootfs/etc/ld.so.conf"
ldconfig -r "$rootfs"

# TLS: the CA bundle where OpenSSL (default verify paths) and libcurl look for it.
take /etc/ssl/certs/ca-certificates.crt
mkdir -p "$rootfs/usr/lib/ssl"
ln -s /etc/ssl/certs/ca-certificates.crt "$rootfs/usr/lib/ssl/cert.pem"
ln -s /etc/ssl/certs "$rootfs/usr/lib/ssl/certs"

# Users: root, the worker (10001) and nobody; name lookups from files, then DNS.
cat > "$rootfs/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/sbin/nologin
pushworker:x:10001:10001:pushworker:/var/lib/pushworker:/sbin/nologin
nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin
EOF
cat > "$rootfs/etc/group" <<'EOF'
root:x:0:
pushworker:x:10001:
nogroup:x:65534:
EOF
printf 'passwd: files\ngroup: files\nhosts: files dns\n' > "$rootfs/etc/nsswitch.conf"
# /var/lib/pushworker, the worker's own (and working) directory, is added by the Dockerfile with
# its owner: a COPY makes what it copies root's.
mkdir -p "$rootfs/tmp" "$rootfs/etc/pushworker"
chmod 1777 "$rootfs/tmp"

# What scanners read: the release, each package's status (var/lib/dpkg/status.d, one file per
# package) and its copyright.
cp /etc/os-release /etc/debian_version "$rootfs/etc/"
mkdir -p "$rootfs/var/lib/dpkg/status.d"
for file in $taken /etc/ssl/certs/ca-certificates.crt; do
  dpkg -S "$file" 2>/dev/null || dpkg -S "$(echo "$file" | sed 's#^/usr/lib/#/lib/#')" 2>/dev/null || true
done | sed 's/: \/.*//; s/,.*//' | sort -u > /tmp/packages.txt
# ca-certificates' bundle is made by update-ca-certificates, so no package lists it; base-files
# holds os-release and debian_version, by which scanners know the release.
printf 'ca-certificates\nbase-files\n' >> /tmp/packages.txt
for package in $(sort -u /tmp/packages.txt); do
  name="${package%%:*}"
  dpkg-query -s "$package" > "$rootfs/var/lib/dpkg/status.d/$name"
  if [ -f "/usr/share/doc/$name/copyright" ]; then
    mkdir -p "$rootfs/usr/share/doc/$name"
    cp "/usr/share/doc/$name/copyright" "$rootfs/usr/share/doc/$name/copyright"
  fi
done
echo "rootfs: $(find "$rootfs" -type f | wc -l) files, $(du -sh "$rootfs" | cut -f1); packages: $(sort -u /tmp/packages.txt | tr '\n' ' ')"
