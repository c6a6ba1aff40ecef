#!/usr/bin/env bash
# Fuzzes every decoder a peer can reach, with libFuzzer and AddressSanitizer.
# Usage: scripts/fuzz.sh [--build-only | --skip-build] [seconds per target] [target…]
#        (default 300 s; targets: frames messages declarations device-id archive servers). CI (scripts/ci-checks.sh) builds first
#        (--build-only) and then fuzzes each target for a few seconds
#        (--skip-build).
# Each target starts from the committed seeds (Fuzz/corpus/TARGET) in a working copy under .build-fuzz/, so the
# repository's corpus only changes by hand. A crash stops the run with exit 1 and leaves its input in
# .build-fuzz/crashes/TARGET/; copy it to Fuzz/regressions/TARGET/ and FuzzRegressionTests replays it from then on.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
PHASE=all
case "${1:-}" in --build-only) PHASE=build; shift ;; --skip-build) PHASE=run; shift ;; esac
SECONDS_EACH=${1:-300}
shift || true
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(frames messages declarations device-id archive servers)
CLANG_RT=$(dirname "$(command -v swift)")/../lib/clang
FUZZER_LIB=$(ls "$CLANG_RT"/*/lib/linux/libclang_rt.fuzzer_no_main-x86_64.a | head -1)
# libFuzzer's own main would clash with the entry point SwiftPM gives executables, so share-fuzz calls
# LLVMFuzzerRunDriver itself and links the library without main.
if [ "$PHASE" != run ]; then
  swift build --product share-fuzz --scratch-path .build-fuzz -Xswiftc -DSHARE_FUZZING \
    -Xswiftc -sanitize=address -Xswiftc -sanitize-coverage=edge,trace-cmp,inline-8bit-counters,pc-table \
    -Xlinker "$FUZZER_LIB" -Xlinker -lstdc++ > "${TMPDIR:-/tmp}/share-fuzz-build.log" 2>&1 ||
    { tail -30 "${TMPDIR:-/tmp}/share-fuzz-build.log"; exit 1; }
fi
[ "$PHASE" = build ] && exit 0

BIN=.build-fuzz/debug/share-fuzz
export SWIFT_BACKTRACE=enable=no ASAN_OPTIONS=detect_leaks=0:abort_on_error=1
status=0
for target in "${TARGETS[@]}"; do
  work=.build-fuzz/corpus/$target
  crashes=.build-fuzz/crashes/$target
  mkdir -p "$work" "$crashes"
  cp -n Fuzz/corpus/"$target"/* "$work"/ 2>/dev/null || true
  case $target in frames|archive) max_len=65536 ;; *) max_len=8192 ;; esac
  log=.build-fuzz/$target.log
  if SHARE_FUZZ_TARGET=$target "$BIN" "$work" -max_total_time="$SECONDS_EACH" -max_len=$max_len -timeout=10 \
      -rss_limit_mb=4096 -print_final_stats=1 -artifact_prefix="$crashes/" > "$log" 2>&1; then
    runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | awk '{print $2}')
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | awk '{print $2}')
    printf 'fuzz %-12s %8s executions in %s s, coverage %s edges, corpus %s inputs, no crash\n' \
      "$target" "${runs:-?}" "$SECONDS_EACH" "${cov:-?}" "$(ls "$work" | wc -l)"
  else
    echo "fuzz $target: CRASH — input kept in $crashes/; see $log" >&2
    grep -E "ERROR|Fatal error|SUMMARY|Test unit written" "$log" | head -8 >&2
    status=1
  fi
done
exit $status
