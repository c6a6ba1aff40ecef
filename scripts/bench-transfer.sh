#!/usr/bin/env bash
# Loopback file-transfer benchmark, every tool in the same run, rounds interleaved (each round runs every tool once,
# in a rotating order), the same cache treatment before every run (destination removed, dirty pages written back,
# the page cache dropped, the source read back in), and every clock stopped when the receiver holds the verified file:
#   share (share send -> share receive; the clock stops when share receive exits, after it verified and placed it)
#   scp and rsync -e ssh (AES-128-GCM, to a throwaway sshd on loopback)
#   the C ceiling (Benchmarks/ceiling/tls_ceiling.c: TLS 1.3 + BLAKE3, the digest two share ends use, on both ends,
#   1 MiB buffers) in five forms:
#     plain-1  a simple sequential pipe with OpenSSL's default reading (the shape of the reference pipe)
#     tuned-1  the same with read-ahead (whole socket buffers per read, as share reads)
#     tuned-2  two threads per end, the file side beside the TLS side (as share moves large items)
#     sized-1  read-ahead, one thread per end, the output file's size set before writing and sequential reading
#              advised (share's receiver knows the size from the offer and sets its partial's size; its sender
#              advises sequential reads)
#     sized-2  the same on two threads per end
#   share is compared with the strongest of the five: if share beats it, the ceiling is wrong.
# On a virtual machine whose balloon reports free pages to the host (virtio_balloon free page reporting), memory freed
# by dropping the page cache goes back to the host a second or two later, and whoever next writes 1 GiB into the page
# cache pays the host's page faults: the same copy runs at 850 or 5,400 MiB/s depending on how long ago the cache was
# dropped, and every tool's result turns bimodal. The benchmark holds reporting off for its duration (restored on
# exit; KEEP_PAGE_REPORTING=1 leaves it on) and says so.
# Then the same under one busy core: the script starts `taskset -c 0 yes > /dev/null` itself and stops it after.
# Then peak RSS of share's sender and receiver at two sizes, and a transfer interrupted at 50 % and resumed.
# Usage: scripts/bench-transfer.sh [MiB] [rounds]     (default 1024 MiB, 5 rounds; medians are reported)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
MIB=${1:-1024}
ROUNDS=${2:-5}
release_build share >/dev/null
BIN=$(bin_dir)/share
WORK=$(mktemp -d /var/tmp/share-bench.XXXXXX)
source scripts/lib-bench.sh
bench_install
BUSY=
# Only what this script started is stopped: the busy loop by its process id, then the jobs and sshd.
trap '[ -n "$BUSY" ] && kill "$BUSY" 2>/dev/null; bench_cleanup' EXIT
gcc -O2 -pthread -o "$WORK/tls_ceiling" Benchmarks/ceiling/tls_ceiling.c $(pkg-config --cflags share_blake3) -lssl -lcrypto \
  $(pkg-config --libs share_blake3)

SRC=$WORK/src; mkdir -p "$SRC"
head -c $((MIB << 20)) /dev/urandom > "$SRC/payload.bin"
SMALL_MIB=$(( MIB < 100 ? MIB / 2 : 100 ))
head -c $((SMALL_MIB << 20)) /dev/urandom > "$SRC/small.bin"
BYTES=$((MIB << 20))
openssl req -x509 -newkey ed25519 -nodes -keyout "$WORK/k" -out "$WORK/c" -subj /CN=bench -days 1 2>/dev/null

bench_devices
bench_sshd
SSHGCM="$SSH -c aes128-gcm@openssh.com"

# Before each run: every destination emptied, dirty pages written back, the page cache dropped, the source read in.
settle() {
  rm -rf "$WORK"/dst-* "$WORK/dst"; mkdir -p "$WORK/dst"
  sync; echo 1 > /proc/sys/vm/drop_caches 2>/dev/null || true; cat "$SRC/payload.bin" > /dev/null
}
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# One run of a tool: prints seconds, having checked the delivered file.
run_share() {
  : > "$WORK/recv.out"  # a fresh log: the last run's port line must not be read as this one's
  $BIN receive --config "$R" --port 0 --listen 127.0.0.1 --into "$WORK/dst" > "$WORK/recv.out" 2>&1 &
  local rpid=$!
  local port; port=$(receiver_port "$WORK/recv.out" $rpid)
  local start; start=$(date +%s.%N)
  $BIN send --config "$S" --to 127.0.0.1:$port "$SRC/payload.bin" --quiet
  wait $rpid
  echo "$(date +%s.%N) - $start" | bc
}
run_scp() {
  local start; start=$(date +%s.%N)
  scp -q -c aes128-gcm@openssh.com $SSHOPTS -P "$SSHPORT" "$SRC/payload.bin" root@127.0.0.1:"$WORK/dst/"
  echo "$(date +%s.%N) - $start" | bc
}
run_rsync() {
  local start; start=$(date +%s.%N)
  rsync -a -e "$SSHGCM" "$SRC/payload.bin" root@127.0.0.1:"$WORK/dst/"
  echo "$(date +%s.%N) - $start" | bc
}
run_pipe() { # plain|tuned threads [size]
  local port; port=$(free_port)
  : > "$WORK/ceiling.out"  # a fresh log: the last round's "ready" must not be read as this one's
  "$WORK/tls_ceiling" serve "$port" "$WORK/c" "$WORK/k" "$WORK/dst/payload.bin" 1048576 "$1" "$2" ${3:-} > "$WORK/ceiling.out" &
  local spid=$!
  # Its listener is up when it says ready (up to 30 s on a busy machine); a sender that cannot connect ends the
  # server too, so a failed round never waits for a connection that will not come.
  await_line "$WORK/ceiling.out" ready
  local start; start=$(date +%s.%N)
  if ! "$WORK/tls_ceiling" send "$port" "$WORK/c" "$WORK/k" "$SRC/payload.bin" 1048576 "$1" "$2" ${3:-} > /dev/null; then
    kill "$spid" 2> /dev/null || true
    wait "$spid" 2> /dev/null || true
    echo "bench-transfer: the C pipe ($1, $2 thread(s)) could not send to its server on port $port" >&2
    return 1
  fi
  wait $spid
  echo "$(date +%s.%N) - $start" | bc
}

TOOLS=(share scp rsync plain-1 tuned-1 tuned-2 sized-1 sized-2)
once() {
  settle
  local seconds
  case $1 in
    share) seconds=$(run_share) ;;
    scp) seconds=$(run_scp) ;;
    rsync) seconds=$(run_rsync) ;;
    plain-1) seconds=$(run_pipe plain 1) ;;
    tuned-1) seconds=$(run_pipe tuned 1) ;;
    tuned-2) seconds=$(run_pipe tuned 2) ;;
    sized-1) seconds=$(run_pipe tuned 1 "$BYTES") ;;
    sized-2) seconds=$(run_pipe tuned 2 "$BYTES") ;;
  esac
  cmp -s "$SRC/payload.bin" "$WORK/dst/payload.bin" || { echo "$1 delivered a different file" >&2; exit 1; }
  echo "$seconds"
}

declare -A RATE
measure() { # condition
  declare -A times
  for round in $(seq "$ROUNDS"); do
    local n=${#TOOLS[@]}
    for i in $(seq 0 $((n - 1))); do
      local tool=${TOOLS[$(((i + round) % n))]}
      times[$tool]="${times[$tool]:-} $(once "$tool")"
    done
  done
  for tool in "${TOOLS[@]}"; do
    local median; median=$(printf '%s\n' ${times[$tool]} | median)
    RATE[$1,$tool]=$(python3 -c "print(f'{$BYTES/$median/1048576:.0f}')")
  done
}

page_reporting_hold
echo "payload: $MIB MiB of random bytes, $ROUNDS interleaved rounds, medians"
measure quiet
taskset -c 0 yes > /dev/null &
BUSY=$!
measure loaded
kill $BUSY; wait $BUSY 2>/dev/null || true
BUSY=

printf '\n%-36s %12s %12s\n' "tool (MiB/s)" "quiet" "one busy core"
for tool in "${TOOLS[@]}"; do
  case $tool in
    share) label="share" ;; scp) label="scp (aes128-gcm)" ;; rsync) label="rsync -e ssh (aes128-gcm)" ;;
    plain-1) label="C pipe, plain, 1 thread per end" ;; tuned-1) label="C pipe, read-ahead, 1 thread" ;;
    tuned-2) label="C pipe, read-ahead, 2 threads" ;;
    sized-1) label="C pipe, 1 thread, file sized first" ;;
    sized-2) label="C pipe, 2 threads, file sized first" ;;
  esac
  printf '%-36s %12s %12s\n' "$label" "${RATE[quiet,$tool]}" "${RATE[loaded,$tool]}"
done
python3 - "${RATE[quiet,share]}" "${RATE[loaded,share]}" "${RATE[quiet,scp]}" "${RATE[loaded,scp]}" \
  "${RATE[quiet,rsync]}" "${RATE[quiet,plain-1]}" "${RATE[quiet,tuned-1]}" "${RATE[quiet,tuned-2]}" \
  "${RATE[quiet,sized-1]}" "${RATE[quiet,sized-2]}" "${RATE[loaded,plain-1]}" "${RATE[loaded,tuned-1]}" \
  "${RATE[loaded,tuned-2]}" "${RATE[loaded,sized-1]}" "${RATE[loaded,sized-2]}" <<'PY'
import sys
share, share_loaded, scp, scp_loaded, rsync, *pipes = map(float, sys.argv[1:])
ceiling, loaded_ceiling = max(pipes[:5]), max(pipes[5:])
print(f"\nshare: {share/ceiling*100:.0f}% of the strongest C pipe ({ceiling:.0f} MiB/s); {share/scp:.2f}x scp, "
      f"{share/rsync:.2f}x rsync")
print(f"one busy core: share keeps {share_loaded/share*100:.0f}% of its quiet rate (scp {scp_loaded/scp*100:.0f}%); "
      f"{share_loaded/scp_loaded:.2f}x scp; {share_loaded/loaded_ceiling*100:.0f}% of the strongest C pipe under the "
      f"same load ({loaded_ceiling:.0f} MiB/s, which keeps {loaded_ceiling/ceiling*100:.0f}% of the quiet ceiling)")
PY

share_rss() { # file -> "sender-kib receiver-kib"
  settle
  : > "$WORK/recv.out"  # a fresh log: the last run's port line must not be read as this one's
  /usr/bin/time -f "%M" -o "$WORK/recv.rss" $BIN receive --config "$R" --port 0 --listen 127.0.0.1 --into "$WORK/dst" > "$WORK/recv.out" 2>&1 &
  local rpid=$!
  local port; port=$(receiver_port "$WORK/recv.out" $rpid)
  /usr/bin/time -f "%M" -o "$WORK/send.rss" $BIN send --config "$S" --to 127.0.0.1:$port "$1" --quiet
  wait $rpid
  echo "$(cat "$WORK/send.rss") $(cat "$WORK/recv.rss")"
}
read -r small_s small_r < <(share_rss "$SRC/small.bin")
read -r large_s large_r < <(share_rss "$SRC/payload.bin")
printf '\npeak RSS (KiB)        sender   receiver\n'
printf '%4d MiB file       %9s %10s\n' "$SMALL_MIB" "$small_s" "$small_r"
printf '%4d MiB file       %9s %10s\n' "$MIB" "$large_s" "$large_r"

# Interrupted at 50 %: kill the receiver once its ledger records half the chunks, then run both again.
dst=$WORK/dst-resume; rm -rf "$dst"; mkdir -p "$dst"
: > "$WORK/recv.out"  # a fresh log: the last run's port line must not be read as this one's
$BIN receive --config "$R" --port 0 --listen 127.0.0.1 --into "$dst" > "$WORK/recv.out" 2>&1 &
rpid=$!
port=$(receiver_port "$WORK/recv.out" $rpid)
$BIN send --config "$S" --to 127.0.0.1:$port "$SRC/payload.bin" --quiet 2>/dev/null &
spid=$!
half=$((MIB / 2))
for _ in $(seq 2000); do
  kill -0 $spid 2>/dev/null || break
  held=$(ledger_chunks "$dst" 2>/dev/null || echo 0)
  [ "$held" -ge "$half" ] && break; sleep 0.01
done
kill -9 $rpid 2>/dev/null || true; wait $rpid 2>/dev/null || true; wait $spid 2>/dev/null || true
if ! ls "$dst"/.share-partial/*.part > /dev/null 2>&1; then
  echo "resume: the transfer finished before it could be interrupted; run with a larger size"; exit 0
fi
received=$(stat -c %s "$dst"/.share-partial/*.part)
verified=$(ledger_chunks "$dst")
: > "$WORK/recv.out"  # a fresh log: the last run's port line must not be read as this one's
$BIN receive --config "$R" --port 0 --listen 127.0.0.1 --into "$dst" > "$WORK/recv.out" 2>&1 &
rpid=$!
port=$(receiver_port "$WORK/recv.out" $rpid)
summary=$($BIN send --config "$S" --to 127.0.0.1:$port "$SRC/payload.bin" --json | grep '"summary"')
wait $rpid
cmp -s "$SRC/payload.bin" "$dst/payload.bin" || { echo "resumed file differs" >&2; exit 1; }
python3 - "$summary" "$verified" "$received" "$BYTES" <<'PY'
import json, sys
s = json.loads(sys.argv[1]); verified = int(sys.argv[2]) << 20; received = int(sys.argv[3]); size = int(sys.argv[4])
sent = s["bytesSent"]; beyond = sent - (size - verified)
print(f"\nresume: killed the receiver at {received/size*100:.0f}% received ({verified>>20} MiB verified in its ledger);")
print(f"        the rerun sent {sent>>20} MiB; bytes resent beyond what was verified: {beyond} (limit: one chunk = 1048576)")
print("        resumed file identical: yes")
PY
