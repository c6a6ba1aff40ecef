#!/usr/bin/env bash
# Idle-connection floods against every port an agent listens on (its own, LocalSend's, the page's): CONNECTIONS idle
# TCP connections to each at once, opened again as they are cut, from 20 loopback addresses (the page's from another
# local user, `nobody`, as a user of the same machine would). While they hold, a trusted device pings and sends, a new
# LocalSend device asks for /info, the owner's page answers /api/state, and `share status` answers; each is timed,
# and the agent's peak RSS is sampled. Prints one line per check with its time, and the targets beside them
# (trusted device through, /info and the page within 2 s, status under 1 s, agent RSS under 256 MiB).
# Usage: scripts/bench-flood.sh [connections per port] [seconds]     (default 500 30)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
source scripts/lib-bench.sh
CONNECTIONS=${1:-500}
SECONDS_FLOOD=${2:-30}
release_build share >/dev/null
BIN=$(bin_dir)/share
WORK=$(mktemp -d /var/tmp/share-bench-flood.XXXXXX)
chmod 755 "$WORK"
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$WORK" || true' EXIT
FLOOD=$PWD/Tests/ShareKitTests/Fixtures/idle_flood.py
cp "$FLOOD" "$WORK/idle_flood.py" && chmod 644 "$WORK/idle_flood.py"

DESK=$WORK/desk
LAPTOP=$WORK/laptop
$BIN id --config "$DESK" --name desk >/dev/null
$BIN id --config "$LAPTOP" --name laptop >/dev/null
$BIN trust add --config "$DESK" "$($BIN id --config "$LAPTOP" | tail -1)" --name laptop --team >/dev/null
$BIN agent --config "$DESK" --port 0 --listen 127.0.0.1 --no-discovery --inbox "$WORK/inbox" --web \
  --localsend --localsend-port 0 --localsend-multicast-port 0 > "$WORK/agent.out" 2> "$WORK/agent.err" &
AGENT=$!
await_line "$WORK/agent.out" "page at" $AGENT && await_line "$WORK/agent.err" "LocalSend on port" $AGENT
PORT=$(grep -o 'listening on port [0-9]*' "$WORK/agent.err" | awk '{print $4}')
LSPORT=$(grep -o 'LocalSend on port [0-9]*' "$WORK/agent.err" | awk '{print $4}')
ADDRESS=$(grep -o 'http://[^ ]*' "$WORK/agent.out")
[ -n "$PORT" ] && [ -n "$LSPORT" ] && [ -n "$ADDRESS" ] || { echo "bench-flood: the agent did not start: $(cat "$WORK/agent.err")" >&2; exit 1; }
PAGEPORT=$(echo "$ADDRESS" | cut -d: -f3 | cut -d/ -f1)
SESSION=$(curl -s -X POST -H "X-Share-Secret: ${ADDRESS##*=}" -H "Host: 127.0.0.1:$PAGEPORT" \
  "http://127.0.0.1:$PAGEPORT/api/session" | python3 -c 'import json,sys; print(json.load(sys.stdin)["session"])')
$BIN trust add --config "$LAPTOP" "$($BIN id --config "$DESK" | tail -1)" --name desk --team --address "127.0.0.1:$PORT" >/dev/null
head -c $((4 << 20)) /dev/urandom > "$WORK/payload.bin"

PEAK=0
( while kill -0 $AGENT 2>/dev/null; do awk '/VmHWM/ {print $2}' /proc/$AGENT/status > "$WORK/hwm" 2>/dev/null || true; sleep 0.2; done ) &

PER=$(( (CONNECTIONS + 19) / 20 ))
flood() { # port as-user
  if [ "$2" = nobody ]; then
    setpriv --reuid=65534 --regid=65534 --clear-groups /usr/bin/python3 "$WORK/idle_flood.py" "$1" 127.0.0.1 "$CONNECTIONS" "$SECONDS_FLOOD" > "$WORK/flood-$1.out" 2>&1 &
  else
    /usr/bin/python3 "$WORK/idle_flood.py" "$1" "20@127.0.9.1" "$PER" "$SECONDS_FLOOD" > "$WORK/flood-$1.out" 2>&1 &
  fi
}
flood "$PORT" self
flood "$LSPORT" self
flood "$PAGEPORT" nobody
for p in "$PORT" "$LSPORT" "$PAGEPORT"; do
  await_line "$WORK/flood-$p.out" flooding
done
sleep 1

# Runs a command and prints one line: what it checks, the seconds it took, ok or failed.
check() { # label command…
  local label=$1 start status=0
  shift
  start=$(date +%s.%N)
  "$@" > "$WORK/check.out" 2>&1 || status=$?
  printf '%-44s %8.2f  %s\n' "$label" "$(echo "$(date +%s.%N) - $start" | bc)" "$([ $status = 0 ] && echo ok || echo failed)"
}
printf '%-44s %8s  %s\n' "during the floods ($CONNECTIONS idle connections a port)" seconds result
check "trusted device: share ping" $BIN ping --config "$LAPTOP" desk
check "trusted device: send 4 MiB" $BIN send --config "$LAPTOP" --direct --to desk "$WORK/payload.bin"
check "new LocalSend device: /info" curl -sk --fail --max-time 10 --interface 127.0.8.1 "https://127.0.0.1:$LSPORT/api/localsend/v2/info"
check "the owner's page: /api/state" curl -s --fail --max-time 10 -H "Authorization: Bearer $SESSION" -H "Host: 127.0.0.1:$PAGEPORT" "http://127.0.0.1:$PAGEPORT/api/state"
check "share status" $BIN status --config "$DESK"
cmp -s "$WORK/payload.bin" "$WORK/inbox/laptop/payload.bin" && echo "the 4 MiB arrived identical" || echo "the 4 MiB did not arrive"
wait_floods() { for p in "$PORT" "$LSPORT" "$PAGEPORT"; do kill "$(pgrep -f "idle_flood.py $p" | head -1)" 2>/dev/null || true; done; }
echo "agent peak RSS: $(cat "$WORK/hwm") KiB (target under 262144)"
for p in "$PORT" "$LSPORT" "$PAGEPORT"; do
  echo "flood on port $p: $(grep -c . "$WORK/flood-$p.out") lines; $(head -1 "$WORK/flood-$p.out")"
done
wait_floods
kill $AGENT; wait $AGENT 2>/dev/null || true
