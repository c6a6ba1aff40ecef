#!/usr/bin/env bash
# The test command: installs what is missing, checks formatting and the reliability table, builds, runs the whole
# test suite, a short fuzz pass over every decoder a peer can reach, and the suite again under AddressSanitizer.
# SHARE_QUICK=1 stops after the plain test run.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
swift format lint --strict -r Sources Tests Benchmarks Fuzz Package.swift
python3 scripts/check_reliability.py
swift build --build-tests
swift test
[ -n "${SHARE_QUICK:-}" ] && exit 0
bash scripts/fuzz.sh 20
bash scripts/sanitizers.sh address
