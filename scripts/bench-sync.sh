#!/usr/bin/env bash
# Shared folders on three devices, every tool in the same run (scripts/bench_sync.py does the measuring):
#   share       three agents; the first device shares a folder (share sync add), the other two take it unasked
#               (agent.json's folders.autoAccept), then the changes below are made on the first device
#   share send  the same folder sent by the first device to the other two at once (the first sync's baseline)
#   rsync -a    over ssh (aes128-gcm) from the first device to the other two at once, --delete; -az too for updates
#   Syncthing   Debian's, three instances that know each other at fixed addresses, one send-receive folder, the
#               watcher on with its default 10 s delay; a second update with a rescan asked for at once
# Phases: the first sync of FILES random files (1–20 KiB, 100 to a folder); an update of 100 edits (1 KiB rewritten
# in place), 50 renames and 20 removals; 50 renames alone (bytes per rename); one 8 KiB file saved (seconds until
# both others hold it); METADATA (1,000) symbolic links, empty folders and files made executable at once (seconds
# and bytes beside Syncthing with a rescan asked for at once). On loopback also: MANY small files' first sync (share beside rsync -a), the agents idle
# with them (CPU over IDLE seconds, RSS), and a full rescan of them unchanged (share sync rescan).
# Links (PROFILES): loopback (one network namespace, counted on lo) and 100mbit (a namespace per device, a link
# between each two, 100 Mbit/s with tbf at each end and 1 ms each way by Benchmarks/linkshaper; counted on each
# link's ends). Every clock stops when the devices hold the new state, checked on disk. Everything is written to a
# fresh ext4 file system mounted from an image (FRESH_FS=0: /var/tmp as it is).
# Release build; needs root (namespaces). Usage: scripts/bench-sync.sh
# Settings (environment): FILES (5000), MANY (100000), PROFILES ("loopback 100mbit"), ROUNDS (1; medians when more),
# SYNCTHING (1), LIMIT (600 s per wait), IDLE (20 s), METADATA (1000), PHASES ("send sync rsync syncthing many"),
# AGENT_LOG (the agents' log level), KEEP_LOGS (a folder the agents' logs are copied to at the end), MARKS (a file
# each measured phase's start and end are added to, as seconds since 1970, to line a profile up with the phases),
# SETTLE_TRACE (1: each status poll of a share sync phase on stderr, how long a status takes once in step, and each
# agent's CPU seconds in the first sync),
# SHARE_BIN (another share binary to measure, e.g. an earlier build's, instead of this tree's release build).
# SHARE_SMOKE=1: the debug build, 200 and 2,000 files, loopback, no Syncthing.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
[ "$(id -u)" -eq 0 ] || { echo "bench-sync: network namespaces need root" >&2; exit 77; }
export DEBIAN_FRONTEND=noninteractive
need=()
for p in openssh-server openssh-client rsync syncthing gcc; do
  dpkg-query -W -f='${Status}' $p 2>/dev/null | grep -q "ok installed" || need+=($p)
done
if [ ${#need[@]} -gt 0 ]; then apt-get update -qq; apt-get install -y -qq "${need[@]}" > /dev/null; fi
[ -n "${SHARE_BIN:-}" ] || release_build share > /dev/null
BIN=${SHARE_BIN:-$(bin_dir)/share}
WORK=$(mktemp -d /var/tmp/share-sync.XXXXXX)
source scripts/lib-bench.sh
IMAGE=
cleanup() {
  kill $(jobs -p) 2> /dev/null || true
  if [ -n "${KEEP_LOGS:-}" ]; then
    mkdir -p "$KEEP_LOGS"
    find "$WORK" -name 'agent*.log' 2> /dev/null | while read -r f; do
      cp "$f" "$KEEP_LOGS/$(echo "${f#"$WORK"/}" | tr / _)"
    done
  fi
  for pid in "$WORK"/sshd*.pid; do [ -f "$pid" ] && kill "$(cat "$pid")" 2> /dev/null || true; done
  if [ -n "$IMAGE" ]; then umount "$WORK" 2> /dev/null || umount -l "$WORK" 2> /dev/null || true; rm -f "$IMAGE"; fi
  rm -rf "$WORK"
}
trap cleanup EXIT
# Every tool works on a fresh ext4 file system (with a journal, as mkfs makes it), so that what ran on this machine
# before (thousands of files deleted a minute ago cost every file created now on a file system without a journal)
# weighs on none of them. FRESH_FS=0 works in /var/tmp as it is.
if [ -z "${SHARE_SMOKE:-}" ] && [ "${FRESH_FS:-1}" = 1 ]; then
  IMAGE=$WORK.img
  truncate -s 32G "$IMAGE"
  mkfs.ext4 -q -F -N 3000000 "$IMAGE"
  mount -o loop "$IMAGE" "$WORK"
  echo "work: a fresh ext4 file system of 32 GiB (sparse, on $(df --output=source /var/tmp | tail -1))"
fi
gcc -O2 -o "$WORK/linkshaper" Benchmarks/linkshaper/linkshaper.c
bench_ssh_config 127.0.0.1 2222 "Ciphers aes128-gcm@openssh.com"
python3 scripts/bench_sync.py "$WORK" "$BIN"
