#!/usr/bin/env bash
# Transfers over emulated links, every tool in the same run: two network namespaces (sender A, receiver B) joined by
# one shaped link, for three profiles:
#   lan    1 Gbit/s, 0.5 ms round trip
#   wifi   300 Mbit/s, 6 ms round trip, 0.1 % loss each way
#   wan    50 Mbit/s, 40 ms round trip
# How each part is emulated (printed too): the rate with tbf on each end's interface; loss with nftables `numgen
# random` rules on each end; the delay with netem where the kernel has it, else with Benchmarks/linkshaper (a small
# forwarder between a TAP interface in each namespace that holds every frame for the one-way delay — packet level,
# so both TCP stacks see it).
# Workloads: a random file; 1,000 photos of 200 KiB in one send (and, for comparison, one file of the same bytes);
# a compressible folder (text and logs); 10,000 texts. Tools: share (share send -> share receive), scp and rsync -e
# ssh (aes128-gcm; rsync -z for the folder), Syncthing (scripts/bench_syncthing.py: two devices that know only each
# other, a send-only and a receive-only folder; the file goes as a folder of one), and a reference flow on the same
# link (iperf3). For each: seconds, MiB/s of payload, the fraction of the reference flow's goodput, peak RSS of each
# side, and for share what went on the wire (zstd in transit when it pays). Every clock stops when the
# receiver holds the result (share receive exits after verifying and placing everything; scp and rsync exit after
# the far side confirmed; Syncthing when the receiver reports the whole folder held). Release build; needs root.
# Usage: scripts/bench-links.sh [profile…]      (default: lan wifi wan)
# Settings (environment): ROUNDS (1), FILE_MIB_LAN (1024), FILE_MIB_WIFI (512), FILE_MIB_WAN (128), PHOTOS (1000),
# FOLDER_MIB (512), TEXTS (10000), LIMIT (300: seconds after which an scp or rsync run is given up and shown as such),
# WORKLOADS ("file photos folder texts"), REF_SECONDS (10: how long the reference flow is measured, after 2 s of
# slow start).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
PROFILES=("$@")
[ ${#PROFILES[@]} -gt 0 ] || PROFILES=(lan wifi wan)
ROUNDS=${ROUNDS:-1}
PHOTOS=${PHOTOS:-1000}
FOLDER_MIB=${FOLDER_MIB:-512}
TEXTS=${TEXTS:-10000}
WORKLOADS=" ${WORKLOADS:-file photos folder texts} "
wants() { [[ "$WORKLOADS" == *" $1 "* ]]; }
[ "$(id -u)" -eq 0 ] || { echo "bench-links: network namespaces need root" >&2; exit 77; }
export DEBIAN_FRONTEND=noninteractive
need=()
for p in iperf3 nftables openssh-server openssh-client rsync time syncthing curl; do
  dpkg-query -W -f='${Status}' $p 2>/dev/null | grep -q "ok installed" || need+=($p)
done
if [ ${#need[@]} -gt 0 ]; then apt-get update -qq; apt-get install -y -qq "${need[@]}" > /dev/null; fi
release_build share > /dev/null
BIN=$(bin_dir)/share
WORK=$(mktemp -d /var/tmp/share-links.XXXXXX)
TAG=$(head -c3 /dev/urandom | od -An -tx1 | tr -d ' \n')
A=bla-$TAG B=blb-$TAG
SHAPER=
source scripts/lib-bench.sh
cleanup() {
  page_reporting_restore
  kill $(jobs -p) 2> /dev/null || true
  [ -n "$SHAPER" ] && kill "$SHAPER" 2> /dev/null || true
  [ -f "$WORK/sshd.pid" ] && kill "$(cat "$WORK/sshd.pid")" 2> /dev/null || true
  ip netns del "$A" 2> /dev/null || true
  ip netns del "$B" 2> /dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
gcc -O2 -o "$WORK/linkshaper" Benchmarks/linkshaper/linkshaper.c
inA() { ip netns exec "$A" "$@"; }
inB() { ip netns exec "$B" "$@"; }
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# Does this kernel have netem?
NETEM=no
if ip link add nmp-$TAG type veth peer name nmq-$TAG 2> /dev/null; then
  tc qdisc add dev nmp-$TAG root netem delay 1ms 2> /dev/null && NETEM=yes
  ip link del nmp-$TAG 2> /dev/null || true
fi

# The link for one profile: rate (tc syntax), round trip in µs, loss per mille.
link_up() {
  local rate=$1 rtt=$2 loss=$3 dev
  ip netns add "$A"; ip netns add "$B"
  inA ip link set lo up; inB ip link set lo up
  if [ "$NETEM" = yes ]; then
    ip link add shl0 netns "$A" type veth peer name shl0 netns "$B"
    dev=shl0
  else
    : > "$WORK/shaper.out"  # a fresh log: the last shaper's "ready" must not be read as this one's
    "$WORK/linkshaper" "$A" "$B" $((rtt / 2)) > "$WORK/shaper.out" 2>&1 &
    SHAPER=$!
    await_line "$WORK/shaper.out" ready
    dev=shl0
  fi
  inA ip addr add 10.77.0.1/24 dev $dev; inB ip addr add 10.77.0.2/24 dev $dev
  inA ip link set $dev up; inB ip link set $dev up
  # A queue of at least one round trip (or 20 ms) at the rate, as a router's buffer.
  local limit_ms=$(((rtt / 1000) > 20 ? rtt / 1000 : 20))
  for ns in "$A" "$B"; do
    if [ "$NETEM" = yes ]; then
      ip netns exec "$ns" tc qdisc add dev $dev root handle 1: netem delay $((rtt / 2))us
      ip netns exec "$ns" tc qdisc add dev $dev parent 1: handle 2: tbf rate "$rate" burst 256kb latency ${limit_ms}ms
    else
      ip netns exec "$ns" tc qdisc replace dev $dev root tbf rate "$rate" burst 256kb latency ${limit_ms}ms
    fi
    if [ "$loss" -gt 0 ]; then
      ip netns exec "$ns" nft -f - <<NFT
table inet loss {
  chain out {
    type filter hook output priority 0;
    oifname "$dev" numgen random mod 1000 < $loss drop
  }
}
NFT
    fi
  done
}

link_down() {
  kill $(jobs -p) 2> /dev/null || true
  [ -n "$SHAPER" ] && { kill "$SHAPER" 2> /dev/null || true; wait "$SHAPER" 2> /dev/null || true; }
  SHAPER=
  [ -f "$WORK/sshd.pid" ] && { kill "$(cat "$WORK/sshd.pid")" 2> /dev/null || true; rm -f "$WORK/sshd.pid"; }
  ip netns del "$A" 2> /dev/null || true
  ip netns del "$B" 2> /dev/null || true
}

# sshd in B; every remote command runs under /usr/bin/time so the receiving side's peak RSS is known.
sshd_up() {
  bench_ssh_config 10.77.0.2 2222 "Ciphers aes128-gcm@openssh.com
Subsystem sftp /usr/lib/openssh/sftp-server
ForceCommand $WORK/ssh/measured"
  # scp speaks SFTP (OpenSSH 9): the subsystem arrives as its name.
  cat > "$WORK/ssh/measured" <<'SH'
#!/bin/sh
case "$SSH_ORIGINAL_COMMAND" in
  sftp|internal-sftp|"") command=/usr/lib/openssh/sftp-server ;;
  *) command=$SSH_ORIGINAL_COMMAND ;;
esac
exec /usr/bin/time -f %M -o "$(dirname "$0")/../remote.rss" /bin/sh -c "$command"
SH
  chmod +x "$WORK/ssh/measured"
  inB /usr/sbin/sshd -f "$WORK/ssh/config"
  SSHOPTS="-i $WORK/ssh/id -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o BatchMode=yes -o LogLevel=ERROR -c aes128-gcm@openssh.com"
  for _ in $(seq 600); do inA ssh $SSHOPTS -p 2222 root@10.77.0.2 true 2> /dev/null && break; sleep 0.1; done
}

# Two share devices trusting each other.
S=$WORK/sender R=$WORK/receiver
$BIN id --config "$S" --name links-sender > /dev/null; $BIN id --config "$R" --name links-receiver > /dev/null
$BIN trust add --config "$S" "$($BIN id --config "$R" | tail -1)" --name receiver --team 2> /dev/null
$BIN trust add --config "$R" "$($BIN id --config "$S" | tail -1)" --name sender --team 2> /dev/null

# The workloads.
SRC=$WORK/src; mkdir -p "$SRC/photos" "$SRC/texts"
for i in $(seq -w 1 "$PHOTOS"); do head -c $((200 << 10)) /dev/urandom > "$SRC/photos/IMG_$i.jpg"; done
cat "$SRC"/photos/*.jpg > "$SRC/photos-as-one.bin"
wants folder && python3 - "$SRC/folder" "$FOLDER_MIB" <<'PY'
import os, random, sys
root, mib = sys.argv[1], int(sys.argv[2])
random.seed(7)
words = ["".join(random.choice("etaoinshrdlucmfwypvbgkjqxz") for _ in range(random.randint(2, 9))) for _ in range(4000)]
os.makedirs(root, exist_ok=True)
written, n = 0, 0
while written < mib << 20:
    n += 1
    kind = n % 3
    path = os.path.join(root, f"dir{n % 40}", f"file{n}." + ("log" if kind == 0 else "txt" if kind == 1 else "csv"))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    lines = []
    for i in range(random.randint(200, 4000)):
        if kind == 0:
            lines.append(f"2026-11-24T07:{i % 60:02d}:{i % 59:02d}Z info share.agent: received peer=host{random.randint(1, 40)} bytes={random.randint(1, 10**6)} item={random.choice(words)}")
        elif kind == 1:
            lines.append(" ".join(random.choice(words[: random.randint(100, 4000)]) for _ in range(random.randint(6, 16))) + ".")
        else:
            lines.append(",".join(str(random.randint(0, 10**4)) for _ in range(8)))
    data = ("\n".join(lines) + "\n").encode()
    open(path, "wb").write(data)
    written += len(data)
PY
# The same texts for share as one list (each line one text item; ten thousand --text arguments would measure the
# argument parser, not the transfer).
: > "$WORK/texts.lines"
for i in $(seq 1 "$TEXTS"); do
  echo "note $i: back at $((i % 24)):$((i % 60))" | tee -a "$WORK/texts.lines" > "$SRC/texts/note-$i.txt"
done
PHOTO_BYTES=$(du -sb "$SRC/photos" | awk '{print $1}')
FOLDER_BYTES=$(du -sb "$SRC/folder" 2> /dev/null | awk '{print $1}' || echo 0)
TEXT_BYTES=$(du -sb --apparent-size "$SRC/texts" | awk '{print $1}')

# One run: prints "seconds sender-rss-kib receiver-rss-kib" having checked the delivered result.
DST=$WORK/dst
fresh() { rm -rf "$DST"; mkdir -p "$DST"; sync; echo 1 > /proc/sys/vm/drop_caches 2> /dev/null || true; }
run_share() { # what… (the arguments of share send)
  fresh
  : > "$WORK/recv.out"  # a fresh log: the last run's port line must not be read as this one's
  inB /usr/bin/time -f %M -o "$WORK/recv.rss" $BIN receive --config "$R" --port 0 --listen 10.77.0.2 --into "$DST" \
    --timeout 3600 > "$WORK/recv.out" 2>&1 &
  local rpid=$!
  local port; port=$(receiver_port "$WORK/recv.out" $rpid)
  local start; start=$(date +%s.%N)
  inA /usr/bin/time -f %M -o "$WORK/send.rss" $BIN send --config "$S" --to 10.77.0.2:$port --json "$@" > "$WORK/send.out" 2>&1 ||
    { cat "$WORK/send.out" >&2; return 1; }
  wait $rpid
  # What went on the wire, as a percentage of the payload (zstd in transit when it pays).
  local sent wire
  sent=$(grep -o '"bytesSent":[0-9]*' "$WORK/send.out" | tail -1 | cut -d: -f2)
  wire=$(grep -o '"wireBytes":[0-9]*' "$WORK/send.out" | tail -1 | cut -d: -f2)
  echo "$(echo "$(date +%s.%N) - $start" | bc) $(cat "$WORK/send.rss") $(cat "$WORK/recv.rss") $((wire * 100 / (sent > 0 ? sent : 1)))"
}
run_ssh() { # command…   (given up after LIMIT seconds: scp over a long round trip takes several per small file)
  fresh
  local start; start=$(date +%s.%N)
  if ! inA /usr/bin/time -f %M -o "$WORK/send.rss" timeout "$LIMIT" "$@" > /dev/null 2>&1; then
    echo "inf 0 0"
    return
  fi
  echo "$(echo "$(date +%s.%N) - $start" | bc) $(cat "$WORK/send.rss") $(cat "$WORK/remote.rss")"
}
run_syncthing() { # folder, where it lands (given up after LIMIT seconds like scp and rsync)
  fresh
  python3 scripts/bench_syncthing.py "$WORK" "$A" 10.77.0.1 "$B" 10.77.0.2 "$1" "$2" "$LIMIT"
}
same() { # what was sent, where it landed (nothing to check after a run given up)
  [ "$LAST" = inf ] && return 0
  if [ -d "$1" ]; then diff -rq "$1" "$2" > /dev/null; else cmp -s "$1" "$2"; fi || { echo "a tool delivered something else than $1" >&2; exit 1; }
}

declare -A T RS RR WIRE
LIMIT=${LIMIT:-300}
REF_SECONDS=${REF_SECONDS:-10}
record() { # key "seconds srss rrss"
  read -r t s r w <<< "$2"
  LAST=$t
  T[$1]="${T[$1]:-} $t"; RS[$1]=$s; RR[$1]=$r; WIRE[$1]=${w:-}
}

report_row() { # profile workload tool bytes
  local key=$1,$2,$3 bytes=$4
  [ -n "${T[$key]:-}" ] || return 0
  local t; t=$(printf '%s\n' ${T[$key]} | median)
  python3 - "$2" "$3" "$t" "$bytes" "${REF[$1]}" "${RS[$key]}" "${RR[$key]}" "$LIMIT" "${WIRE[$key]:-}" <<'PY'
import sys
workload, tool, t, size, ref, srss, rrss, limit, wire = sys.argv[1:]
if t == "inf":
    print(f"  {workload:<18} {tool:<10} {'> ' + limit:>9} {'-':>9} {'-':>10}")
    sys.exit()
t, size, ref = float(t), int(size), float(ref)
rate = size / t / 1048576
wire = f"   wire {wire} %" if wire else ""
print(f"  {workload:<18} {tool:<10} {t:>9.2f} {rate:>9.1f} {rate / ref * 100:>8.0f} % {int(srss) >> 10:>9} {int(rrss) >> 10:>9}{wire}")
PY
}

declare -A REF SETTINGS
SETTINGS[lan]="1gbit 500 0 ${FILE_MIB_LAN:-1024}"
SETTINGS[wifi]="300mbit 6000 1 ${FILE_MIB_WIFI:-512}"
SETTINGS[wan]="50mbit 40000 0 ${FILE_MIB_WAN:-128}"
if [ "$NETEM" = yes ]; then HOW="netem delay"; else HOW="linkshaper (TAP forwarder holding each frame for RTT/2; no netem in this kernel)"; fi
echo "bench-links: rate with tbf on each end; loss with nftables numgen random; delay with $HOW; $ROUNDS round(s)"
page_reporting_hold

for profile in "${PROFILES[@]}"; do
  read -r rate rtt loss file_mib <<< "${SETTINGS[$profile]}"
  link_up "$rate" "$rtt" "$loss"
  sshd_up
  head -c $((file_mib << 20)) /dev/urandom > "$SRC/file.bin"
  # Syncthing syncs folders: the same file as a folder of one.
  rm -rf "$SRC/one"; mkdir -p "$SRC/one"; ln "$SRC/file.bin" "$SRC/one/file.bin"
  # The reference flow: one TCP stream on the same link, its goodput after slow start.
  inB iperf3 -s -1 -D -B 10.77.0.2 > /dev/null
  sleep 0.3
  REF[$profile]=$(inA iperf3 -c 10.77.0.2 -t "$REF_SECONDS" -O 2 -J | python3 -c 'import json,sys; print(json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"] / 8 / 1048576)')
  echo
  echo "== $profile: $rate, $((rtt / 1000)).$((rtt % 1000 / 100)) ms round trip, loss $loss/1000 each way; reference flow (iperf3) $(printf '%.1f' "${REF[$profile]}") MiB/s"
  for round in $(seq "$ROUNDS"); do
    if wants file; then
    record "$profile,file,share" "$(run_share "$SRC/file.bin")"; same "$SRC/file.bin" "$DST/file.bin"
    record "$profile,file,scp" "$(run_ssh scp -q $SSHOPTS -P 2222 "$SRC/file.bin" root@10.77.0.2:"$DST/")"; same "$SRC/file.bin" "$DST/file.bin"
    record "$profile,file,rsync" "$(run_ssh rsync -a -e "ssh $SSHOPTS -p 2222" "$SRC/file.bin" root@10.77.0.2:"$DST/")"; same "$SRC/file.bin" "$DST/file.bin"
    record "$profile,file,syncthing" "$(run_syncthing "$SRC/one" "$DST/one")"; same "$SRC/one" "$DST/one"
    fi
    if wants photos; then
    record "$profile,photos,share" "$(run_share "$SRC"/photos/*.jpg)"
    for f in $(ls "$SRC/photos" | sed -n '1p;$p'); do same "$SRC/photos/$f" "$DST/$f"; done
    [ "$(ls "$DST" | wc -l)" -eq "$PHOTOS" ] || { echo "share delivered $(ls "$DST" | wc -l) photos" >&2; exit 1; }
    record "$profile,photos as one file,share" "$(run_share "$SRC/photos-as-one.bin")"
    record "$profile,photos,scp" "$(run_ssh scp -q -r $SSHOPTS -P 2222 "$SRC/photos" root@10.77.0.2:"$DST/")"; same "$SRC/photos" "$DST/photos"
    record "$profile,photos,rsync" "$(run_ssh rsync -a -e "ssh $SSHOPTS -p 2222" "$SRC/photos" root@10.77.0.2:"$DST/")"; same "$SRC/photos" "$DST/photos"
    record "$profile,photos,syncthing" "$(run_syncthing "$SRC/photos" "$DST/photos")"; same "$SRC/photos" "$DST/photos"
    fi
    if wants folder; then
    record "$profile,folder,share" "$(run_share "$SRC/folder")"; same "$SRC/folder" "$DST/folder"
    record "$profile,folder,scp" "$(run_ssh scp -q -r $SSHOPTS -P 2222 "$SRC/folder" root@10.77.0.2:"$DST/")"; same "$SRC/folder" "$DST/folder"
    record "$profile,folder,rsync -z" "$(run_ssh rsync -a -z -e "ssh $SSHOPTS -p 2222" "$SRC/folder" root@10.77.0.2:"$DST/")"; same "$SRC/folder" "$DST/folder"
    record "$profile,folder,syncthing" "$(run_syncthing "$SRC/folder" "$DST/folder")"; same "$SRC/folder" "$DST/folder"
    fi
    if wants texts; then
    record "$profile,texts,share" "$(run_share --text-lines "$WORK/texts.lines")"
    n=$(grep -o 'note [0-9]*: back' "$WORK/recv.out" | sort -u | wc -l)  # a received text is printed
    [ "$n" -eq "$TEXTS" ] || { echo "share delivered $n texts of $TEXTS" >&2; exit 1; }
    record "$profile,texts,scp" "$(run_ssh scp -q -r $SSHOPTS -P 2222 "$SRC/texts" root@10.77.0.2:"$DST/")"; same "$SRC/texts" "$DST/texts"
    record "$profile,texts,rsync" "$(run_ssh rsync -a -e "ssh $SSHOPTS -p 2222" "$SRC/texts" root@10.77.0.2:"$DST/")"; same "$SRC/texts" "$DST/texts"
    record "$profile,texts,syncthing" "$(run_syncthing "$SRC/texts" "$DST/texts")"; same "$SRC/texts" "$DST/texts"
    fi
  done
  printf '  %-18s %-10s %9s %9s %10s %9s %9s\n' workload tool seconds "MiB/s" "of ref." "RSS MiB snd" "rcv"
  for tool in share scp rsync syncthing; do report_row "$profile" file "$tool" $((file_mib << 20)); done
  for tool in share scp rsync syncthing; do report_row "$profile" photos "$tool" "$PHOTO_BYTES"; done
  report_row "$profile" "photos as one file" share "$PHOTO_BYTES"
  for tool in share scp "rsync -z" syncthing; do report_row "$profile" folder "$tool" "$FOLDER_BYTES"; done
  for tool in share scp rsync syncthing; do report_row "$profile" texts "$tool" "$TEXT_BYTES"; done
  if wants photos; then
    photos=$(printf '%s\n' ${T[$profile,photos,share]} | median)
    one=$(printf '%s\n' ${T[$profile,photos as one file,share]} | median)
    echo "  $PHOTOS photos take $(echo "scale=2; $photos / $one" | bc)x the time of the same bytes as one file"
  fi
  link_down
done
