#!/usr/bin/env bash
# Every script of the repository in a smoke mode, so that none can rot: each runs on the test command's debug build
# (SHARE_SMOKE=1: nothing is built) at tiny sizes, within a time bound, and what it reports is checked — digests and
# counts as the script checks them, and every row of its table. The test command runs the demo, the package's layout
# and the generated files' check after the suite; CI runs all (scripts/ci-checks.sh).
# Scripts the test command or CI run themselves (test.sh, ci-checks.sh, setup.sh, run-suite.py,
# check_reliability.py, fuzz.sh, sanitizers.sh, budgets.sh) and the libraries the others source (lib-bench.sh,
# lib-netns.sh) are not run again; a
# script that is neither smoked here nor listed so fails the run, so a new script cannot be left out.
# Scripts that need network namespaces (bench-relay, bench-links, the demo's last step) need root.
# Usage: scripts/smoke.sh [name…]      (default: all; logs in ${TMPDIR:-/tmp}/share-smoke/)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
export SHARE_SMOKE=1
LOGS=${TMPDIR:-/tmp}/share-smoke
mkdir -p "$LOGS"
ONLY=" $* "
started=$SECONDS
failures=()

# Every line of `expected` (extended regular expressions) must match some line of the log.
expect() { # log pattern…
  local log=$1 missing=0
  shift
  for pattern in "$@"; do
    grep -Eq -- "$pattern" "$log" || { echo "   missing from the output: $pattern"; missing=1; }
  done
  return $missing
}

# smoke NAME LIMIT COMMAND… — runs the command (bounded), then check_NAME on its log.
smoke() {
  local name=$1 limit=$2
  shift 2
  [ "$ONLY" = "  " ] || [[ "$ONLY" == *" $name "* ]] || return 0
  local log=$LOGS/$name.log start=$SECONDS status=0
  timeout --kill-after=10 "$limit" "$@" > "$log" 2>&1 || status=$?
  if [ "$status" -eq 0 ] && "check_${name//-/_}" "$log"; then
    echo "✔ smoke $name ($((SECONDS - start)) s)"
  else
    [ "$status" -eq 124 ] && echo "   $name did not finish within $limit s"
    echo "✘ smoke $name (exit $status after $((SECONDS - start)) s); the end of $log:"
    tail -25 "$log" | sed 's/^/   | /'
    failures+=("$name")
  fi
}

NUM='[0-9.]+'
check_bench_transfer() {
  expect "$1" "^share +$NUM +$NUM$" "^scp \(aes128-gcm\) +$NUM +$NUM$" "^rsync -e ssh \(aes128-gcm\) +$NUM +$NUM$" \
    "^C pipe, plain, 1 thread per end +$NUM +$NUM$" "^C pipe, read-ahead, 1 thread +$NUM +$NUM$" \
    "^C pipe, read-ahead, 2 threads +$NUM +$NUM$" "^C pipe, 1 thread, file sized first +$NUM +$NUM$" \
    "^C pipe, 2 threads, file sized first +$NUM +$NUM$" "^share: [0-9]+% of the strongest C pipe" \
    "^one busy core: share keeps [0-9]+%" "^ +4 MiB file +[0-9]+ +[0-9]+$" "^ +8 MiB file +[0-9]+ +[0-9]+$" \
    "resumed file identical: yes|finished before it could be interrupted"
}
check_bench_agent() {
  expect "$1" "^0 sends failed, 0 files differ or are missing" "^200 of 200 kept in the history" \
    "^agent RSS \(KiB\): start [0-9]+, after 3 files [0-9]+, after 200 texts [0-9]+, after a second wave [0-9]+; peak [0-9]+$"
}
check_bench_tls() {
  expect "$1" "^handshake\+hello\+ping over 20 connections: median $NUM ms, p99 $NUM ms" \
    "^share stream: 8 MiB in $NUM s" "^openssl s_client -> s_server: 8 MiB in $NUM s"
}
check_bench_folder() {
  expect "$1" "^bundle-share +$NUM +[0-9]+$" "^bundle-tar +$NUM +[0-9]+$" "^bundle-bsdtar-zstd +$NUM +[0-9]+$" \
    "^share +$NUM +[0-9]+ +1.00$" "^scp +$NUM +[0-9]+ +$NUM$" "^rsync +$NUM +[0-9]+ +$NUM$" \
    "^peak RSS of share during the folder transfers \(KiB\): sender [0-9]+, receiver [0-9]+"
}
check_bench_compare() { expect "$1" "^round 1: A $NUM s" "^median: A [0-9]+ MiB/s +B [0-9]+ MiB/s +B/A $NUM"; }
check_bench_watch() {
  expect "$1" "received 30 of 30 in" "3 sends in $NUM s, 3 arrived; peak RSS per send" "^watch peak RSS: [0-9]+ KiB"
}
check_bench_wormhole() {
  local rows=()
  for tool in "share trusted \(send --to\) +direct" "share -> share by code +direct" "share -> share by code +relay" \
    "wormhole -> wormhole +direct" "wormhole -> wormhole +relay" "wormhole -> share +direct" "wormhole -> share +relay" \
    "share -> wormhole +direct" "share -> wormhole +relay"; do
    rows+=("^$tool +$NUM +$NUM +")
  done
  expect "$1" "${rows[@]}" "^share by code / share trusted, direct: $NUM" \
    "^share by code / wormhole -> wormhole, direct: $NUM; through the relay: $NUM"
}
check_bench_localsend() {
  expect "$1" "^localsendd -> share agent +$NUM +$NUM +$NUM$" "^localsendd -> localsendd +$NUM +$NUM +$NUM$" \
    "^share send -> localsendd +$NUM +$NUM +$NUM$" "^into share / into localsendd, from the same phone: $NUM"
}
check_bench_relay() {
  expect "$1" "^direct +$NUM +$NUM +$NUM +[0-9]+$" "^relay +$NUM +$NUM +$NUM +[0-9]+$" "^relay/direct throughput: $NUM"
}
check_bench_links() {
  local rows=()
  for workload in "photos " "texts  "; do
    for tool in share scp rsync syncthing; do rows+=("^  $workload +$tool +$NUM +"); done
  done
  expect "$1" "^== lan: " "${rows[@]}" "^  photos as one file share" "10 photos take $NUM"x
}
check_bench_delta() {
  local rows=()
  for link in loopback 100mbit; do
    for edit in append insert scattered block folder log; do
      rows+=("^$link +$edit +share +[0-9]+ +$NUM$" "^$link +$edit +rsync +[0-9]+ +$NUM$"
        "^$link +$edit +rsync-z +[0-9]+ +$NUM$" "^$link $edit: share/rsync bytes $NUM, time $NUM.*share/rsync -z bytes $NUM")
    done
  done
  expect "$1" "${rows[@]}" "^16 MiB file, one 1 MiB block changed: [0-9]+ bytes, $NUM % of its whole transfer" \
    "^peak RSS during that delta \(KiB\): send [0-9]+, receive [0-9]+" \
    "^index of a 64 MiB basis on one core: $NUM GB/s"
}
check_demo() {
  local steps=("^== 1\. a text" "^== 4\. a large file" "^== 5\. a folder" "^== 7\. the agents" "^== 8\. a watch"
    "the pending offer with its preview: " "^== 7d\. a folder kept the same on three devices" \
    "^ laptop \| notes.md: to do: figures, then the bibliography" "^  phone \| notes.md: to do: figures, then the bibliography" \
    "^ +desk \| +conflict: .*one.md" "on every device: .*one\.sync-conflict-" "^== 8b\. a send by code" "sent 2 of 2 items to visitor by code" "the wormhole command holds the same slides.pdf")
  [ "$(id -u)" -eq 0 ] && steps+=("^== 8c\. a phone with LocalSend" "the studio's inbox holds the same IMG_0001.jpg"
    "sent 1 file\(s\) and 1 text\(s\) to phone by LocalSend" "^== 9\. beyond the LAN" "via relay 203\.0\.113\.10")
  expect "$1" "${steps[@]}"
}
check_faults() {
  expect "$1" "^faults survived on 4 MiB: " "^kills survived on 4 MiB: " "^resume of a file on 4 MiB: " "^resume of a folder on 4 MiB: " \
    "^resume of a delta on 4 MiB: " "^a folder sent again after a kill at placed: [0-9]+ bytes crossed" \
    "Test run with 4 tests? in [0-9]+ suites? passed"
}
check_package_deb() {
  expect "$1" "^package: .*/share_[0-9.]+_amd64\.deb$" "^size: [0-9]+ KiB; installed size: [0-9]+ KiB$" \
    "^depends: .*libarchive13.*libssl3.*libzstd1" "^contents: [0-9]+ entries, every expected file there$"
}
check_bench_flood() {
  expect "$1" "^trusted device: share ping +$NUM +ok$" "^trusted device: send 4 MiB +$NUM +ok$" \
    "^new LocalSend device: /info +$NUM +ok$" "^the owner's page: /api/state +$NUM +ok$" "^share status +$NUM +ok$" \
    "^the 4 MiB arrived identical$" "^agent peak RSS: [0-9]+ KiB"
}
check_sync_check() {
  expect "$1" "^3 devices: 100 schedules from seed 1, 0 failed" "^4 devices: 100 schedules from seed 1, 0 failed" \
    "^sequential: 100 schedules from seed 1, 0 failed, 0 conflict copies"
}
check_bench_sync() {
  local rows=() phase tool
  for row in "first|share send" "first|share sync" "update|share sync" "5 renames|share sync" "one edit|share sync" \
    "first|rsync -a" "update|rsync -a" "update|rsync -az" "first, 2000 files|share sync" "first, 2000 files|rsync -a"; do
    phase=${row%%|*} tool=${row#*|}
    rows+=("^loopback +$phase +$tool +$NUM +[0-9]+ +$NUM +([0-9]+|-)$")
  done
  expect "$1" "${rows[@]}" "^idle with 2000 files: agent CPU $NUM, $NUM, $NUM %, RSS [0-9]+, [0-9]+, [0-9]+ KiB$" \
    "^full rescan of 2000 unchanged files: $NUM s" "^loopback first sync: ${NUM}x share send" \
    "^loopback update: [0-9]+ bytes, ${NUM}x rsync -az's" "^loopback a rename: [0-9]+ bytes" \
    "^loopback one edit on both others after $NUM s" "^loopback first sync of 2000 files: ${NUM}x rsync -a"
}
check_gen_builder() { expect "$1" "is current"; }
check_gen_system_types() { expect "$1" "^[0-9]+ types, [0-9]+ static members$"; }

smoke bench-transfer 120 bash scripts/bench-transfer.sh 8 1
smoke bench-agent 60 bash scripts/bench-agent.sh 3 1 200
smoke bench-tls 60 bash scripts/bench-tls.sh 8388608 20 1
smoke bench-folder 60 env DIRS=2 FILES=10 VIDEO_MIB=1 bash scripts/bench-folder.sh 1
smoke bench-compare 60 bash scripts/bench-compare.sh "$(bin_dir)/share" "$(bin_dir)/share" 4 1
smoke bench-watch 60 bash scripts/bench-watch.sh 30 3
smoke bench-wormhole 90 bash scripts/bench-wormhole.sh 4 1
smoke faults 180 bash scripts/faults.sh 4 1 1
smoke bench-flood 90 bash scripts/bench-flood.sh 60 8
smoke sync-check 60 bash scripts/sync-check.sh 100
smoke package-deb 90 bash scripts/package-deb.sh
smoke gen-builder 30 python3 scripts/gen-builder.py --check
smoke gen-system-types 30 python3 scripts/gen-system-types.py --check
if [ "$(id -u)" -eq 0 ]; then
  smoke bench-relay 120 bash scripts/bench-relay.sh 4 1
  smoke bench-localsend 90 bash scripts/bench-localsend.sh 4 1
  smoke bench-delta 120 bash scripts/bench-delta.sh
  smoke bench-sync 240 bash scripts/bench-sync.sh
  smoke bench-links 180 env FILE_MIB_LAN=4 PHOTOS=10 TEXTS=50 WORKLOADS="photos texts" LIMIT=60 REF_SECONDS=1 \
    bash scripts/bench-links.sh lan
else
  echo "- smoke bench-relay, bench-links, bench-localsend, bench-delta, bench-sync: skipped (network namespaces need root)"
fi
smoke demo 240 bash scripts/demo.sh

# Every script is smoked above or run by the test command itself.
covered=" bench-flood.sh sync-check.sh bench-transfer.sh bench-agent.sh bench-tls.sh bench-folder.sh bench-compare.sh bench-watch.sh bench-wormhole.sh bench-localsend.sh faults.sh
  package-deb.sh
  gen-builder.py gen-system-types.py bench-relay.sh bench-links.sh bench-delta.sh bench-sync.sh bench_sync.py demo.sh bench_syncthing.py
  test.sh ci-checks.sh setup.sh run-suite.py check_reliability.py fuzz.sh sanitizers.sh budgets.sh smoke.sh lib-bench.sh
  lib-netns.sh "
if [ "$ONLY" = "  " ]; then
  for script in scripts/*.sh scripts/*.py; do
    name=$(basename "$script")
    [[ "$covered" == *" $name"[[:space:]]* ]] || { echo "✘ smoke: $script has no smoke run; add one here"; failures+=("$name"); }
    # The README runs scripts as commands: every one but the sourced libraries must be executable in the repository.
    if [[ "$name" != lib-* ]] && [[ "$(git ls-files -s "$script" 2>/dev/null | cut -c1-6)" == 100644 ]]; then
      echo "✘ smoke: $script is not executable (git update-index --chmod=+x $script)"
      failures+=("$name")
    fi
  done
fi
if [ ${#failures[@]} -gt 0 ]; then
  echo "== smoke: ${#failures[@]} failed (${failures[*]}) after $((SECONDS - started)) s"
  exit 1
fi
echo "== smoke: every script ran after $((SECONDS - started)) s"
