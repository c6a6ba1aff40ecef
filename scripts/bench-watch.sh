#!/usr/bin/env bash
# Watch benchmark (release builds, static runtime): a watch attached to its phone's agent receives 1,000 items
# (texts in sends of 100 and small images) and then sends 100 items through the agent to a laptop. Reports the
# watch's peak RSS and CPU time after each 250 items (it must stay flat), the peak RSS and CPU of each
# `share watch send`, and the agent's, for comparison.
# Usage: scripts/bench-watch.sh [items] [sends]     (default 1000 100)
# WATCH_BIN names another share-watch to measure (scripts/budgets.sh: the release build beside the test command's
# debug share for the agents).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
source scripts/lib-bench.sh
ITEMS=${1:-1000}
SENDS=${2:-100}
[ -x /usr/bin/time ] || { apt-get update -qq && apt-get install -y -qq time >/dev/null; }
release_build share share-watch >/dev/null
BIN=$(bin_dir)/share
WATCHBIN=${WATCH_BIN:-$(bin_dir)/share-watch}
WORK=$(mktemp -d /var/tmp/share-bench-watch.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$WORK" || true' EXIT

for d in phone watch laptop; do $BIN id --config "$WORK/$d" --name "$d" >/dev/null; done
id() { $BIN id --config "$WORK/$1" | tail -1; }
start_agent() {  # name → sets PORT and PID_<name>
  $BIN agent --config "$WORK/$1" --port 0 --listen 127.0.0.1 --no-discovery > "$WORK/$1-agent.out" 2>&1 &
  eval "PID_$1=$!"
  await_line "$WORK/$1-agent.out" "listening on port"
  PORT=$(grep -o 'listening on port [0-9]*' "$WORK/$1-agent.out" | awk '{print $4}')
  [ -n "$PORT" ] || { echo "bench-watch: the $1 agent did not start: $(cat "$WORK/$1-agent.out")" >&2; exit 1; }
}
start_agent phone; PHONEPORT=$PORT
start_agent laptop; LAPTOPPORT=$PORT
$BIN trust add --config "$WORK/phone" "$(id watch)" --name watch --team --watch >/dev/null
$BIN trust add --config "$WORK/phone" "$(id laptop)" --name laptop --team --address "127.0.0.1:$LAPTOPPORT" >/dev/null
$BIN trust add --config "$WORK/watch" "$(id phone)" --name phone --team --address "127.0.0.1:$PHONEPORT" >/dev/null
$BIN trust add --config "$WORK/laptop" "$(id phone)" --name phone --team >/dev/null

$WATCHBIN --config "$WORK/watch" --agent phone --json --into "$WORK/shelf" > "$WORK/watch.out" 2> "$WORK/watch.err" &
WATCH=$!
await_line "$WORK/watch.out" '"attached"'
grep -q '"attached"' "$WORK/watch.out" || { echo "the watch did not attach: $(cat "$WORK/watch.err")"; exit 1; }

kib() { awk "/$2/ {print \$2}" "/proc/$1/status"; }
cpu() { awk '{printf "%.2f", ($14 + $15) / 100}' "/proc/$1/stat"; }  # user + system seconds (100 ticks/s)
report() { printf '%6s items: watch RSS %5s KiB, peak %5s KiB, CPU %5s s | agent RSS %6s KiB, peak %6s KiB, CPU %5s s\n' \
  "$1" "$(kib $WATCH VmRSS)" "$(kib $WATCH VmHWM)" "$(cpu $WATCH)" "$(kib $PID_phone VmRSS)" "$(kib $PID_phone VmHWM)" "$(cpu $PID_phone)"; }
received() { grep -c '"event":"\(text\|saved\)"' "$WORK/watch.out" || true; }

echo "== the watch receives $ITEMS items (texts in sends of 100; every 10th send is 10 images of 8 KiB)"
report 0
for i in $(seq 10); do head -c 8192 /dev/urandom > "$WORK/photo$i.png"; done
START=$(date +%s.%N)
sent=0; round=0
while [ "$sent" -lt "$ITEMS" ]; do
  round=$((round + 1))
  if [ $((round % 10)) -eq 0 ] && [ $((ITEMS - sent)) -ge 10 ]; then
    $BIN send --config "$WORK/phone" --to watch --wait "$WORK"/photo*.png > /dev/null
    sent=$((sent + 10))
  else
    n=$(( ITEMS - sent < 100 ? ITEMS - sent : 100 ))
    args=(); for k in $(seq "$n"); do args+=(--text "item $((sent + k)) of $ITEMS"); done
    $BIN send --config "$WORK/phone" --to watch --wait "${args[@]}" > /dev/null
    sent=$((sent + n))
  fi
  [ $((sent % 250)) -eq 0 ] && report "$sent"
done
ELAPSED=$(echo "$(date +%s.%N) - $START" | bc)
GOT=$(received)
echo "   received $GOT of $ITEMS in ${ELAPSED} s; shelf holds $(ls "$WORK/shelf" | wc -l) files, $(du -sk "$WORK/shelf" | cut -f1) KiB"
[ "$GOT" -eq "$ITEMS" ] || { echo "items were lost"; exit 1; }

echo "== the watch sends $SENDS items through the agent to the laptop (each \`share watch send\` is one process)"
: > "$WORK/send.times"
START=$(date +%s.%N)
for i in $(seq "$SENDS"); do
  /usr/bin/time -f "%M %U %S" -a -o "$WORK/send.times" \
    $WATCHBIN send --config "$WORK/watch" --agent phone --to laptop --text "from the watch $i" > /dev/null
done
ELAPSED=$(echo "$(date +%s.%N) - $START" | bc)
KEPT=$($BIN inbox --config "$WORK/laptop" --json | grep -c "from the watch" || true)
awk -v n="$SENDS" -v t="$ELAPSED" -v kept="$KEPT" '{ if ($1 > max) max = $1; if (min == "" || $1 < min) min = $1; cpu += $2 + $3 }
  END { printf "   %d sends in %.2f s, %d arrived; peak RSS per send %d–%d KiB; CPU %.3f s per send\n", n, t, kept, min, max, cpu / n }' "$WORK/send.times"
report after
PEAK=$(kib $WATCH VmHWM)
echo "watch peak RSS: $PEAK KiB ($(echo "scale=1; $PEAK / 1024" | bc) MiB; budget 16 MiB)"
