#!/usr/bin/env bash
# Writes the upgrade fixtures with share 0.1 as it was before the transfer-engine change (commit 548a0e4): run it
# with OLD pointing at that version's `share` and `share-watch` folder. The test (UpgradeTests) starts the current
# version from these files. Usage: make-fixtures.sh OLD-BIN-DIR
set -euo pipefail
OLD=$1
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=$(mktemp -d /tmp/share-upgrade.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$WORK"' EXIT
S="$OLD/share"
id() { "$S" id --config "$WORK/$1" | tail -1; }
for d in desk laptop watch friend; do "$S" id --config "$WORK/$d" --name "$d" >/dev/null; done
"$S" trust add --config "$WORK/desk" "$(id laptop)" --name laptop --team >/dev/null
"$S" trust add --config "$WORK/desk" "$(id watch)" --name watch --team >/dev/null
"$S" trust add --config "$WORK/desk" "$(id friend)" --name friend >/dev/null
"$S" trust add --config "$WORK/desk" "$(id laptop)" --name laptop --team >/dev/null

# A partial: the laptop sends the first 8 of 16 chunks of a file, then its connection drops.
python3 "$HERE/source.py" "$WORK/big.txt"
VERSION=$(python3 -c 'import os,sys; i=os.stat(sys.argv[1]); print("%d-%d%09d-%d" % (i.st_size, i.st_mtime_ns // 10**9, i.st_mtime_ns % 10**9, i.st_ino))' "$WORK/big.txt")
mkdir -p "$WORK/inbox"
"$S" receive --config "$WORK/desk" --port 0 --listen 127.0.0.1 --into "$WORK/inbox/laptop" > "$WORK/receive.out" 2>&1 &
for _ in $(seq 200); do grep -q "waiting on port" "$WORK/receive.out" 2>/dev/null && break; sleep 0.05; done
PORT=$(grep -o 'port [0-9]*' "$WORK/receive.out" | awk '{print $2}')
python3 "$HERE/partial_sender.py" "$PORT" "$WORK/laptop/cert.pem" "$WORK/laptop/key.pem" "$WORK/big.txt" "$VERSION" 8 1
wait || true

# The desk's agent: the watch attaches, and so does the friend (earlier versions let any device); an item for the
# watch is kept while it is away.
"$S" trust add --config "$WORK/watch" "$(id desk)" --name desk --team >/dev/null
"$S" agent --config "$WORK/desk" --port 0 --listen 127.0.0.1 --no-discovery --inbox "$WORK/inbox" > "$WORK/agent.out" 2>&1 &
AGENT=$!
for _ in $(seq 200); do grep -q "listening on port" "$WORK/agent.out" 2>/dev/null && break; sleep 0.05; done
APORT=$(grep -o 'port [0-9]*' "$WORK/agent.out" | awk '{print $2}')
"$S" trust add --config "$WORK/watch" "$(id desk)" --name desk --team --address "127.0.0.1:$APORT" >/dev/null
"$OLD/share-watch" --config "$WORK/watch" --agent desk --json --count 1 > "$WORK/watch.out" 2>&1 &
WATCH=$!
for _ in $(seq 200); do grep -q attached "$WORK/watch.out" 2>/dev/null && break; sleep 0.05; done
kill $WATCH; wait $WATCH 2>/dev/null || true
"$S" trust add --config "$WORK/friend" "$(id desk)" --name desk --address "127.0.0.1:$APORT" >/dev/null
"$OLD/share-watch" --config "$WORK/friend" --agent desk --json --count 1 > "$WORK/friend.out" 2>&1 &
FRIEND=$!
for _ in $(seq 200); do grep -q attached "$WORK/friend.out" 2>/dev/null && break; sleep 0.05; done
kill $FRIEND; wait $FRIEND 2>/dev/null || true
"$S" trust add --config "$WORK/laptop" "$(id desk)" --name desk --team --address "127.0.0.1:$APORT" >/dev/null
"$S" send --config "$WORK/laptop" --to watch --via desk --direct --text "kept for the watch before the upgrade"
# A job queued on the desk for the laptop, which is away.
"$S" trust add --config "$WORK/desk" "$(id laptop)" --name laptop --team --address 127.0.0.1:9 >/dev/null
"$S" send --config "$WORK/desk" --to laptop --text "queued before the upgrade"
sleep 1
kill $AGENT; wait $AGENT 2>/dev/null || true

rm -rf "$HERE/desk" "$HERE/laptop" "$HERE/watch" "$HERE/friend" "$HERE/inbox"
for d in desk laptop watch friend; do cp -r "$WORK/$d" "$HERE/$d"; done
cp -r "$WORK/inbox" "$HERE/inbox"
rm -f "$HERE/desk/state/agent.sock"
# Paths and the file's version (its inode) belong to the machine that wrote them: the test puts its own back.
grep -rl "$WORK" "$HERE/desk" | xargs -r sed -i "s|$WORK|@ROOT@|g"
sed -i "s|$VERSION|@VERSION@|g" "$HERE"/inbox/laptop/.share-partial/*.json
echo "fixtures written in $HERE"
