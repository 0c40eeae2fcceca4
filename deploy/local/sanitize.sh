#!/usr/bin/env bash
# The APNs client suites and the worker suites under a sanitizer:
#   deploy/local/sanitize.sh address|thread [swift test arguments]
# Builds into .build-sanitize-KIND (the first build compiles every package again: ~15 minutes on
# 2 cores), starts the test broker and PostgreSQL like the test command, and exits non-zero when a
# test fails or the sanitizer reports anything. The `pushworker` program the worker suites start
# is built with the same sanitizer, so its reports land in the same log.
# Not part of deploy/local/test.sh: it would double the test command's time.
set -euo pipefail
cd "$(dirname "$0")/../.."
source deploy/local/swift-path.sh

kind="${1:-}"
case "$kind" in
  address|thread) shift ;;
  *) echo "usage: $0 address|thread [swift test arguments]" >&2; exit 2 ;;
esac
scratch=".build-sanitize-$kind"
reports="$PWD/$scratch/reports"
mkdir -p "$reports"
rm -f "$reports"/*

# Reports go to files (one per process) as well as to standard error, so a report from the
# worker process, whose output the tests capture, is not lost. halt_on_error=0: every finding of
# a run, not just the first.
case "$kind" in
  address)
    export ASAN_OPTIONS="log_path=$reports/asan:halt_on_error=0:detect_leaks=1:fast_unwind_on_malloc=0:${ASAN_OPTIONS:-}"
    export LSAN_OPTIONS="suppressions=$PWD/deploy/local/lsan-suppressions.txt:print_suppressions=0:${LSAN_OPTIONS:-}" ;;
  thread) export TSAN_OPTIONS="log_path=$reports/tsan:halt_on_error=0:second_deadlock_stack=1:${TSAN_OPTIONS:-}" ;;
esac

suites="${PUSHWORKER_SANITIZE_FILTER:-APNsClientTests|ConnectionFaultTests|KeepaliveTests|MockValidationTests|JobProcessorTests|JobPipelineTests|WorkerProcessTests|JobContractTests|RegistryWorkerTests|OperatorEndpointTests|SendCommandTests}"
echo "== building with --sanitize=$kind into $scratch"
swift build --build-tests --sanitize="$kind" --scratch-path "$scratch"

# The broker and PostgreSQL, as the test command starts them.
export PUSHWORKER_TEST_LOG="${PUSHWORKER_TEST_LOG:-$PWD/$scratch/test-logs/tests-$(date +%Y%m%d-%H%M%S).log}"
mkdir -p "$(dirname "$PUSHWORKER_TEST_LOG")"
status=0
deploy/local/test.sh --skip-build --sanitize="$kind" --scratch-path "$scratch" --filter "$suites" "$@" || status=$?

found=$(ls "$reports" 2>/dev/null | wc -l)
if [ "$found" -gt 0 ]; then
  echo "== the $kind sanitizer reported in $found process(es):"
  for report in "$reports"/*; do
    echo "--- $report"
    grep -E "^(WARNING|ERROR|SUMMARY): |^    #[0-3] " "$report" | head -40
  done
  status=1
else
  echo "== the $kind sanitizer reported nothing"
fi
exit $status
