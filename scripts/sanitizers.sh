#!/usr/bin/env bash
# The whole test suite under AddressSanitizer (with LeakSanitizer) and ThreadSanitizer, each in its own build
# folder. Usage: scripts/sanitizers.sh [--short] [--build-only | --skip-build] [address|thread]…      (default: both)
# --short runs the unit suites and a few end-to-end suites only (CI's pass, scripts/ci-checks.sh: --short address).
# Every process the tests start (the share binary, agents) is instrumented too and inherits the options below; a
# report from any of them fails the run. Known reports from the toolchain's own libraries (Foundation, XCTest) are
# suppressed by name in scripts/sanitizer-suppressions/, never ours.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
SUPP=$PWD/scripts/sanitizer-suppressions
export SWIFT_BACKTRACE=enable=no SHARE_SANITIZER=1
# Leaks are checked in every share process the tests start (where a retain cycle in the product shows), not in
# the test runner itself.
export ASAN_OPTIONS=detect_leaks=0:halt_on_error=1
export SHARE_CHILD_ASAN_OPTIONS=detect_leaks=1:halt_on_error=1
export LSAN_OPTIONS=suppressions=$SUPP/lsan.txt:print_suppressions=0
# The short pass: every unit suite, and end-to-end suites that move files, folders and hostile input
# through real processes.
SHORT_SUITES='UniformTypeIdentifiersTests|CoreTransferableTests|SeedSampleTests|ShareTLSTests|ShareDiskTests|ShareArchiveTests|ShareProtocolTests|TransferEndToEndTests|FolderEndToEndTests|HostilePeerTests'
export TSAN_OPTIONS=suppressions=$SUPP/tsan.txt:halt_on_error=1:second_deadlock_stack=1
filter=()
phase=all
while [ $# -gt 0 ]; do
  case "$1" in
    --short) filter=(--only "$SHORT_SUITES") ;;
    --build-only) phase=build ;;
    --skip-build) phase=run ;;
    *) break ;;
  esac
  shift
done
kinds=("$@")
[ ${#kinds[@]} -gt 0 ] || kinds=(address thread)
for kind in "${kinds[@]}"; do
  log=${TMPDIR:-/tmp}/share-sanitize-$kind.log
  if [ "$phase" != run ]; then
    swift build --build-tests --sanitize="$kind" --scratch-path ".build-$kind" > "$log" 2>&1 ||
      { tail -30 "$log"; exit 1; }
  fi
  [ "$phase" = build ] && continue
  echo "== tests under the $kind sanitizer"
  # The same runner as the plain suite: end-to-end suites in processes of their own, a few at a time (instrumented
  # processes are slower, so fewer at once).
  if python3 scripts/run-suite.py --binary ".build-$kind/debug/sharePackageTests.xctest" --jobs 4 \
      --logs ".build-$kind/test-logs" ${filter[@]+"${filter[@]}"} > "$log" 2>&1; then
    tail -1 "$log"
  else
    cat "$log"
    grep -hE "ERROR: (Address|Leak|Thread)Sanitizer|WARNING: ThreadSanitizer|SUMMARY" ".build-$kind"/test-logs/*.log |
      head -20
    echo "sanitizer run '$kind' failed; the logs are in .build-$kind/test-logs/" >&2
    exit 1
  fi
done
