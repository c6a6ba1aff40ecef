#!/usr/bin/env bash
# The main job on one machine: installs what is missing, builds in release, runs the demo.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
swift build -c release
.build/release/share-bench-types
