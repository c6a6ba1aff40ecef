#!/usr/bin/env bash
# LocalSend on loopback, in a network namespace of this script's own (nothing reaches a real network): a file of MiB
# (default 1 GiB) uploaded by localsendd (PyPI; LocalSend protocol 2.2, nobody here wrote it) as the phone to share's
# agent and to a second localsendd, and sent by `share send --to` to that second localsendd, in the same run. Each
# clock starts when the send is asked for and stops when the sender has its receiver's answer to the last upload,
# which a receiver gives only once the file is on its disk and matches the SHA-256 announced (both receivers check
# it); every received file's SHA-256 is checked again afterwards. Every tool alike: same file, read into an emptied
# page cache before each case, rounds interleaved (share sends with --direct, from its own process, as localsendd
# does). Also the CPU seconds each receiving process spent per GiB: share's side must not be the bottleneck.
# Usage: scripts/bench-localsend.sh [MiB] [rounds]      (default 1024 3; needs root and ip netns)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
MIB=${1:-1024}
ROUNDS=${2:-3}
[ "$(id -u)" -eq 0 ] || { echo "bench-localsend: needs root (a network namespace of its own)" >&2; exit 1; }
release_build share >/dev/null
BIN=$(bin_dir)/share
TOOLS=${SHARE_TOOLS:-/opt/share-tools}/localsend
WORK=$(mktemp -d /var/tmp/share-bench-localsend.XXXXXX)
NS=share-bench-ls-$$
PIDS=()
source scripts/lib-bench.sh
trap '{ kill -9 "${PIDS[@]}"; wait; } 2>/dev/null || true; ip netns del "$NS" 2>/dev/null || true; page_reporting_restore; rm -rf "$WORK"' EXIT
page_reporting_hold
ip netns add "$NS"
ip netns exec "$NS" ip link set lo up
ip netns exec "$NS" ip link set lo multicast on
ip netns exec "$NS" ip route add 224.0.0.0/4 dev lo
IN=(ip netns exec "$NS")

# A localsendd in the namespace (uploads accepted without asking); sets LS_PID and LS_FP.
start_localsendd() { # name port
  local dir=$WORK/$1
  mkdir -p "$dir/downloads"
  HOME=$dir XDG_STATE_HOME=$dir/state XDG_CONFIG_HOME=$dir/config PYTHONUNBUFFERED=1 "${IN[@]}" \
    "$TOOLS/bin/localsendd" --alias "$1" --port "$2" --download-dir "$dir/downloads" --socket "$dir/control.sock" \
    --unattended --no-log-time > "$dir/log" 2>&1 &
  LS_PID=$!
  PIDS+=($LS_PID)
  await_line "$dir/log" "fingerprint="
  LS_FP=$(grep -o 'fingerprint=[0-9A-F]*' "$dir/log" | head -1 | cut -d= -f2)
  [ -n "$LS_FP" ] || { echo "bench-localsend: localsendd did not start: $(cat "$dir/log")" >&2; exit 1; }
}
start_localsendd phone 53317
start_localsendd pc 53319
PC_PID=$LS_PID
D=$WORK/desk
$BIN id --config "$D" --name desk > /dev/null
$BIN trust add --config "$D" --localsend "$(grep -o 'fingerprint=[0-9A-F]*' "$WORK/phone/log" | head -1 | cut -d= -f2)" \
  --name phone --no-ask > /dev/null 2>&1
"${IN[@]}" "$BIN" agent --config "$D" --port 0 --listen 127.0.0.1 --no-discovery --localsend --localsend-port 53318 \
  --localsend-multicast-port 0 --localsend-peer 127.0.0.1:53319 > "$WORK/agent.log" 2>&1 &
AGENT=$!
PIDS+=($AGENT)
await_line "$WORK/agent.log" "LocalSend on port"
grep -q "LocalSend on port" "$WORK/agent.log" || { echo "bench-localsend: the agent did not start: $(cat "$WORK/agent.log")" >&2; exit 1; }
# The desk registers with the pc (HTTP discovery): `share send --to pc` finds it.
await_line "$D/state/localsend/peers.json" '"alias":"pc"'

FILE=$WORK/payload.bin
head -c $((MIB << 20)) /dev/urandom > "$FILE"
EXPECTED=$(sha256sum "$FILE" | awk '{print $1}')
echo "file: $MIB MiB, $ROUNDS rounds; localsendd $("$TOOLS/bin/pip" show localsendd 2>/dev/null | sed -n 's/^Version: //p')"

now() { date +%s.%N; }
cpu() { awk '{print ($14 + $15) / 100}' "/proc/$1/stat" 2>/dev/null || echo 0; }  # user+system seconds (100 Hz)
# The phone sends FILE to 127.0.0.1:PORT through its control socket and waits for the outcome (its state events).
phone_send() { # port
  "$TOOLS/bin/python" - "$WORK/phone/control.sock" "$1" "$FILE" << 'PY'
import sys
from localsendd.client import Client
sock, port, path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
with Client(sock, timeout=900) as c:
    try:
        c.call("dismiss_result")
    except Exception:
        pass
    c.call("send", to="127.0.0.1", port=port, protocol="https", files=[path])
    # Its state asked after each event (an event may be older than the send): done when nothing is active and a
    # result is there (the earlier one was dismissed).
    events = c.events()
    while True:
        state = c.call("get_state")
        if state.get("active") is None and state.get("result"):
            kind = state["result"]["kind"]
            print(kind)
            sys.exit(0 if kind == "sent" else 1)
        next(events)
PY
}
check() { # file
  [ "$(sha256sum "$1" | awk '{print $1}')" = "$EXPECTED" ] || { echo "bench-localsend: $1 differs" >&2; exit 1; }
}

run_case() { # name
  sync; echo 1 > /proc/sys/vm/drop_caches 2>/dev/null || true; cat "$FILE" > /dev/null
  local start before received receiver
  case $1 in
    phone-share)
      receiver=$AGENT
      before=$(cpu "$receiver"); start=$(now)
      phone_send 53318 > /dev/null || { echo "bench-localsend: the phone's upload to share failed: $(tail -3 "$WORK/agent.log")" >&2; exit 1; }
      SECS=$(echo "$(now) - $start" | bc -l)
      received=$(ls -d "$D"/data/inbox/phone*/payload.bin)
      ;;
    phone-pc)
      receiver=$PC_PID
      before=$(cpu "$receiver"); start=$(now)
      phone_send 53319 > /dev/null || { echo "bench-localsend: the phone's upload to localsendd failed" >&2; exit 1; }
      SECS=$(echo "$(now) - $start" | bc -l)
      received=$WORK/pc/downloads/payload.bin
      ;;
    share-pc)
      receiver=$PC_PID
      before=$(cpu "$receiver"); start=$(now)
      "${IN[@]}" "$BIN" send --config "$D" --direct --quiet "$FILE" --to pc 2> "$WORK/send.log" \
        || { echo "bench-localsend: share send to localsendd failed: $(cat "$WORK/send.log")" >&2; exit 1; }
      SECS=$(echo "$(now) - $start" | bc -l)
      received=$WORK/pc/downloads/payload.bin
      ;;
  esac
  CPU=$(echo "($(cpu "$receiver") - $before) * 1024 / $MIB" | bc -l)
  check "$received"
  rm -f "$received"
}

CASES=(phone-share phone-pc share-pc)
declare -A TIMES CPUS
for round in $(seq "$ROUNDS"); do
  for i in $(seq 0 $((${#CASES[@]} - 1))); do
    name=${CASES[$(((i + round - 1) % ${#CASES[@]}))]}
    run_case "$name"
    TIMES[$name]+="$SECS "
    CPUS[$name]+="$CPU "
  done
  echo "round $round done"
done

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
label() {
  case $1 in
    phone-share) echo "localsendd -> share agent" ;;
    phone-pc) echo "localsendd -> localsendd" ;;
    share-pc) echo "share send -> localsendd" ;;
  esac
}
echo
printf "%-28s %9s %9s %22s\n" "sender -> receiver" seconds "MiB/s" "receiver CPU s per GiB"
declare -A RATE
for name in "${CASES[@]}"; do
  secs=$(echo "${TIMES[$name]}" | median)
  RATE[$name]=$(echo "$MIB / $secs" | bc -l)
  printf "%-28s %9.2f %9.0f %22.2f\n" "$(label "$name")" "$secs" "${RATE[$name]}" "$(echo "${CPUS[$name]}" | median)"
done
printf "into share / into localsendd, from the same phone: %.2f\n" \
  "$(echo "${RATE[phone-share]} / ${RATE[phone-pc]}" | bc -l)"
