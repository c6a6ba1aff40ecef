#!/usr/bin/env bash
# The test command: installs what is missing, builds, runs the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
swift format lint --strict -r Sources Tests Benchmarks Package.swift
swift build --build-tests
swift test
