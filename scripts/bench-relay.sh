#!/usr/bin/env bash
# The relay path beside the direct path, in one run, in the simulated internet of ReachEndToEndTests (two homes
# behind NAT, Syncthing's stdiscosrv and strelaysrv on the "internet" between them; lib-netns.sh). The laptop finds
# the desk through discovery; with the desk's port forwarded on its router the send goes direct, without it through
# the relay. For each path: MiB/s of a file (the clock stops when the sender has the desk's acknowledgement, given
# only once the desk verified and stored the file), the time to a session (TCP, TLS and hellos: `share ping`), a
# one-line text end to end, and the desk agent's peak RSS while it received. Release build; needs root.
# Usage: scripts/bench-relay.sh [MiB] [rounds]      (default 512 MiB, 3 rounds; medians)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
MIB=${1:-512}
ROUNDS=${2:-3}
[ "$(id -u)" -eq 0 ] || { echo "bench-relay: network namespaces need root" >&2; exit 77; }
release_build share >/dev/null
BIN=$(bin_dir)/share
WORK=$(mktemp -d /var/tmp/share-bench-relay.XXXXXX)
source scripts/lib-netns.sh
source scripts/lib-bench.sh
cleanup() { kill $(jobs -p) 2>/dev/null || true; netns_remove; rm -rf "$WORK"; }
trap cleanup EXIT
netns_internet "$(head -c3 /dev/urandom | od -An -tx1 | tr -d ' \n')"
netns_servers "$WORK/servers"

L=$WORK/laptop D=$WORK/desk INBOX=$WORK/inbox
$BIN id --config "$L" --name laptop >/dev/null; $BIN id --config "$D" --name desk >/dev/null
$BIN trust add --config "$L" "$($BIN id --config "$D" | tail -1)" --name desk --team 2>/dev/null
$BIN trust add --config "$D" "$($BIN id --config "$L" | tail -1)" --name laptop --team 2>/dev/null
$BIN servers add --config "$L" "$DISCO_URL" 2>/dev/null
$BIN servers add --config "$D" "$DISCO_URL" 2>/dev/null
$BIN servers add --config "$D" "$RELAY_URL" 2>/dev/null
in_laptop() { ip netns exec "$NET_LAPTOP" "$BIN" "$@"; }

ip netns exec "$NET_DESK" "$BIN" agent --config "$D" --port 0 --listen 0.0.0.0 --no-discovery --normal-priority \
  --inbox "$INBOX" > "$WORK/agent.log" 2>&1 &
await_line "$WORK/agent.log" "relay://203.0.113.10"
grep -q "relay://203.0.113.10" "$WORK/agent.log" || { cat "$WORK/agent.log"; echo "the desk never announced its relay" >&2; exit 1; }
PORT=$(grep -o 'listening on port [0-9]*' "$WORK/agent.log" | awk '{print $4}')
AGENT=$(pgrep -f "agent --config $D" | head -1)

head -c $((MIB << 20)) /dev/urandom > "$WORK/payload.bin"
BYTES=$((MIB << 20))
echo "bench-relay: $MIB MiB, $ROUNDS rounds; desk behind NAT on port $PORT; servers on 203.0.113.10"

# Peak resident memory of the desk's agent while `$@` runs (sampled every 20 ms), in KiB, to $WORK/peak.
with_peak() {
  ( peak=0; while kill -0 "$AGENT" 2>/dev/null; do
      rss=$(awk '/VmRSS/ {print $2}' /proc/"$AGENT"/status 2>/dev/null || echo 0)
      # Written whole (a rename): the sampler is killed at any moment, never between a truncation and its write.
      [ "${rss:-0}" -gt "$peak" ] && peak=$rss && echo "$peak" > "$WORK/peak.new" && mv "$WORK/peak.new" "$WORK/peak"
      sleep 0.02
    done ) &
  local sampler=$!
  "$@"
  kill "$sampler" 2>/dev/null; wait "$sampler" 2>/dev/null || true
}

declare -A SPEED SETUP TEXT RSS
for path in direct relay; do
  if [ "$path" = direct ]; then netns_forward "$PORT"; else netns_close_forwards; fi
  expect=$([ "$path" = direct ] && echo "direct" || echo "via relay 203.0.113.10")
  speeds=() setups=() texts=()
  echo 0 > "$WORK/peak"
  for _ in $(seq "$ROUNDS"); do
    rm -f "$INBOX/laptop/payload.bin"
    sync; echo 1 > /proc/sys/vm/drop_caches 2>/dev/null || true; cat "$WORK/payload.bin" > /dev/null
    start=$(date +%s.%N)
    with_peak in_laptop send --direct --config "$L" --to desk --json "$WORK/payload.bin" > "$WORK/send.json"
    end=$(date +%s.%N)
    grep -q "\"route\":\"$expect\"" "$WORK/send.json" || { cat "$WORK/send.json"; echo "not $expect" >&2; exit 1; }
    cmp -s "$WORK/payload.bin" "$INBOX/laptop/payload.bin" || { echo "$path delivered a different file" >&2; exit 1; }
    speeds+=("$(echo "scale=1; $BYTES / 1048576 / ($end - $start)" | bc)")
    setups+=("$(in_laptop ping desk --config "$L" | grep -o 'connected in [0-9.]*' | awk '{print $3}')")
    start=$(date +%s.%N)
    in_laptop send --direct --config "$L" --to desk --text "ping $path" --quiet
    end=$(date +%s.%N)
    texts+=("$(printf '%.1f' "$(echo "($end - $start) * 1000" | bc)")")
  done
  SPEED[$path]=$(printf '%s\n' "${speeds[@]}" | median)
  SETUP[$path]=$(printf '%s\n' "${setups[@]}" | median)
  TEXT[$path]=$(printf '%s\n' "${texts[@]}" | median)
  peak=$(cat "$WORK/peak" 2>/dev/null || true)
  RSS[$path]=$(( ${peak:-0} / 1024 ))
done

printf '\n%-8s %12s %18s %18s %18s\n' path "MiB/s" "session set-up ms" "text end to end ms" "desk agent RSS MiB"
for path in direct relay; do
  printf '%-8s %12s %18s %18s %18s\n' "$path" "${SPEED[$path]}" "${SETUP[$path]}" "${TEXT[$path]}" "${RSS[$path]}"
done
echo "relay/direct throughput: $(echo "scale=2; ${SPEED[relay]} / ${SPEED[direct]}" | bc)"
