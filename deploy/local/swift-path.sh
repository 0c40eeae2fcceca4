# Sourced by the scripts here: Swift installed from swift.org tarballs lives in /opt/swift, which a
# non-login shell (CI, sudo, cron) may not have on PATH.
if ! command -v swift >/dev/null 2>&1 && [ -x /opt/swift/usr/bin/swift ]; then
  export PATH="$PATH:/opt/swift/usr/bin"
fi
