#!/usr/bin/env bash
# The test command: installs what is missing, checks formatting and the reliability table, builds once, runs the
# whole test suite, then a short fuzz pass over every decoder a peer can reach and a short AddressSanitizer pass
# (the unit suites and a few end-to-end suites, every share process instrumented). The long runs live in their own
# scripts: scripts/fuzz.sh 300, scripts/sanitizers.sh address thread, scripts/faults.sh.
# SHARE_QUICK=1 stops after the plain test run.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
started=$SECONDS
swift format lint --strict -r Sources Tests Benchmarks Fuzz Package.swift
python3 scripts/check_reliability.py
swift build --build-tests
swift test --skip-build
echo "== suite done after $((SECONDS - started)) s"
[ -n "${SHARE_QUICK:-}" ] && exit 0
bash scripts/fuzz.sh "${SHARE_FUZZ_SECONDS:-6}"
bash scripts/sanitizers.sh --short address
echo "== test command done after $((SECONDS - started)) s"
