#!/usr/bin/env bash
# Two builds of share side by side on loopback, interleaved round by round (A, B, A, B …), so a busy moment of the
# machine falls on both: a file sent with `share send` to `share receive`, the clock stopped when the receiver has
# moved the verified file into place (its process has exited). Reports each round and the medians.
# Usage: scripts/bench-compare.sh BIN-A BIN-B [MiB] [rounds]      (default 1024 MiB, 5 rounds)
set -euo pipefail
source "$(dirname "$0")/lib-bench.sh"
A=$1; B=$2; MIB=${3:-1024}; ROUNDS=${4:-5}
WORK=$(mktemp -d /var/tmp/share-compare.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$WORK" || true' EXIT
head -c $((MIB << 20)) /dev/urandom > "$WORK/payload.bin"
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
devices() { # BIN DIR
  "$1" id --config "$2/s" --name sender >/dev/null; "$1" id --config "$2/r" --name receiver >/dev/null
  "$1" trust add --config "$2/s" "$("$1" id --config "$2/r" | tail -1)" --name receiver --team >/dev/null
  "$1" trust add --config "$2/r" "$("$1" id --config "$2/s" | tail -1)" --name sender --team >/dev/null
}
devices "$A" "$WORK/a"; devices "$B" "$WORK/b"
once() { # BIN DIR → seconds
  local bin=$1 dir=$2 dst=$2/dst
  rm -rf "$dst"; mkdir -p "$dst"
  sync; echo 1 > /proc/sys/vm/drop_caches 2>/dev/null || true; cat "$WORK/payload.bin" > /dev/null
  : > "$dir/recv.out"  # a fresh log: the last run's port line must not be read as this one's
  "$bin" receive --config "$dir/r" --port 0 --listen 127.0.0.1 --into "$dst" --quiet > "$dir/recv.out" 2>&1 &
  local rpid=$!
  local port; port=$(receiver_port "$dir/recv.out" $rpid)
  local start end
  start=$(date +%s.%N)
  "$bin" send --config "$dir/s" --to "127.0.0.1:$port" "$WORK/payload.bin" --quiet
  wait $rpid
  end=$(date +%s.%N)
  cmp -s "$WORK/payload.bin" "$dst/payload.bin" || { echo "$bin delivered a different file" >&2; exit 1; }
  echo "$end - $start" | bc
}
ta=(); tb=()
for round in $(seq "$ROUNDS"); do
  a=$(once "$A" "$WORK/a"); b=$(once "$B" "$WORK/b")
  ta+=("$a"); tb+=("$b")
  printf 'round %d: A %.2f s (%.0f MiB/s)   B %.2f s (%.0f MiB/s)\n' "$round" "$a" "$(echo "$MIB / $a" | bc -l)" \
    "$b" "$(echo "$MIB / $b" | bc -l)"
done
ma=$(printf '%s\n' "${ta[@]}" | median); mb=$(printf '%s\n' "${tb[@]}" | median)
printf 'median: A %.0f MiB/s   B %.0f MiB/s   B/A %.3f\n' "$(echo "$MIB / $ma" | bc -l)" "$(echo "$MIB / $mb" | bc -l)" \
  "$(echo "$ma / $mb" | bc -l)"
