#!/usr/bin/env bash
# Sends by code on loopback, through a local magic-wormhole mailbox server and transit relay (never the public ones):
# a file of MiB (default 1 GiB) directly and through the relay, for share -> share by code, wormhole -> wormhole,
# wormhole -> share and share -> wormhole, beside share's trusted direct send in the same run. For each, the clock
# starts when the receiver is started with the code (the sender already waits) and stops when the receiver has exited
# holding the whole file; every file's SHA-256 is checked afterwards. Also: the time from the code typed to the first
# byte on the receiver's disk. Every tool is treated alike: same file, read into an emptied page cache before each
# case, rounds interleaved (each round starting one case further on).
# Usage: scripts/bench-wormhole.sh [MiB] [rounds]      (default 1024 3)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
MIB=${1:-1024}
ROUNDS=${2:-3}
release_build share >/dev/null
BIN=$(bin_dir)/share
WORK=$(mktemp -d)
MAILBOX_TWISTD=${SHARE_WORMHOLE_MAILBOX_TWISTD:-/opt/share-tools/wormhole-mailbox/bin/twistd}
PIDS=()
source scripts/lib-bench.sh
trap 'kill "${PIDS[@]}" 2>/dev/null || true; page_reporting_restore; rm -rf "$WORK"' EXIT
# Freed page cache would otherwise go back to the host between cases, and whichever case writes next pays for it.
page_reporting_hold

# Starts a twistd server on a free loopback port (its pid kept for the exit trap); sets PORT.
start_server() { # log command…
  local log=$1
  shift
  PYTHONUNBUFFERED=1 "$@" > "$log" 2>&1 &
  PIDS+=($!)
  await_line "$log" "starting on"
  PORT=$(grep -o 'starting on [0-9]*' "$log" | awk '{print $3}')
}
start_server "$WORK/mailbox.log" "$MAILBOX_TWISTD" -n --pidfile= wormhole-mailbox \
  --port=tcp:0:interface=127.0.0.1 --channel-db="$WORK/channel.sqlite"
MPORT=$PORT
start_server "$WORK/relay.log" twistd3 -n --pidfile= transitrelay --port=tcp:0:interface=127.0.0.1
TPORT=$PORT
[ -n "$MPORT" ] && [ -n "$TPORT" ] || { echo "bench-wormhole: the servers did not start" >&2; cat "$WORK"/*.log >&2; exit 1; }
SERVER="ws://127.0.0.1:$MPORT/v1"
WORMHOLE=(wormhole --relay-url "$SERVER" --transit-helper "tcp:127.0.0.1:$TPORT")
SHARE_CODE=(--server "$SERVER" --relay "tcp:127.0.0.1:$TPORT" --advertise 127.0.0.1)
echo "servers: mailbox $SERVER, transit relay 127.0.0.1:$TPORT"

S=$WORK/sender; R=$WORK/receiver
$BIN id --config "$S" --name bench-sender >/dev/null
$BIN id --config "$R" --name bench-receiver >/dev/null
$BIN trust add --config "$S" "$($BIN id --config "$R" | tail -1)" --name receiver --team >/dev/null
$BIN trust add --config "$R" "$($BIN id --config "$S" | tail -1)" --name sender --team >/dev/null
FILE=$WORK/payload.bin
head -c $((MIB << 20)) /dev/urandom > "$FILE"
EXPECTED=$(sha256sum "$FILE" | awk '{print $1}')
echo "file: $MIB MiB, $ROUNDS rounds"

now() { date +%s.%N; }
# Bytes on disk under DIR (hidden partials included).
bytes_in() { du -sb "$1" 2>/dev/null | awk '{print $1}'; }

# Waits for the sender's code (in its log); prints it.
code_of() { # log pattern
  for _ in $(seq 400); do
    local code
    code=$(grep -ao "$2[0-9]*-[a-z-]*" "$1" 2>/dev/null | head -1 | sed "s/^$2//")
    [ -n "$code" ] && { echo "$code"; return; }
    sleep 0.025
  done
  echo "bench-wormhole: no code from the sender: $(cat "$1")" >&2
  exit 1
}

# Runs the receiver command in DIR, timing it and the first byte on disk; sets SECS and FIRST (ms).
timed_receive() { # dir command…
  local dir=$1 start first="" status=0
  shift
  start=$(now)
  (cd "$dir" && exec "$@" > "$WORK/receiver.log" 2>&1) &
  local pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    if [ -z "$first" ] && [ "$(bytes_in "$dir")" -gt 4096 ]; then first=$(now); fi
    [ -n "$first" ] && break
    sleep 0.002
  done
  wait "$pid" || status=$?
  SECS=$(echo "$(now) - $start" | bc -l)
  [ -n "$first" ] || first=$(now)
  FIRST=$(echo "($first - $start) * 1000" | bc -l)
  [ "$status" -eq 0 ] || { echo "bench-wormhole: the receiver failed ($*): $(tail -5 "$WORK/receiver.log")" >&2; exit 1; }
}

check() { # file
  [ "$(sha256sum "$1" | awk '{print $1}')" = "$EXPECTED" ] || { echo "bench-wormhole: $1 differs" >&2; exit 1; }
}

run_case() { # name route
  local name=$1 route=$2 dir=$WORK/in code sender=""
  rm -rf "$dir"; mkdir -p "$dir"
  local listen=() wlisten=()
  if [ "$route" = relay ]; then listen=(--no-listen); wlisten=(--no-listen); fi
  # As bench-transfer does: the page cache emptied of earlier cases' files, the payload read into it.
  sync; echo 1 > /proc/sys/vm/drop_caches 2>/dev/null || true; cat "$FILE" > /dev/null
  : > "$WORK/sender.log"  # a fresh log: the last run's code must not be read as this one's
  case $name in
    share-share)
      $BIN send --config "$S" --code "${SHARE_CODE[@]}" "${listen[@]}" "$FILE" 2> "$WORK/sender.log" &
      PIDS+=($!)
      sender=$!
      code=$(code_of "$WORK/sender.log" "code ")
      timed_receive "$dir" $BIN receive --config "$R" --yes --into "$dir" "${SHARE_CODE[@]}" "${listen[@]}" "$code"
      ;;
    wormhole-wormhole)
      "${WORMHOLE[@]}" send --hide-progress "${wlisten[@]}" "$FILE" > "$WORK/sender.log" 2>&1 &
      PIDS+=($!)
      sender=$!
      code=$(code_of "$WORK/sender.log" "Wormhole code is: ")
      timed_receive "$dir" "${WORMHOLE[@]}" receive --accept-file --hide-progress --no-listen "$code"
      ;;
    wormhole-share)
      "${WORMHOLE[@]}" send --hide-progress --no-listen "$FILE" > "$WORK/sender.log" 2>&1 &
      PIDS+=($!)
      sender=$!
      code=$(code_of "$WORK/sender.log" "Wormhole code is: ")
      timed_receive "$dir" $BIN receive --config "$R" --yes --into "$dir" "${SHARE_CODE[@]}" "${listen[@]}" "$code"
      ;;
    share-wormhole)
      $BIN send --config "$S" --code "${SHARE_CODE[@]}" "${listen[@]}" "$FILE" 2> "$WORK/sender.log" &
      PIDS+=($!)
      sender=$!
      code=$(code_of "$WORK/sender.log" "code ")
      timed_receive "$dir" "${WORMHOLE[@]}" receive --accept-file --hide-progress --no-listen "$code"
      ;;
    trusted)
      : > "$WORK/trusted.log"  # a fresh log: the last run's port line must not be read as this one's
      $BIN receive --config "$R" --port 0 --listen 127.0.0.1 --into "$dir" > "$WORK/trusted.log" 2>&1 &
      local rpid=$!
      local port start
      port=$(receiver_port "$WORK/trusted.log" $rpid)
      start=$(now)
      $BIN send --config "$S" --direct --to "127.0.0.1:$port" "$FILE" 2> "$WORK/sender.log"
      wait "$rpid"
      SECS=$(echo "$(now) - $start" | bc -l)
      FIRST=0
      ;;
  esac
  # The sender ends once the receiver has acknowledged (the servers keep running: wait for this one only).
  [ -z "$sender" ] || wait "$sender" || { echo "bench-wormhole: the sender failed: $(tail -3 "$WORK/sender.log")" >&2; exit 1; }
  PIDS=("${PIDS[@]:0:2}")
  check "$dir/payload.bin"
  rm -rf "$dir"
}

CASES=("trusted direct" "share-share direct" "share-share relay" "wormhole-wormhole direct" "wormhole-wormhole relay"
  "wormhole-share direct" "wormhole-share relay" "share-wormhole direct" "share-wormhole relay")
declare -A TIMES FIRSTS
for round in $(seq "$ROUNDS"); do
  # Each round starts one case further on, so that no case always follows the same one.
  for i in $(seq 0 $((${#CASES[@]} - 1))); do
    entry=${CASES[$(((i + round - 1) % ${#CASES[@]}))]}
    read -r name route <<< "$entry"
    run_case "$name" "$route"
    TIMES[$entry]+="$SECS "
    FIRSTS[$entry]+="$FIRST "
  done
  echo "round $round done"
done

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
label() {
  case $1 in
    trusted) echo "share trusted (send --to)" ;;
    share-share) echo "share -> share by code" ;;
    wormhole-wormhole) echo "wormhole -> wormhole" ;;
    wormhole-share) echo "wormhole -> share" ;;
    share-wormhole) echo "share -> wormhole" ;;
  esac
}
echo
printf "%-28s %-7s %9s %9s %16s\n" "sender -> receiver" route seconds "MiB/s" "code to 1st byte"
declare -A RATE
for entry in "${CASES[@]}"; do
  read -r name route <<< "$entry"
  secs=$(echo "${TIMES[$entry]}" | median)
  first=$(echo "${FIRSTS[$entry]}" | median)
  rate=$(echo "$MIB / $secs" | bc -l)
  RATE[$entry]=$rate
  ttfb=$([ "$name" = trusted ] && echo "-" || printf "%.0f ms" "$first")
  printf "%-28s %-7s %9.2f %9.0f %16s\n" "$(label "$name")" "$route" "$secs" "$rate" "$ttfb"
done
printf "share by code / share trusted, direct: %.2f\n" "$(echo "${RATE[share-share direct]} / ${RATE[trusted direct]}" | bc -l)"
printf "share by code / wormhole -> wormhole, direct: %.2f; through the relay: %.2f\n" \
  "$(echo "${RATE[share-share direct]} / ${RATE[wormhole-wormhole direct]}" | bc -l)" \
  "$(echo "${RATE[share-share relay]} / ${RATE[wormhole-wormhole relay]}" | bc -l)"
