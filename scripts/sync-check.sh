#!/usr/bin/env bash
# The randomized test of shared folders at length: N schedules (default 10,000) of 3 devices, of 4 devices in chains,
# and of changes made one at a time (no conflict copy allowed), each checked for convergence, no lost write, no
# resurrection, conflicts only for real concurrency and one winner everywhere. A failure prints its seed and the
# fewest steps that still fail; SHARE_SYNC_SEED sets the first seed (the test command runs 150 from seed 1);
# SHARE_SYNC_TRACE=PATH prints every device's view of PATH after each step that changes it (with N=1 and the seed).
# Usage: scripts/sync-check.sh [N] [first seed]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
N=${1:-10000}
[ -n "${SHARE_SMOKE:-}" ] || swift build --build-tests > /dev/null
started=$SECONDS
status=0
SHARE_SYNC_SCHEDULES=$N SHARE_SYNC_SEED=${2:-1} .build/debug/sharePackageTests.xctest --testing-library swift-testing \
  --filter 'SyncSimulationTests/(three|four|withNothing)' > "${TMPDIR:-/tmp}/share-sync-check.log" 2>&1 || status=$?
grep -E "schedules from|failed:|shrunk|then:" "${TMPDIR:-/tmp}/share-sync-check.log" || true
echo "sync-check: $N schedules of each kind in $((SECONDS - started)) s"
exit $status
