#!/usr/bin/env bash
# Loopback file-transfer benchmark, all in one run (release build):
#   share (send/receive) | scp | rsync -e ssh | openssl s_client -> s_server | the C ceiling (TLS + SHA-256 both ends)
# plus peak RSS of share's sender and receiver at two file sizes, and a transfer interrupted at 50 % and resumed.
# Usage: scripts/bench-transfer.sh [MiB] [rounds]     (default 1024 MiB, 3 rounds; medians are reported)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
MIB=${1:-1024}
ROUNDS=${2:-3}
release_build share >/dev/null
BIN=$PWD/.build/release/share
WORK=$(mktemp -d /var/tmp/share-bench.XXXXXX)
source scripts/lib-bench.sh
bench_install
trap bench_cleanup EXIT
gcc -O2 -o "$WORK/tls_ceiling" Benchmarks/ceiling/tls_ceiling.c -lssl -lcrypto

SRC=$WORK/src; mkdir -p "$SRC"
head -c $((MIB << 20)) /dev/urandom > "$SRC/payload.bin"
head -c $((100 << 20)) /dev/urandom > "$SRC/small.bin"
BYTES=$((MIB << 20))

bench_devices
bench_sshd

# Before each run: every destination emptied, dirty pages written back, the source in the page cache.
settle() {
  rm -f "$WORK"/dst-*/payload.bin
  sync; echo 1 > /proc/sys/vm/drop_caches 2>/dev/null || true; cat "$SRC/payload.bin" > /dev/null
}
# Waits (bounded) until FILE holds SIZE bytes.
wait_size() { for _ in $(seq 24000); do [ "$(stat -c %s "$1" 2>/dev/null || echo 0)" -ge "$2" ] && return 0; sleep 0.005; done; return 1; }
declare -A RESULT RSS_S RSS_R

# share: returns "seconds sender-rss-kib receiver-rss-kib" for one file.
share_once() {
  local file=$1 dst=$WORK/dst-share
  rm -rf "$dst"; mkdir -p "$dst"
  /usr/bin/time -f "%M" -o "$WORK/recv.rss" $BIN receive --config "$R" --port 0 --listen 127.0.0.1 --into "$dst" > "$WORK/recv.out" 2>&1 &
  local rpid=$!
  for _ in $(seq 200); do grep -q "waiting on port" "$WORK/recv.out" 2>/dev/null && break; sleep 0.05; done
  local port; port=$(grep -o 'port [0-9]*' "$WORK/recv.out" | awk '{print $2}')
  local start end
  start=$(date +%s.%N)
  /usr/bin/time -f "%M" -o "$WORK/send.rss" $BIN send --config "$S" --to 127.0.0.1:$port "$file" --quiet
  end=$(date +%s.%N)
  wait $rpid
  cmp -s "$file" "$dst/$(basename "$file")" || { echo "share delivered a different file" >&2; exit 1; }
  echo "$(echo "$end - $start" | bc) $(cat "$WORK/send.rss") $(cat "$WORK/recv.rss")"
}

run_tool() { # name command...   (the tool writes $WORK/dst-<name>/payload.bin, checked after every run)
  local name=$1; shift
  local times=()
  for _ in $(seq "$ROUNDS"); do
    settle
    local start end
    start=$(date +%s.%N); "$@"; end=$(date +%s.%N)
    cmp -s "$SRC/payload.bin" "$WORK/dst-$name/payload.bin" || { echo "$name delivered a different file" >&2; exit 1; }
    times+=("$(echo "$end - $start" | bc)")
  done
  RESULT[$name]=$(printf '%s\n' "${times[@]}" | median)
}

echo "payload: $MIB MiB of random bytes, $ROUNDS rounds, median wall time"

times=(); srss=(); rrss=()
for _ in $(seq "$ROUNDS"); do
  settle
  read -r t s r < <(share_once "$SRC/payload.bin")
  times+=("$t"); srss+=("$s"); rrss+=("$r")
done
RESULT[share]=$(printf '%s\n' "${times[@]}" | median)
RSS_S[large]=$(printf '%s\n' "${srss[@]}" | sort -n | tail -1); RSS_R[large]=$(printf '%s\n' "${rrss[@]}" | sort -n | tail -1)
read -r _ s r < <(share_once "$SRC/small.bin"); RSS_S[small]=$s; RSS_R[small]=$r

mkdir -p "$WORK/dst-scp" "$WORK/dst-rsync" "$WORK/dst-ossl" "$WORK/dst-ceiling"
# ossl = openssl s_client -> s_server; ceiling = Benchmarks/ceiling/tls_ceiling.c
run_tool scp scp -q $SSHOPTS -P "$SSHPORT" "$SRC/payload.bin" root@127.0.0.1:"$WORK/dst-scp/"
run_tool rsync bash -c "rm -f '$WORK/dst-rsync/payload.bin'; rsync -a -e '$SSH' '$SRC/payload.bin' root@127.0.0.1:'$WORK/dst-rsync/'"

openssl req -x509 -newkey ed25519 -nodes -keyout "$WORK/k" -out "$WORK/c" -subj /CN=bench -days 1 2>/dev/null
# The openssl pair never ends on its own (s_client with -no_ign_eof drops unsent bytes at EOF, without it neither side
# exits): it is timed until the server's output holds every byte, then both are stopped.
ossl_once() {
  local port; port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  openssl s_server -accept "$port" -naccept 1 -tls1_3 -ciphersuites TLS_AES_128_GCM_SHA256 -cert "$WORK/c" -key "$WORK/k" -quiet \
    > "$WORK/dst-ossl/payload.bin" 2>/dev/null < <(sleep 600) &
  local spid=$!
  for _ in $(seq 100); do ss -ltnH "sport = :$port" | grep -q . && break; sleep 0.05; done
  cat "$SRC/payload.bin" | openssl s_client -connect 127.0.0.1:$port -tls1_3 -ciphersuites TLS_AES_128_GCM_SHA256 \
    -cert "$WORK/c" -key "$WORK/k" -quiet > /dev/null 2>&1 &
  local cpid=$!
  wait_size "$WORK/dst-ossl/payload.bin" "$BYTES" || echo "openssl pair did not deliver the file" >&2
  kill $cpid $spid 2>/dev/null; wait $cpid $spid 2>/dev/null || true
}
run_tool ossl ossl_once

ceiling_once() {
  local port; port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  "$WORK/tls_ceiling" serve "$port" "$WORK/c" "$WORK/k" "$WORK/dst-ceiling/payload.bin" 1048576 > "$WORK/ceiling.out" &
  local spid=$!
  for _ in $(seq 100); do grep -q ready "$WORK/ceiling.out" 2>/dev/null && break; sleep 0.02; done
  "$WORK/tls_ceiling" send "$port" "$WORK/c" "$WORK/k" "$SRC/payload.bin" 1048576 > /dev/null
  wait $spid
}
run_tool ceiling ceiling_once

mibs() { python3 -c "print(f'{$BYTES/$1/1048576:.0f}')"; }
printf '\n%-28s %10s %10s %8s\n' "tool" "seconds" "MiB/s" "share ÷"
for name in share scp rsync ossl ceiling; do
  t=${RESULT[$name]}
  printf '%-28s %10.2f %10s %8.2f\n' "$name" "$t" "$(mibs "$t")" "$(python3 -c "print($t/${RESULT[share]})")"
done
python3 - "${RESULT[share]}" "${RESULT[ceiling]}" "${RESULT[scp]}" "${RESULT[rsync]}" <<'PY'
import sys
share, ceiling, scp, rsync = map(float, sys.argv[1:])
print(f"share reaches {ceiling/share*100:.0f}% of the ceiling; {scp/share:.2f}x scp, {rsync/share:.2f}x rsync")
PY
printf '\npeak RSS (KiB)        sender   receiver\n'
printf '100 MiB file       %9s %10s\n' "${RSS_S[small]}" "${RSS_R[small]}"
printf '%4d MiB file       %9s %10s\n' "$MIB" "${RSS_S[large]}" "${RSS_R[large]}"

# Interrupted at 50 %: kill the receiver once its ledger records half the chunks, then run both again.
dst=$WORK/dst-resume; rm -rf "$dst"; mkdir -p "$dst"
$BIN receive --config "$R" --port 0 --listen 127.0.0.1 --into "$dst" > "$WORK/recv.out" 2>&1 &
rpid=$!
for _ in $(seq 200); do grep -q "waiting on port" "$WORK/recv.out" 2>/dev/null && break; sleep 0.05; done
port=$(grep -o 'port [0-9]*' "$WORK/recv.out" | awk '{print $2}')
$BIN send --config "$S" --to 127.0.0.1:$port "$SRC/payload.bin" --quiet 2>/dev/null &
spid=$!
half=$((MIB / 2))
for _ in $(seq 2000); do
  held=$(python3 -c "import json,glob; f=glob.glob('$dst/.share-partial/*.json'); print(len(json.load(open(f[0]))['chunks']) if f else 0)" 2>/dev/null || echo 0)
  [ "$held" -ge "$half" ] && break; sleep 0.01
done
kill -9 $rpid 2>/dev/null || true; wait $rpid 2>/dev/null || true; wait $spid 2>/dev/null || true
if ! ls "$dst"/.share-partial/*.part > /dev/null 2>&1; then
  echo "resume: the transfer finished before it could be interrupted; run with a larger size"; exit 0
fi
received=$(stat -c %s "$dst"/.share-partial/*.part)
verified=$(python3 -c "import json,glob; print(len(json.load(open(glob.glob('$dst/.share-partial/*.json')[0]))['chunks']))")
$BIN receive --config "$R" --port 0 --listen 127.0.0.1 --into "$dst" > "$WORK/recv.out" 2>&1 &
rpid=$!
for _ in $(seq 200); do grep -q "waiting on port" "$WORK/recv.out" 2>/dev/null && break; sleep 0.05; done
port=$(grep -o 'port [0-9]*' "$WORK/recv.out" | awk '{print $2}')
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
