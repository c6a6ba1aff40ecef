#!/usr/bin/env bash
# Folder benchmark, all in one run (release build). The tree: 2,000 files of 4 KiB in 20 folders plus three 50 MiB
# files, random bytes.
#   bundling: share's tar stream (share-bench-archive DIR) | tar -cf - DIR | bsdtar -cf - DIR | zstd -1
#   transfer over loopback: share send DIR | scp -r | rsync -a -e ssh
# Every output goes through a pipe (GNU tar skips reading files when it writes straight to /dev/null).
# Usage: scripts/bench-folder.sh [rounds]     (default 5; medians are reported)
# Settings (environment): DIRS (20), FILES (100 per folder), VIDEO_MIB (50; three such files).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
ROUNDS=${1:-5}
release_build share >/dev/null
release_build share-bench-archive >/dev/null
BIN=$(bin_dir)/share
BUNDLE=$(bin_dir)/share-bench-archive
WORK=$(mktemp -d /var/tmp/share-bench.XXXXXX)
source scripts/lib-bench.sh
bench_install
trap bench_cleanup EXIT

DIRS=${DIRS:-20} FILES=${FILES:-100} VIDEO_MIB=${VIDEO_MIB:-50}
SRC=$WORK/tree
for d in $(seq -w 1 "$DIRS"); do
  mkdir -p "$SRC/dir$d"
  for f in $(seq -w 1 "$FILES"); do head -c 4096 /dev/urandom > "$SRC/dir$d/file$f.bin"; done
done
for n in 1 2 3; do head -c $((VIDEO_MIB << 20)) /dev/urandom > "$SRC/video$n.mp4"; done
BYTES=$(du -sb "$SRC" | awk '{print $1}')
bench_devices
bench_sshd

settle() { rm -rf "$WORK"/dst-*; mkdir -p "$WORK/dst-share" "$WORK/dst-scp" "$WORK/dst-rsync"; sync; cat "$SRC"/*.mp4 > /dev/null; }
declare -A RESULT
time_rounds() { # name command...   (BUNDLE_ROUNDS when set: bundling runs take ~0.1 s, so they get more rounds)
  local name=$1; shift
  local times=()
  for _ in $(seq "${BUNDLE_ROUNDS:-$ROUNDS}"); do
    settle
    local start end
    start=$(date +%s.%N); "$@"; end=$(date +%s.%N)
    times+=("$(echo "$end - $start" | bc)")
  done
  RESULT[$name]=$(printf '%s\n' "${times[@]}" | median)
}
same_tree() { diff -r "$SRC" "$1" > /dev/null || { echo "$2 delivered a different tree" >&2; exit 1; }; }

echo "tree: $((DIRS * FILES)) files of 4 KiB + 3 files of $VIDEO_MIB MiB ($((BYTES >> 20)) MiB), median wall time of $((ROUNDS * 3)) bundling and $ROUNDS transfer rounds"
BUNDLE_ROUNDS=$((ROUNDS * 3))
time_rounds bundle-share bash -c "'$BUNDLE' '$SRC' | cat > /dev/null"
time_rounds bundle-tar bash -c "tar -cf - -C '$SRC' . | cat > /dev/null"
time_rounds bundle-bsdtar-zstd bash -c "bsdtar -cf - -C '$SRC' . | zstd -1 -q -c | cat > /dev/null"
unset BUNDLE_ROUNDS

share_send() {
  BIN="/usr/bin/time -f %M -a -o $WORK/recv.rss $BIN" bench_receive "$WORK/dst-share"
  /usr/bin/time -f %M -a -o "$WORK/send.rss" $BIN send --config "$S" --to "127.0.0.1:$PORT" "$SRC" --quiet
  wait "$RPID"
}
time_rounds share share_send
same_tree "$WORK/dst-share/tree" share
time_rounds scp scp -q -r $SSHOPTS -P "$SSHPORT" "$SRC" root@127.0.0.1:"$WORK/dst-scp/"
same_tree "$WORK/dst-scp/tree" scp
time_rounds rsync rsync -a -e "$SSH" "$SRC" root@127.0.0.1:"$WORK/dst-rsync/"
same_tree "$WORK/dst-rsync/tree" rsync

mibs() { python3 -c "print(f'{$BYTES/$1/1048576:.0f}')"; }
printf '\n%-34s %10s %10s\n' "bundling (stream to a pipe)" "seconds" "MiB/s"
for name in bundle-share bundle-tar bundle-bsdtar-zstd; do
  printf '%-34s %10.3f %10s\n' "$name" "${RESULT[$name]}" "$(mibs "${RESULT[$name]}")"
done
printf '\n%-34s %10s %10s %10s\n' "folder transfer over loopback" "seconds" "MiB/s" "÷ share"
for name in share scp rsync; do
  printf '%-34s %10.3f %10s %10.2f\n' "$name" "${RESULT[$name]}" "$(mibs "${RESULT[$name]}")" \
    "$(python3 -c "print(${RESULT[$name]}/${RESULT[share]})")"
done
printf '\npeak RSS of share during the folder transfers (KiB): sender %s, receiver %s\n' \
  "$(sort -n "$WORK/send.rss" | tail -1)" "$(sort -n "$WORK/recv.rss" | tail -1)"
