#!/usr/bin/env bash
# The test command: installs what is missing, checks formatting and the reliability table, builds once, runs the
# whole test suite, then a short fuzz pass over every decoder a peer can reach and a short AddressSanitizer pass
# (the unit suites and a few end-to-end suites, every share process instrumented). The fuzzer and the sanitizer build
# at the lowest CPU priority while the suite runs (the suite mostly waits on processes). The long runs live in their
# own scripts: scripts/fuzz.sh 300, scripts/sanitizers.sh address thread, scripts/faults.sh.
# SHARE_QUICK=1 stops after the plain test run.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
started=$SECONDS
swift format lint --strict -r Sources Tests Benchmarks Fuzz Package.swift
python3 scripts/check_reliability.py
swift build --build-tests
builds=
if [ -z "${SHARE_QUICK:-}" ]; then
  (nice -n 19 bash scripts/fuzz.sh --build-only && nice -n 19 bash scripts/sanitizers.sh --build-only address) \
    > "${TMPDIR:-/tmp}/share-side-builds.log" 2>&1 &
  builds=$!
fi
swift test --skip-build
echo "== suite done after $((SECONDS - started)) s"
[ -n "${SHARE_QUICK:-}" ] && exit 0
wait "$builds" || { cat "${TMPDIR:-/tmp}/share-side-builds.log"; exit 1; }
echo "== fuzzer and sanitizer builds done after $((SECONDS - started)) s"
bash scripts/fuzz.sh --skip-build "${SHARE_FUZZ_SECONDS:-6}"
bash scripts/sanitizers.sh --short --skip-build address
echo "== test command done after $((SECONDS - started)) s"
