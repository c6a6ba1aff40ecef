#!/usr/bin/env bash
# The memory budgets of docs/MEMORY.md, checked on every CI run (scripts/ci-checks.sh; memory, unlike time, is stable on a
# shared machine):
#   share watch    under 16 MiB peak RSS receiving 300 items and sending 10 through its agent (scripts/bench-watch.sh
#                  300 10), built as Deploy/install.sh builds it (release, static Swift runtime);
#   share send     under 64 MiB peak RSS each, moving a 1 GiB file over loopback (the test command's build);
#   share receive
#   share agent    under 128 MiB peak RSS through scripts/bench-agent.sh's smoke load.
# Prints one line per budget and exits 1 if any is exceeded.
# Usage: scripts/budgets.sh [--build-only | --skip-build]   (CI builds the watch beside the smoke pass)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
source scripts/lib-bench.sh
case "${1:-}" in
  --skip-build) ;;
  *)
    swift build -c release --static-swift-stdlib --product share-watch 2>&1 | tail -1
    [ "${1:-}" = --build-only ] && exit 0
    ;;
esac
WATCH_BIN=$PWD/.build/release/share-watch
[ -x "$WATCH_BIN" ] || { echo "budgets: no release share-watch; run scripts/budgets.sh without --skip-build" >&2; exit 1; }
# Foundation proper, CoreFoundation and ICU add about 49 MB to the file and 2 MiB resident (docs/MEMORY.md).
watch_mb=$(( $(stat -c %s "$WATCH_BIN") / 1000000 ))
[ "$watch_mb" -lt 40 ] || echo "budgets: share-watch is $watch_mb MB: a module it links calls into Foundation proper (often String.contains(String) where Foundation is imported; see docs/MEMORY.md)" >&2
[ -x /usr/bin/time ] || { apt-get update -qq && apt-get install -y -qq time > /dev/null; }
export SHARE_SMOKE=1   # the agents, senders and receivers are the test command's build
BIN=$(bin_dir)/share
WORK=$(mktemp -d /var/tmp/share-budgets.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$WORK" || true' EXIT
failed=0
budget() { # name measured-KiB limit-MiB detail
  if [ "$2" -lt $(($3 * 1024)) ]; then
    printf 'budget %-14s %6d KiB peak (%s MiB), under %d MiB%s\n' "$1" "$2" "$(echo "scale=1; $2 / 1024" | bc)" "$3" "$4"
  else
    printf 'budget %-14s %6d KiB peak (%s MiB), OVER %d MiB%s\n' "$1" "$2" "$(echo "scale=1; $2 / 1024" | bc)" "$3" "$4"
    failed=1
  fi
}

# The watch.
WATCH_BIN=$WATCH_BIN bash scripts/bench-watch.sh 300 10 > "$WORK/watch.log" 2>&1 || { cat "$WORK/watch.log"; exit 1; }
grep -q "received 300 of 300" "$WORK/watch.log" || { cat "$WORK/watch.log"; echo "budgets: the watch lost items" >&2; exit 1; }
watch_peak=$(sed -n 's/^watch peak RSS: \([0-9]*\) KiB.*/\1/p' "$WORK/watch.log")
send_peak=$(sed -n 's/.*peak RSS per send [0-9]*–\([0-9]*\) KiB.*/\1/p' "$WORK/watch.log")
[ -n "$watch_peak" ] && [ -n "$send_peak" ] || { cat "$WORK/watch.log"; echo "budgets: no watch figures" >&2; exit 1; }
budget "watch" "$watch_peak" 16 " (300 items in, 10 sends out)"
budget "watch send" "$send_peak" 16 " (the largest of 10)"

# share send and share receive at 1 GiB.
$BIN id --config "$WORK/s" --name sender > /dev/null; $BIN id --config "$WORK/r" --name receiver > /dev/null
$BIN trust add --config "$WORK/s" "$($BIN id --config "$WORK/r" | tail -1)" --name receiver --team > /dev/null 2>&1
$BIN trust add --config "$WORK/r" "$($BIN id --config "$WORK/s" | tail -1)" --name sender --team > /dev/null 2>&1
head -c $((1 << 30)) /dev/urandom > "$WORK/big.bin"
: > "$WORK/receive.out"  # a fresh log: the last run's port line must not be read as this one's
/usr/bin/time -f %M -o "$WORK/receive.rss" $BIN receive --config "$WORK/r" --port 0 --listen 127.0.0.1 \
  --into "$WORK/dst" > "$WORK/receive.out" 2>&1 &
receiver=$!
port=$(receiver_port "$WORK/receive.out" $receiver)
[ -n "$port" ] || { cat "$WORK/receive.out"; echo "budgets: share receive did not start" >&2; exit 1; }
/usr/bin/time -f %M -o "$WORK/send.rss" $BIN send --config "$WORK/s" --to "127.0.0.1:$port" "$WORK/big.bin" --quiet
wait "$receiver"
cmp -s "$WORK/big.bin" "$WORK/dst/big.bin" || { echo "budgets: the 1 GiB file arrived different" >&2; exit 1; }
rm -f "$WORK/big.bin" "$WORK/dst/big.bin"
budget "share send" "$(tail -1 "$WORK/send.rss")" 64 " (1 GiB)"
budget "share receive" "$(tail -1 "$WORK/receive.rss")" 64 " (1 GiB)"

# The agent under load.
bash scripts/bench-agent.sh 3 1 200 > "$WORK/agent.log" 2>&1 || { cat "$WORK/agent.log"; exit 1; }
agent_peak=$(sed -n 's/^agent RSS (KiB):.* peak \([0-9]*\)$/\1/p' "$WORK/agent.log")
[ -n "$agent_peak" ] || { cat "$WORK/agent.log"; echo "budgets: no agent figure" >&2; exit 1; }
budget "agent" "$agent_peak" 128 " (3 devices at once, 200 texts, a second wave)"
exit $failed
