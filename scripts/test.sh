#!/usr/bin/env bash
# The test command: installs what is missing, checks formatting and the reliability table, builds once, runs the
# whole test suite (scripts/run-suite.py: the end-to-end suites in several test processes at once, since they mostly
# wait on the processes they start), then the demo, the package's layout and the generated files in their smoke
# mode (scripts/smoke.sh). Within ten minutes from a fresh clone on two cores. CI then runs scripts/ci-checks.sh on
# the same build (short fuzz and AddressSanitizer passes, the memory budgets, every other script in its smoke mode:
# they need builds of their own) and the package check.
# SHARE_QUICK=1 stops after the plain test run; SHARE_TEST_JOBS sets how many test processes run at once (8).
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
python3 scripts/run-suite.py --jobs "${SHARE_TEST_JOBS:-8}"
echo "== suite done after $((SECONDS - started)) s"
[ -n "${SHARE_QUICK:-}" ] && exit 0
bash scripts/smoke.sh demo package-deb gen-builder gen-system-types
echo "== test command done after $((SECONDS - started)) s"
