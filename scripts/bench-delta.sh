#!/usr/bin/env bash
# A file or folder sent again after an edit, every tool in the same run: share (share send -> share receive, the
# receiver holding the earlier version it was sent), rsync over ssh (its delta algorithm; `rsync -a`, otherwise
# default options, aes128-gcm) and Syncthing (Debian's syncthing, a send-only and a receive-only folder already in
# sync, then the edit and a rescan; scripts/bench_syncthing.py --delta), on two links:
#   loopback   one network namespace, both ends on 127.0.0.1
#   100mbit    two namespaces joined by one link, 100 Mbit/s with tbf on each end, 2 ms round trip (netem, else
#              Benchmarks/linkshaper), as scripts/bench-links.sh shapes its links
# Edits, of a random FILE_MIB file: 1 MiB appended; 1 KiB inserted near the start; 1 % of the file changed in
# scattered 4 KiB blocks; a 1 MiB block changed in the middle; and a folder of FILES random files (16–112 KiB) with
# 10 changed (4 KiB each) and 5 deleted; and a LOG_MIB text log (a service's lines) with 5 MiB of new lines appended,
# where compression counts (rsync -z beside rsync -a for every edit). For each: the bytes that crossed the link both ways, counted by the kernel
# on the link's interfaces (lo, or the two ends of the link), not reported by the tools, and the seconds until the
# receiver holds the verified new version. Every run starts from the same earlier version on the receiver. A folder a
# run delivered is moved aside, not deleted, until the end: ext4 checks every inode it hands out against those freed
# in the last seconds (recently_deleted), so deleting a 1,000-file result would charge the next run's creates for it.
# Then, on loopback: a BIG_MIB file with one 1 MiB block changed, as a fraction of its whole transfer's bytes; the
# index of an INDEX_MIB basis built on one core (share-bench-delta: GB/s and peak RSS); the peak RSS of share send
# and share receive during the 1 MiB-block delta. (Shared folders, share mirror among them: scripts/bench-sync.sh.)
# Release build; needs root (namespaces). Usage: scripts/bench-delta.sh
# Settings (environment): FILE_MIB (256), FILES (1000), LOG_MIB (300), BIG_MIB (1024), INDEX_MIB (10240),
# SYNCTHING (1: include Syncthing; 0: leave it out), LINKS ("loopback 100mbit"), LIMIT (120: seconds after which a
# run is given up and shown as such), ROUNDS (3: each edit by each tool, interleaved round by round; the table shows
# the medians). SHARE_SMOKE=1 (the test command's smoke pass): tiny sizes, one round, no Syncthing.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
if [ -n "${SHARE_SMOKE:-}" ]; then
  : "${FILE_MIB:=4}" "${FILES:=40}" "${LOG_MIB:=8}" "${BIG_MIB:=16}" "${INDEX_MIB:=64}" "${SYNCTHING:=0}"
  : "${ROUNDS:=1}"
fi
FILE_MIB=${FILE_MIB:-256}
FILES=${FILES:-1000}
LOG_MIB=${LOG_MIB:-300}
BIG_MIB=${BIG_MIB:-1024}
INDEX_MIB=${INDEX_MIB:-10240}
SYNCTHING=${SYNCTHING:-1}
LINKS=${LINKS:-loopback 100mbit}
LIMIT=${LIMIT:-120}
ROUNDS=${ROUNDS:-3}
[ "$(id -u)" -eq 0 ] || { echo "bench-delta: network namespaces need root" >&2; exit 77; }
release_build share share-bench-delta > /dev/null
BIN=$(bin_dir)/share
WORK=$(mktemp -d /var/tmp/share-delta.XXXXXX)
TAG=$(head -c3 /dev/urandom | od -An -tx1 | tr -d ' \n')
A=bda-$TAG B=bdb-$TAG L=bdl-$TAG
SHAPER=
source scripts/lib-bench.sh
cleanup() {
  kill $(jobs -p) 2> /dev/null || true
  [ -n "$SHAPER" ] && kill "$SHAPER" 2> /dev/null || true
  [ -f "$WORK/sshd.pid" ] && kill "$(cat "$WORK/sshd.pid")" 2> /dev/null || true
  for ns in "$A" "$B" "$L"; do ip netns del "$ns" 2> /dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT
discard() { # paths → folders moved under $WORK/discarded (removed with WORK), files removed
  local path
  mkdir -p "$WORK/discarded"
  for path in "$@"; do
    if [ -d "$path" ]; then
      # Large files are few inodes: they go at once (a tool may have left a copy of the big file inside).
      find "$path" -type f -size +1M -delete
      mv "$path" "$(mktemp -d "$WORK/discarded/XXXXXX")/"
    else
      rm -f "$path"
    fi
  done
}
gcc -O2 -o "$WORK/linkshaper" Benchmarks/linkshaper/linkshaper.c

# The link: SEND and RECV run a command on each end; HOST is the receiver's address; COUNT prints the bytes the
# link's interfaces have sent so far (both directions).
NETEM=no
if ip link add nmp-$TAG type veth peer name nmq-$TAG 2> /dev/null; then
  tc qdisc add dev nmp-$TAG root netem delay 1ms 2> /dev/null && NETEM=yes
  ip link del nmp-$TAG 2> /dev/null || true
fi
link_up() {
  case $1 in
    loopback)
      ip netns add "$L"; ip netns exec "$L" ip link set lo up
      SEND=(ip netns exec "$L"); RECV=(ip netns exec "$L"); HOST=127.0.0.1
      COUNT() { ip netns exec "$L" cat /sys/class/net/lo/statistics/tx_bytes; }
      ;;
    100mbit)
      ip netns add "$A"; ip netns add "$B"
      ip netns exec "$A" ip link set lo up; ip netns exec "$B" ip link set lo up
      if [ "$NETEM" = yes ]; then
        ip link add shl0 netns "$A" type veth peer name shl0 netns "$B"
      else
        : > "$WORK/shaper.out"  # a fresh log: the last shaper's "ready" must not be read as this one's
        "$WORK/linkshaper" "$A" "$B" 1000 > "$WORK/shaper.out" 2>&1 &
        SHAPER=$!
        await_line "$WORK/shaper.out" ready
      fi
      ip netns exec "$A" ip addr add 10.78.0.1/24 dev shl0; ip netns exec "$B" ip addr add 10.78.0.2/24 dev shl0
      ip netns exec "$A" ip link set shl0 up; ip netns exec "$B" ip link set shl0 up
      for ns in "$A" "$B"; do
        if [ "$NETEM" = yes ]; then
          ip netns exec "$ns" tc qdisc add dev shl0 root handle 1: netem delay 1000us
          ip netns exec "$ns" tc qdisc add dev shl0 parent 1: handle 2: tbf rate 100mbit burst 256kb latency 20ms
        else
          ip netns exec "$ns" tc qdisc replace dev shl0 root tbf rate 100mbit burst 256kb latency 20ms
        fi
      done
      SEND=(ip netns exec "$A"); RECV=(ip netns exec "$B"); HOST=10.78.0.2
      COUNT() {
        echo $(($(ip netns exec "$A" cat /sys/class/net/shl0/statistics/tx_bytes) + $(ip netns exec "$B" cat /sys/class/net/shl0/statistics/tx_bytes)))
      }
      ;;
  esac
  # sshd on the receiving end, for rsync.
  bench_ssh_config "$HOST" 2222 "Ciphers aes128-gcm@openssh.com"
  "${RECV[@]}" /usr/sbin/sshd -f "$WORK/ssh/config"
  SSHOPTS="-i $WORK/ssh/id -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o BatchMode=yes -o LogLevel=ERROR -c aes128-gcm@openssh.com"
  for _ in $(seq 600); do "${SEND[@]}" ssh $SSHOPTS -p 2222 root@$HOST true 2> /dev/null && break; sleep 0.1; done
}
link_down() {
  [ -f "$WORK/sshd.pid" ] && { kill "$(cat "$WORK/sshd.pid")" 2> /dev/null || true; rm -f "$WORK/sshd.pid"; }
  [ -n "$SHAPER" ] && { kill "$SHAPER" 2> /dev/null || true; wait "$SHAPER" 2> /dev/null || true; }
  SHAPER=
  for ns in "$A" "$B" "$L"; do ip netns del "$ns" 2> /dev/null || true; done
}

bench_devices
# The earlier versions (OLD) and the edits (NEW/EDIT), made once.
OLD=$WORK/old; mkdir -p "$OLD/folder"
head -c $((FILE_MIB << 20)) /dev/urandom > "$OLD/file.bin"
python3 - "$OLD/folder" "$FILES" <<'PY'
import os, random, sys
root, count = sys.argv[1], int(sys.argv[2])
random.seed(11)
for n in range(count):
    path = os.path.join(root, f"dir{n % 20}", f"file{n:05d}.bin")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(os.urandom(random.randint(16, 112) << 10))
PY
# A service's log: timestamped lines of a few words and numbers (compresses about 4:1, as such logs do).
log_lines() { # seed MiB → lines on standard output
  python3 - "$1" "$2" <<'PY'
import random, sys
random.seed(int(sys.argv[1]))
words = "error warning info debug request response user session timeout connected closed retry cache miss hit".split()
size, limit, out = 0, int(sys.argv[2]) << 20, sys.stdout
while size < limit:
    line = (f"2026-11-27T{random.randint(0, 23):02d}:{random.randint(0, 59):02d}:{random.randint(0, 59):02d}Z "
            f"{random.choice(['info', 'debug', 'warn'])} svc: {' '.join(random.choices(words, k=random.randint(4, 12)))} "
            f"id={random.getrandbits(48):012x} bytes={random.randint(0, 10 ** 7)}\n")
    out.write(line)
    size += len(line)
PY
}
log_lines 1 "$LOG_MIB" > "$OLD/app.log"
# The earlier versions were written an hour ago (rsync's quick check compares times in whole seconds).
find "$OLD" -exec touch -d '-1 hour' {} +
edit() { # name → makes $WORK/new/<name>/ (the new version) from OLD
  local dst=$WORK/new/$1
  rm -rf "$dst"; mkdir -p "$dst"
  if [ "$1" = folder ]; then
    cp -a "$OLD/folder" "$dst/folder"
    python3 - "$dst/folder" <<'PY'
import os, sys
root = sys.argv[1]
files = sorted(os.path.join(b, n) for b, _, ns in os.walk(root) for n in ns)
step = max(1, len(files) // 15)
picked = files[::step][:15]
for path in picked[:10]:
    with open(path, "r+b") as f:
        f.seek(os.path.getsize(path) // 3)
        f.write(os.urandom(4096))
for path in picked[10:]:
    os.remove(path)
PY
    return
  fi
  if [ "$1" = log ]; then
    cp "$OLD/app.log" "$dst/app.log"; log_lines 2 5 >> "$dst/app.log"
    return
  fi
  cp "$OLD/file.bin" "$dst/file.bin"
  python3 - "$dst/file.bin" "$1" <<'PY'
import os, random, sys
path, kind = sys.argv[1], sys.argv[2]
size = os.path.getsize(path)
random.seed(5)
if kind == "append":
    with open(path, "ab") as f: f.write(os.urandom(1 << 20))
elif kind == "insert":
    data = open(path, "rb").read()
    open(path, "wb").write(data[:4096] + os.urandom(1024) + data[4096:])
elif kind == "scattered":
    with open(path, "r+b") as f:
        for _ in range(size // 100 // 4096):
            f.seek(random.randrange(0, size - 4096) & ~4095); f.write(os.urandom(4096))
elif kind == "block":
    with open(path, "r+b") as f:
        f.seek(size // 2); f.write(os.urandom(1 << 20))
PY
}
EDITS=${EDITS:-append insert scattered block folder log}
for name in $EDITS; do edit "$name"; done
what() { case $1 in folder) echo folder ;; log) echo app.log ;; *) echo file.bin ;; esac; }

DST=$WORK/dst
# Each tool's receiver starts from the earlier version, placed as that tool would have placed it.
measure() { # → "seconds bytes" of the command run on the sending end
  local before after start
  # What the last run wrote goes to the disk first, for every tool alike (not during the next one's clock).
  sync
  before=$(COUNT); start=$(date +%s.%N)
  if ! timeout "$LIMIT" "$@" > "$WORK/run.out" 2>&1; then
    cat "$WORK/run.out" >&2
    echo "inf 0"
    return
  fi
  after=$(COUNT)
  echo "$(echo "$(date +%s.%N) - $start" | bc) $((after - before))"
}
# share's receiver holds the earlier versions it was sent once per link (untimed), and what it remembers of them is
# put back before each run, so every run is against the same earlier version.
share_setup() {
  rm -rf "$DST" "$R/state/versions" "$WORK/versions"; mkdir -p "$DST"
  share_once "$OLD/file.bin" > /dev/null
  share_once "$OLD/folder" > /dev/null
  share_once "$OLD/app.log" > /dev/null
  cp -a "$R/state/versions" "$WORK/versions"
}
run_share() { # edit → "seconds bytes", the new version checked
  local item; item=$(what "$1")
  rm -rf "$R/state/versions"; cp -a "$WORK/versions" "$R/state/versions"
  local result; result=$(share_once "$WORK/new/$1/$item")
  local got
  case $1 in folder) got="$DST/folder (2)" ;; log) got="$DST/app (2).log" ;; *) got="$DST/file (2).bin" ;; esac
  if [ -d "$got" ]; then diff -rq "$WORK/new/$1/$item" "$got" > /dev/null; else cmp -s "$WORK/new/$1/$item" "$got"; fi ||
    { echo "share delivered something else for $1" >&2; exit 1; }
  discard "$got"
  [ -n "${DEBUG_DELTA:-}" ] && { grep "^T" "$WORK/run.out" >&2; grep "^R" "$WORK/recv.out" >&2; }
  echo "$result"
}
share_once() { # path → "seconds bytes"
  : > "$WORK/recv.out"  # a fresh log: the last run's port line must not be read as this one's
  "${RECV[@]}" /usr/bin/time -f %M -o "$WORK/recv.rss" $BIN receive --config "$R" --port 0 --listen "$HOST" --into "$DST" \
    --timeout 600 > "$WORK/recv.out" 2>&1 &
  local rpid=$!
  local port; port=$(receiver_port "$WORK/recv.out" $rpid)
  local result; result=$(measure "${SEND[@]}" /usr/bin/time -f %M -o "$WORK/send.rss" $BIN send --config "$S" \
    --to "$HOST:$port" --quiet "$1")
  local status=0
  wait $rpid || status=$?
  if [ "$status" -ne 0 ]; then
    { echo "share receive exited $status for $1; its output:"; cat "$WORK/recv.out"; echo "the sender's:"; cat "$WORK/run.out"; } >&2
    exit 1
  fi
  echo "$result"
}
run_rsync() { # edit [extra rsync option]
  local item; item=$(what "$1") into=$WORK/rsync-dst
  discard "$into/$item" "$into"; mkdir -p "$into"; cp -a "$OLD/$item" "$into/$item"
  local result; result=$(measure "${SEND[@]}" rsync -a ${2:-} -e "ssh $SSHOPTS -p 2222" "$WORK/new/$1/$item" root@$HOST:"$into/")
  if [ -d "$into/$item" ]; then
    # rsync without --delete keeps the deleted files: the comparison leaves them out, as the run did.
    diff -rq "$WORK/new/$1/$item" "$into/$item" | grep -v "^Only in $into" > /dev/null && { echo "rsync differs" >&2; exit 1; }
  else
    cmp -s "$WORK/new/$1/$item" "$into/$item" || { echo "rsync delivered something else" >&2; exit 1; }
  fi
  discard "$into/$item" "$into"
  echo "$result"
}
run_rsync-z() { run_rsync "$1" -z; }
run_syncthing() {
  local item; item=$(what "$1")
  discard "$WORK/st-dst/$item" "$WORK/st-src/$item" "$WORK/st-dst" "$WORK/st-src"; mkdir -p "$WORK/st-dst" "$WORK/st-src"
  cp -a "$OLD/$item" "$WORK/st-src/$item"
  local ns_send=${SEND[3]:-} ns_recv=${RECV[3]:-} addr_send=127.0.0.1
  [ "$HOST" != 127.0.0.1 ] && addr_send=10.78.0.1
  python3 scripts/bench_syncthing.py --delta "$WORK" "$ns_send" "$addr_send" "$ns_recv" "$HOST" "$WORK/st-src" "$WORK/st-dst" \
    "$LIMIT" "rsync -a --delete '$WORK/new/$1/' '$WORK/st-src/'" "$COUNTER" 2> "$WORK/st.err" ||
    { cat "$WORK/st.err" >&2; echo "inf 0"; }
}

declare -A T W
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
printf '%-10s %-10s %-8s %12s %9s\n' link edit tool "bytes" seconds > "$WORK/table"
for link in $LINKS; do
  link_up "$link"
  if [ "$link" = loopback ]; then COUNTER="ip netns exec $L cat /sys/class/net/lo/statistics/tx_bytes"
  else COUNTER="sh -c 'echo \$((\$(ip netns exec $A cat /sys/class/net/shl0/statistics/tx_bytes) + \$(ip netns exec $B cat /sys/class/net/shl0/statistics/tx_bytes)))'"; fi
  tools="share rsync rsync-z"; [ "$SYNCTHING" = 1 ] && tools="$tools syncthing"
  share_setup
  for round in $(seq "$ROUNDS"); do
    for name in $EDITS; do
      for tool in $tools; do
        read -r t w <<< "$(run_$tool "$name")"
        T[$link,$name,$tool]="${T[$link,$name,$tool]:-} $t"; W[$link,$name,$tool]="${W[$link,$name,$tool]:-} $w"
      done
    done
  done
  for name in $EDITS; do
    for tool in $tools; do
      T[$link,$name,$tool]=$(echo "${T[$link,$name,$tool]}" | median)
      W[$link,$name,$tool]=$(echo "${W[$link,$name,$tool]}" | median)
      printf '%-10s %-10s %-8s %12s %9.3f\n' "$link" "$name" "$tool" "${W[$link,$name,$tool]}" "${T[$link,$name,$tool]}" >> "$WORK/table"
    done
  done
  link_down
done
echo "bench-delta: $FILE_MIB MiB file, folder of $FILES files; bytes crossed the link both ways (kernel counters); medians of $ROUNDS round(s)"
cat "$WORK/table"
# Each edit: share against rsync, in bytes and in time, on each link.
worse=0
for link in $LINKS; do
  for name in $EDITS; do
    s=${W[$link,$name,share]} r=${W[$link,$name,rsync]} st=${T[$link,$name,share]} rt=${T[$link,$name,rsync]}
    z=${W[$link,$name,rsync-z]}
    python3 - "$link" "$name" "$s" "$r" "$st" "$rt" "$z" <<'PY'
import sys
link, name, *values = sys.argv[1:]
s, r, st, rt, z = (float(v) if v not in ("", "inf") else float("inf") for v in values)
verdict = ("bytes ok" if s <= r else "bytes OVER") + ", " + ("time ok" if st <= rt else "time OVER")
print(f"{link} {name}: share/rsync bytes {s / max(r, 1):.2f}, time {st / rt if rt else float('inf'):.2f} ({verdict}); "
      f"share/rsync -z bytes {s / max(z, 1):.2f}")
PY
  done
done

# On loopback alone: the big file, the budgets, the index.
link_up loopback
head -c $((BIG_MIB << 20)) /dev/urandom > "$WORK/big.bin"
rm -rf "$DST" "$R/state/versions"; mkdir -p "$DST"
read -r _ whole <<< "$(share_once "$WORK/big.bin")"
python3 -c "
import os
with open('$WORK/big.bin', 'r+b') as f:
    f.seek(os.path.getsize('$WORK/big.bin') // 2); f.write(os.urandom(1 << 20))"
read -r _ delta <<< "$(share_once "$WORK/big.bin")"
cmp -s "$WORK/big.bin" "$DST/big (2).bin" || { echo "share delivered something else for the big file" >&2; exit 1; }
echo "$BIG_MIB MiB file, one 1 MiB block changed: $delta bytes, $(python3 -c "print(f'{$delta * 100 / $whole:.2f}')") % of its whole transfer ($whole bytes)"
echo "peak RSS during that delta (KiB): send $(cat "$WORK/send.rss"), receive $(cat "$WORK/recv.rss")"
head -c $((INDEX_MIB << 20)) /dev/urandom > "$WORK/basis.bin"
read -r bytes seconds rate groups size rss <<< "$(taskset -c 0 "$(bin_dir)/share-bench-delta" index "$WORK/basis.bin")"
echo "index of a $INDEX_MIB MiB basis on one core: $rate GB/s ($seconds s), $groups groups, $size bytes, peak RSS $rss KiB"
rm -f "$WORK/basis.bin"

link_down
