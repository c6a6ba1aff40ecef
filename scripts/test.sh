#!/usr/bin/env bash
# The test command: installs what is missing, checks formatting and the reliability table, builds once, runs the
# whole test suite (scripts/run-suite.py: the end-to-end suites in several test processes at once, since they mostly
# wait on the processes they start), then a short fuzz pass over every decoder a peer can reach beside a short
# AddressSanitizer pass (the unit suites and a few end-to-end suites, every share process instrumented), and beside
# them the memory budgets (scripts/budgets.sh: the watch as installed, send and receive at 1 GiB, the agent under
# load), and every other script in its smoke mode (scripts/smoke.sh, started as soon as the suite is done: it needs
# only the debug build). The fuzzer, the sanitizer and the release watch build at the lowest CPU priority while the
# suite runs. The long runs live in their own scripts:
# scripts/fuzz.sh 300, scripts/sanitizers.sh address thread, scripts/faults.sh, the benchmarks.
# SHARE_QUICK=1 stops after the plain test run; SHARE_TEST_JOBS sets how many test processes run at once (6).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
started=$SECONDS
swift format lint --strict -r Sources Tests Benchmarks Fuzz Examples/ProfileApp Package.swift
python3 scripts/check_reliability.py
rm -f .build/debug.yaml
swift build --build-tests
# The example package, built only on the library products, into the same build folder (nothing is built twice);
# LibraryEndToEndTests runs it. Two root packages sharing one build folder share its cached build plan
# (.build/debug.yaml), and each would take the other's for up to date: the plan is dropped before and after, so each
# build plans its own package (about a second).
rm -f .build/debug.yaml
swift build --package-path Examples/ProfileApp --scratch-path .build
rm -f .build/debug.yaml
# The man page generator (swift-argument-parser's), for the package's smoke run.
swift build --product generate-manual | tail -1
rm -f .build/debug.yaml
echo "== built after $((SECONDS - started)) s"
builds=
side=${TMPDIR:-/tmp}/share-side-builds.log
if [ -z "${SHARE_QUICK:-}" ]; then
  (nice -n 19 bash scripts/fuzz.sh --build-only && nice -n 19 bash scripts/sanitizers.sh --build-only address &&
    nice -n 19 bash scripts/budgets.sh --build-only) > "$side" 2>&1 &
  builds=$!
fi
python3 scripts/run-suite.py --jobs "${SHARE_TEST_JOBS:-6}"
echo "== suite done after $((SECONDS - started)) s"
[ -n "${SHARE_QUICK:-}" ] && exit 0
# The smoke pass needs only the debug build: it starts now, beside the side builds' last minute.
scripts_log=${TMPDIR:-/tmp}/share-scripts-pass.log
bash scripts/smoke.sh > "$scripts_log" 2>&1 &
scripts=$!
wait "$builds" || { cat "$side"; exit 1; }
echo "== fuzzer, sanitizer and release watch builds done after $((SECONDS - started)) s"
fuzz_log=${TMPDIR:-/tmp}/share-fuzz-pass.log
bash scripts/fuzz.sh --skip-build "${SHARE_FUZZ_SECONDS:-6}" > "$fuzz_log" 2>&1 &
fuzz=$!
budgets_log=${TMPDIR:-/tmp}/share-budgets-pass.log
bash scripts/budgets.sh --skip-build > "$budgets_log" 2>&1 &
budgets=$!
asan=0
bash scripts/sanitizers.sh --short --skip-build address || asan=$?
fuzzed=0
wait "$fuzz" || fuzzed=$?
cat "$fuzz_log"
measured=0
wait "$budgets" || measured=$?
cat "$budgets_log"
smoked=0
wait "$scripts" || smoked=$?
cat "$scripts_log"
[ "$asan" -eq 0 ] && [ "$fuzzed" -eq 0 ] && [ "$measured" -eq 0 ] && [ "$smoked" -eq 0 ] || exit 1
echo "== test command done after $((SECONDS - started)) s"
