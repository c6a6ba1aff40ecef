#!/usr/bin/env bash
# Agent load benchmark (release build): 50 devices each send 16 MiB to one agent at once, then one device sends
# 10,000 small text items in a row. Checks every item arrived verified, samples the agent's RSS, and times a
# `share status` answered during the load.
# Usage: scripts/bench-agent.sh [clients] [MiB each] [texts]     (default 50 16 10000)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
source scripts/lib-bench.sh
CLIENTS=${1:-50}
MIB=${2:-16}
TEXTS=${3:-10000}
[ -x /usr/bin/time ] || { apt-get update -qq && apt-get install -y -qq time >/dev/null; }
release_build share >/dev/null
BIN=$(bin_dir)/share
WORK=$(mktemp -d /var/tmp/share-bench.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$WORK" || true' EXIT

HUB=$WORK/hub
$BIN id --config "$HUB" --name hub >/dev/null
HUBID=$($BIN id --config "$HUB" | tail -1)
head -c $((MIB << 20)) /dev/urandom > "$WORK/payload.bin"
for i in $(seq "$CLIENTS"); do
  C=$WORK/client$i
  $BIN id --config "$C" --name "client$i" >/dev/null
  $BIN trust add --config "$HUB" "$($BIN id --config "$C" | tail -1)" --name "client$i" --team >/dev/null
  $BIN trust add --config "$C" "$HUBID" --name hub >/dev/null
done
$BIN agent --config "$HUB" --port 0 --listen 127.0.0.1 --no-discovery --inbox "$WORK/inbox" > "$WORK/agent.out" 2>&1 &
AGENT=$!
await_line "$WORK/agent.out" "listening on port"
PORT=$(grep -o 'listening on port [0-9]*' "$WORK/agent.out" | awk '{print $4}')
[ -n "$PORT" ] || { echo "bench-agent: the agent did not start: $(cat "$WORK/agent.out")" >&2; exit 1; }
rss() { awk '/VmRSS/ {print $2}' /proc/$AGENT/status; }
# Waits (bounded) until the agent holds no connection, so a sample shows it idle.
idle() { for _ in $(seq 100); do [ -z "$(ss -tnH state established "( sport = :$PORT )")" ] && return 0; sleep 0.05; done; }
hwm() { awk '/VmHWM/ {print $2}' /proc/$AGENT/status; }
# RSS sampled every 50 ms while the load runs.
( while kill -0 $AGENT 2>/dev/null; do rss >> "$WORK/rss.samples" 2>/dev/null || true; sleep 0.05; done ) &
SAMPLER=$!
START_RSS=$(rss)

echo "== $CLIENTS devices send $MIB MiB each at once"
start=$(date +%s.%N)
pids=()
for i in $(seq "$CLIENTS"); do
  $BIN send --config "$WORK/client$i" --direct --quiet --to "127.0.0.1:$PORT" "$WORK/payload.bin" 2> "$WORK/send$i.err" &
  pids+=($!)
done
# `share status` five times while the 50 sessions run, timed by /usr/bin/time (from its fork to its exit).
for _ in 1 2 3 4 5; do
  sleep 0.3
  /usr/bin/time -o "$WORK/status.time" -a -f "%e" $BIN status --config "$HUB" > "$WORK/status.out" 2>&1 ||
    echo "share status failed: $(cat "$WORK/status.out")" >&2
done
status_times=$(tr '\n' ' ' < "$WORK/status.time")
status_max=$(sort -n "$WORK/status.time" | tail -1)
failed=0
for pid in "${pids[@]}"; do wait "$pid" || failed=$((failed + 1)); done
end=$(date +%s.%N)
bad=0
for i in $(seq "$CLIENTS"); do cmp -s "$WORK/payload.bin" "$WORK/inbox/client$i/payload.bin" || bad=$((bad + 1)); done
idle; AFTER_FILES=$(rss)
printf '%d sends failed, %d files differ or are missing; %.2f s for %d MiB (%.0f MiB/s)\n' "$failed" "$bad" \
  "$(echo "$end - $start" | bc)" $((CLIENTS * MIB)) "$(echo "$CLIENTS * $MIB / ($end - $start)" | bc -l)"
printf 'share status during the load answered in %s s (slowest %s s)\n' "$status_times" "$status_max"

echo "== $TEXTS text items in a row (sessions of 1,000: argument parsing of 10,000 options would be the bottleneck)"
start=$(date +%s.%N)
sent=0
while [ "$sent" -lt "$TEXTS" ]; do
  args=()
  for i in $(seq $((sent + 1)) $((sent + 1000 < TEXTS ? sent + 1000 : TEXTS))); do args+=(--text "note $i"); done
  $BIN send --config "$WORK/client1" --direct --quiet --to "127.0.0.1:$PORT" "${args[@]}"
  sent=$((sent + ${#args[@]} / 2))
done
end=$(date +%s.%N)
kept=$(grep -c '"text":"note ' "$WORK/inbox/history.jsonl" || true)
idle; AFTER_TEXTS=$(rss)
printf '%d of %d kept in the history in %.2f s\n' "$kept" "$TEXTS" "$(echo "$end - $start" | bc)"

echo "== $CLIENTS devices send again (a second wave: memory must not grow with it)"
for i in $(seq "$CLIENTS"); do
  $BIN send --config "$WORK/client$i" --direct --quiet --to "127.0.0.1:$PORT" "$WORK/payload.bin" 2> /dev/null &
  pids+=($!)
done
wait "${pids[@]}" 2>/dev/null || true
idle; AFTER_SECOND=$(rss)
PEAK=$(hwm)
kill $SAMPLER 2>/dev/null || true
kill $AGENT; wait $AGENT 2>/dev/null || true
printf '\nagent RSS (KiB): start %s, after %d files %s, after %d texts %s, after a second wave %s; peak %s\n' \
  "$START_RSS" "$CLIENTS" "$AFTER_FILES" "$TEXTS" "$AFTER_TEXTS" "$AFTER_SECOND" "$PEAK"
[ "$failed" -eq 0 ] && [ "$bad" -eq 0 ] && [ "$kept" -eq "$TEXTS" ] || { echo "load test lost items" >&2; exit 1; }
