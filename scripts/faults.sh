#!/usr/bin/env bash
# The fault-injection tests at full size: a 1 GiB transfer cut, stalled and corrupted at random offsets 40 times,
# 20 SIGKILLs of the sending and receiving agents at random moments, and the wire total of one send whose receiver is
# killed and whose link is cut at random moments (as many kills and cuts), and a receiver killed as it places an item.
# CI runs the same tests at 48 MiB.
# Usage: scripts/faults.sh [MiB] [faults] [kills] [seed]      (default 1024 40 20, a random seed)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
export SHARE_FAULT_MIB=${1:-1024} SHARE_FAULT_COUNT=${2:-40} SHARE_KILL_COUNT=${3:-20}
[ -n "${4:-}" ] && export SHARE_FAULT_SEED=$4
swift build --build-tests >/dev/null
swift test --skip-build --filter FaultInjectionTests 2>&1 | tee "${TMPDIR:-/tmp}/share-faults.log" |
  grep -E "fault seed|survived|resume of|sent again after a kill|✘|passed after|failed after"
