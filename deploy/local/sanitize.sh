#!/usr/bin/env bash
# The APNs client suites and the worker suites under a sanitizer:
#   deploy/local/sanitize.sh address|thread [swift test arguments]
# Builds into .build-sanitize-KIND (the first build compiles every package again: ~15 minutes on
# 2 cores), starts the test broker and PostgreSQL like the test command, and exits non-zero when a
# test fails or the sanitizer reports anything. The `pushworker` program the worker suites start
# is built with the same sanitizer, so its reports land in the same log.
# Not part of deploy/local/test.sh: it would double the test command's time.
#
# Reading the reports (docs/testing.md has the last runs' findings):
# - address: leaks are reported with full stacks; Foundation's and XCTest's own are suppressed in
#   deploy/local/lsan-suppressions.txt, each with why.
# - thread: ThreadSanitizer cannot see the hand-over of Synchronization.Mutex when it is contended
#   (the waiter is woken through a futex in the Swift runtime, which is not instrumented), so state
#   kept under a Mutex, or an object handed from one thread to another through one, is reported as
#   a "Swift access race" although every access holds the lock: a four-thread counter under a Mutex
#   gets such reports and still counts exactly. Check that both accesses of a report are inside
#   withLock of the same Mutex before calling it one. TSan also slows the code 5-15 times, past the
#   short request timeouts (0.5-10 s) some client tests set, so those fail on time, not on a race.
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
  echo "== the $kind sanitizer reported in $found process(es) (full reports in $reports); by place:"
  grep -h "^SUMMARY: " "$reports"/* | sed 's/ in \$s[^ ]*$//' | sort | uniq -c | sort -rn
  status=1
else
  echo "== the $kind sanitizer reported nothing"
fi
exit $status
