#!/usr/bin/env bash
# The main job on one machine: two devices on loopback, paired, sending a text, a file of a custom declared type, a
# profile the receiver accepts only as text, a large file that is interrupted and resumed, a folder, the profile
# catalog as one archive, and the agents: a queued send, the inbox, a lazy copy and paste, the page in a headless
# browser with a pending offer and its preview, a folder kept the same on three devices (a conflict, and how each
# device shows it), a watch; a send by code to
# a device that never paired and to the `wormhole` command; (as root) a phone running LocalSend; then (as root)
# the two devices on different networks behind NAT, meeting through a discovery server and a relay. Every step
# prints what was offered, what was chosen and why.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
source scripts/lib-bench.sh
echo "== building share and share-watch (release; a smoke run takes the test command's build)"
release_build share share-watch 2>&1 | tail -1
SHARE=$(bin_dir)/share
WORK=$(mktemp -d /var/tmp/share-demo.XXXXXX)
source scripts/lib-netns.sh
trap 'kill $(jobs -p) 2>/dev/null || true; netns_remove; rm -rf "$WORK"' EXIT
LAPTOP="--config $WORK/laptop"
DESK="--config $WORK/desk"
INBOX=$WORK/desk-inbox

step() { printf '\n== %s\n' "$*"; }
# Starts `share receive` on the desk with extra options; sets PORT and RECEIVER.
receive() {
  $SHARE receive $DESK --port 0 --listen 127.0.0.1 --into "$INBOX" "$@" > "$WORK/receive.out" 2>&1 &
  RECEIVER=$!
  # Bounded, and long enough for a busy machine: the port is known only once the receiver listens.
  PORT=
  for _ in $(seq 1200); do
    PORT=$(grep -o 'waiting on port [0-9]*' "$WORK/receive.out" 2>/dev/null | awk '{print $4}' | head -1 || true)
    [ -n "$PORT" ] && break
    kill -0 "$RECEIVER" 2>/dev/null || break
    sleep 0.05
  done
  [ -n "$PORT" ] || { echo "demo: share receive did not start: $(cat "$WORK/receive.out")" >&2; exit 1; }
}
finish() { wait "$RECEIVER" || true; sed 's/^/   desk | /' "$WORK/receive.out"; }

step "two devices on this machine"
$SHARE id $LAPTOP --name laptop | sed 's/^/   /'
$SHARE id $DESK --name desk | sed 's/^/   /'

LAPTOPID=$($SHARE id $LAPTOP | tail -1)
DESKID=$($SHARE id $DESK | tail -1)
# The two devices find each other by name on loopback, on a discovery port of their own.
FINDING="--discovery-interface 127.0.0.1 --discovery-port $(python3 -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"

step "pairing: the desk waits and says so on the network; the laptop finds it by name (no port to type)"
echo "   both show the same code; a person confirms it matches, a script names the other device's ID (--yes --expect)"
$SHARE pair $DESK --yes --expect "$LAPTOPID" --team --listen 127.0.0.1 $FINDING > "$WORK/pair.out" 2>&1 &
PAIRING=$!
await_line "$WORK/pair.out" "waiting to pair"
$SHARE pair $LAPTOP desk --yes --expect "$DESKID" --team $FINDING 2>&1 | sed 's/^/ laptop | /'
wait $PAIRING; sed 's/^/   desk | /' "$WORK/pair.out"

step "1. a text"
receive
$SHARE send $LAPTOP --to "127.0.0.1:$PORT" --text "Dinner at eight?" 2>&1 | sed 's/^/ laptop | /'
finish

step "2. a file of a custom type the desk has never heard of (the laptop's declaration travels with the offer)"
cat > "$WORK/recipe-types.json" <<'JSON'
{ "UTExportedTypeDeclarations": [ {
    "UTTypeIdentifier": "com.example.recipe",
    "UTTypeConformsTo": ["public.json"],
    "UTTypeDescription": "Recipe",
    "UTTypeTagSpecification": { "public.filename-extension": ["recipe"] } } ] }
JSON
printf '{"dish": "paella", "serves": 4}\n' > "$WORK/dinner.recipe"
receive --accept public.json
$SHARE send $LAPTOP --declarations "$WORK/recipe-types.json" --to "127.0.0.1:$PORT" "$WORK/dinner.recipe" 2>&1 | sed 's/^/ laptop | /'
finish

step "3. a profile: a text-only receiver gets the name; a receiver that knows profiles imports it"
$SHARE profile add $LAPTOP Juan --bio "Loves hiking" --fact "Has climbed Aneto" 2>&1 | sed 's/^/ laptop | /'
receive --accept public.plain-text
$SHARE send $LAPTOP --to "127.0.0.1:$PORT" --profile Juan 2>&1 | sed 's/^/ laptop | /'
finish
receive
$SHARE send $LAPTOP --to "127.0.0.1:$PORT" --profile Juan 2>&1 | sed 's/^/ laptop | /'
finish
$SHARE profile list $DESK | sed 's/^/   desk | /'

step "4. a large file, interrupted half way (the desk is killed) and resumed"
head -c $((256 << 20)) /dev/urandom > "$WORK/holiday.mov"
receive
# Paced to 64 MiB/s (a test setting of the sender) so that the kill lands half way: unpaced, 256 MiB cross loopback in
# a fraction of a second. The receiver's ledger plus its journal say how many 1 MiB chunks it verified.
SHARE_TEST_SEND_RATE=$((64 << 20)) $SHARE send $LAPTOP --to "127.0.0.1:$PORT" "$WORK/holiday.mov" --quiet 2> "$WORK/send.err" &
SENDER=$!
deadline=$((SECONDS + 60))
while [ $SECONDS -lt $deadline ]; do
  held=$(python3 -c "
import json, glob
held = set()
for f in glob.glob('$INBOX/.share-partial/*.json'):
    held |= set(json.load(open(f))['chunks'])
for f in glob.glob('$INBOX/.share-partial/*.log'):
    for line in open(f):
        try: held.add(str(json.loads(line)['c']))
        except Exception: pass
print(len(held))" 2>/dev/null || echo 0)
  [ "$held" -ge 128 ] && break; sleep 0.05
done
kill -9 "$RECEIVER"; wait "$RECEIVER" 2>/dev/null || true; wait "$SENDER" || true
echo "   desk was killed with $held MiB of 256 MiB verified; the sender said:"
sed 's/^/ laptop | /' "$WORK/send.err"
[ -e "$INBOX/holiday.mov" ] && echo "   holiday.mov exposed before it was complete!" || echo "   no holiday.mov yet: only a partial and its ledger in $INBOX/.share-partial"
receive
$SHARE send $LAPTOP --to "127.0.0.1:$PORT" "$WORK/holiday.mov" 2>&1 | sed 's/^/ laptop | /'
finish
cmp "$WORK/holiday.mov" "$INBOX/holiday.mov" && echo "   holiday.mov arrived identical after the resume"

step "5. a folder: streamed as tar, extracted as it arrives, moved into place when its digest matches"
mkdir -p "$WORK/Trip/photos/día 1" "$WORK/Trip/empty"
head -c $((4 << 20)) /dev/urandom > "$WORK/Trip/photos/día 1/beach.jpg"
printf 'Packing list\n' > "$WORK/Trip/notes.txt"
ln -s notes.txt "$WORK/Trip/readme"
receive
$SHARE send $LAPTOP --to "127.0.0.1:$PORT" "$WORK/Trip" 2>&1 | sed 's/^/ laptop | /'
finish
diff -r "$WORK/Trip" "$INBOX/Trip" && echo "   Trip/ arrived identical (nested folders, a non-ASCII name, an empty folder, a link)"

step "6. the whole profile catalog as one archive; exported to a file too"
head -c 20000 /dev/urandom > "$WORK/juan.jpg"
$SHARE profile add $LAPTOP Ana --bio "Paints" --portrait "$WORK/juan.jpg" 2>&1 | sed 's/^/ laptop | /'
receive --accept public.plain-text
$SHARE send $LAPTOP --to "127.0.0.1:$PORT" --profiles 2>&1 | sed 's/^/ laptop | /'
finish
receive
$SHARE send $LAPTOP --to "127.0.0.1:$PORT" --profiles 2>&1 | sed 's/^/ laptop | /'
finish
$SHARE profile list $DESK | sed 's/^/   desk | /'
$SHARE profile export $LAPTOP "$WORK/friends.tar.zst" 2>&1 | sed 's/^/ laptop | /'
bsdtar -tvf "$WORK/friends.tar.zst" | sed 's/^/   bsdtar | /'

step "7. the agents: pairing told each device where the other's agent listens, so a send by name works at once"
$SHARE agent $DESK --listen 127.0.0.1 --no-discovery > "$WORK/desk-agent.out" 2>&1 &
DESKAGENT=$!
await_line "$WORK/desk-agent.out" "listening on port"
DESKPORT=$(grep -o 'port [0-9]*' "$WORK/desk-agent.out" | awk '{print $2}')
$SHARE agent $LAPTOP --listen 127.0.0.1 --no-discovery > "$WORK/laptop-agent.out" 2>&1 &
await_line "$WORK/laptop-agent.out" "listening on port"
$SHARE trust list $LAPTOP | sed 's/^/ laptop | /'
$SHARE send $LAPTOP --to desk --text "see you at eight" "$WORK/juan.jpg" --wait 2>&1 | sed 's/^/ laptop | /'
$SHARE inbox $DESK | sed 's/^/   desk | /'
$SHARE copy $LAPTOP --url https://example.com/menu 2>&1 | sed 's/^/ laptop | /'
(cd "$WORK" && $SHARE paste $DESK --quiet) | sed 's/^/   desk pasted | /'

step "7b. a friend's offer waits for the desk's answer: shown with its title, type, size and preview, then accepted"
FRIEND="--config $WORK/friend"
$SHARE id $FRIEND --name ana > /dev/null
$SHARE trust add $DESK "$($SHARE id $FRIEND | tail -1)" --name ana --group climbing 2>&1 | sed 's/^/   desk | /'
$SHARE trust add $FRIEND "$DESKID" --name desk --group climbing --address "127.0.0.1:$DESKPORT" > /dev/null 2>&1
printf '<gpx><trk><name>Aneto</name></trk></gpx>\n' > "$WORK/aneto.gpx"
$SHARE send $FRIEND --to desk --direct "$WORK/aneto.gpx" --preview "$WORK/juan.jpg" > /dev/null 2> "$WORK/friend.err" &
FRIENDSEND=$!
for _ in $(seq 400); do $SHARE pending $DESK --json 2>/dev/null | grep -q '"id"' && break; sleep 0.05; done
$SHARE pending $DESK | sed 's/^/   desk | /'
OFFER=$($SHARE pending $DESK --json | python3 -c 'import json, sys; print(json.load(sys.stdin)[0]["id"])')
$SHARE accept $DESK "$OFFER" 2>&1 | sed 's/^/   desk | /'
wait $FRIENDSEND; sed 's/^/    ana | /' "$WORK/friend.err"
$SHARE inbox $DESK | grep aneto | sed 's/^/   desk | /'

step "7c. the page (share agent --web) in a headless browser: a laptop's offer with its preview, as the desk's user sees it"
SHOTS=${SHARE_DEMO_SCREENSHOTS:-/var/tmp/share-demo-screenshots}
/usr/bin/python3 Tests/Browser/page_test.py "$SHARE" "$WORK/page" --screenshots "$SHOTS" --demo 2>&1 |
  grep -v "^#" | sed 's/^/    page | /'
[ -s "$SHOTS/2-pending-offer.png" ] && echo "    page | the pending offer with its preview: $SHOTS/2-pending-offer.png"

step "7d. a folder kept the same on three devices, both ways: the laptop shares it, the desk and a phone accept it"
LAPTOPPORT=$(grep -o 'listening on port [0-9]*' "$WORK/laptop-agent.out" | awk '{print $4}')
PHONE="--config $WORK/phone"
$SHARE id $PHONE --name phone > /dev/null
PHONEID=$($SHARE id $PHONE | tail -1)
$SHARE agent $PHONE --listen 127.0.0.1 --port 0 --no-discovery > "$WORK/phone-agent.out" 2>&1 &
PHONEAGENT=$!
await_line "$WORK/phone-agent.out" "listening on port"
PHONEPORT=$(grep -o 'listening on port [0-9]*' "$WORK/phone-agent.out" | awk '{print $4}')
for who in LAPTOP DESK; do
  $SHARE trust add ${!who} "$PHONEID" --name phone --team --address "127.0.0.1:$PHONEPORT" > /dev/null 2>&1
done
$SHARE trust add $PHONE "$LAPTOPID" --name laptop --team --address "127.0.0.1:$LAPTOPPORT" > /dev/null 2>&1
$SHARE trust add $PHONE "$DESKID" --name desk --team --address "127.0.0.1:$DESKPORT" > /dev/null 2>&1
mkdir -p "$WORK/thesis/chapters"
printf 'Chapter one: what moves\n' > "$WORK/thesis/chapters/one.md"
printf 'to do: figures\n' > "$WORK/thesis/notes.md"
$SHARE sync add $LAPTOP "$WORK/thesis" --with desk --with phone 2>&1 | sed 's/^/ laptop | /'
FOLDER=$($SHARE sync $LAPTOP --json | python3 -c 'import json, sys; print(json.load(sys.stdin)["folders"][0]["settings"]["id"])')
for who in DESK PHONE; do
  name=$(echo "$who" | tr A-Z a-z)
  for _ in $(seq 600); do $SHARE sync ${!who} --json | grep -q "\"$FOLDER\"" && break; sleep 0.05; done
  $SHARE sync ${!who} | sed "s/^/ $(printf '%6s' "$name") | /"
  $SHARE sync accept ${!who} "$FOLDER" --into "$WORK/$name-thesis" 2>&1 | sed "s/^/ $(printf '%6s' "$name") | /"
done
for who in LAPTOP DESK PHONE; do $SHARE sync ${!who} --wait 60 > /dev/null || true; done
echo "   the desk edits the notes; the laptop and the phone have the edit a moment later:"
printf 'to do: figures, then the bibliography\n' > "$WORK/desk-thesis/notes.md"
for _ in $(seq 600); do
  grep -q bibliography "$WORK/thesis/notes.md" 2>/dev/null && grep -q bibliography "$WORK/phone-thesis/notes.md" 2>/dev/null && break
  sleep 0.05
done
echo " laptop | notes.md: $(cat "$WORK/thesis/notes.md")"
echo "  phone | notes.md: $(cat "$WORK/phone-thesis/notes.md")"
echo "   the phone is off while both it and the laptop change chapter one: a conflict once it is back"
kill $PHONEAGENT; wait $PHONEAGENT 2>/dev/null || true
printf 'Chapter one: what moves (the laptop'"'"'s draft)\n' > "$WORK/thesis/chapters/one.md"
printf 'Chapter one: what moves (written on the phone)\n' > "$WORK/phone-thesis/chapters/one.md"
$SHARE agent $PHONE --listen 127.0.0.1 --port "$PHONEPORT" --no-discovery >> "$WORK/phone-agent.out" 2>&1 &
for _ in $(seq 1200); do
  ls "$WORK/desk-thesis/chapters" 2>/dev/null | grep -q sync-conflict && ls "$WORK/thesis/chapters" | grep -q sync-conflict && break
  sleep 0.05
done
for who in LAPTOP DESK PHONE; do $SHARE sync ${!who} --wait 60 > /dev/null || true; done
for who in LAPTOP DESK PHONE; do
  name=$(echo "$who" | tr A-Z a-z)
  $SHARE sync ${!who} | sed "s/^/ $(printf '%6s' "$name") | /"
done
echo "   on every device: $(ls "$WORK/desk-thesis/chapters" | tr '\n' ' ')"

step "8. a watch attached to the desk's agent: it opens no port and gets what fits it"
WATCH="--config $WORK/watch"
$SHARE id $WATCH --name desk-watch | sed 's/^/   /'
$SHARE trust add $DESK "$($SHARE id $WATCH | tail -1)" --name desk-watch --team --watch 2>&1 | sed 's/^/   desk | /'
$SHARE trust add $WATCH "$($SHARE id $DESK | tail -1)" --name desk --team --address "127.0.0.1:$DESKPORT" 2>&1 | sed 's/^/  watch | /'
$SHARE watch $WATCH --agent desk --into "$WORK/watch-items" > "$WORK/watch.out" 2>&1 &
await_line "$WORK/watch.out" "attached to desk"
head -c 1200000 /dev/urandom > "$WORK/holiday.mp4"
head -c 300000 /dev/urandom > "$WORK/poster.png"
$SHARE send $LAPTOP --to desk-watch --via desk --direct --text "leaving now" --profile Juan "$WORK/juan.jpg" 2>&1 \
  | sed 's/^/ laptop | /'
echo "   a video has nothing the watch takes (its file: URL names a place on the laptop and never leaves it),"
echo "   and a 300 KB image is over the watch's 256 KiB: both refused, with the reason, to the sender"
$SHARE send $LAPTOP --to desk-watch --via desk --direct "$WORK/holiday.mp4" "$WORK/poster.png" 2>&1 \
  | sed 's/^/ laptop | /' || true
$SHARE profile add $WATCH Marta --bio "Runs marathons" 2>&1 | sed 's/^/  watch | /'
$SHARE watch send $WATCH --agent desk --to laptop --profile Marta 2>&1 | sed 's/^/  watch | /'
$SHARE profile list $LAPTOP | sed 's/^/ laptop | /'
await_line "$WORK/watch.out" "juan.jpg"
sed 's/^/  watch | /' "$WORK/watch.out"
$SHARE status $DESK | grep watch | sed 's/^/   desk | /'

step "8b. a send by code to a visitor who never paired, and to the wormhole command (local servers, not the public ones)"
MAILBOX_TWISTD=${SHARE_WORMHOLE_MAILBOX_TWISTD:-/opt/share-tools/wormhole-mailbox/bin/twistd}
PYTHONUNBUFFERED=1 "$MAILBOX_TWISTD" -n --pidfile= wormhole-mailbox --port=tcp:0:interface=127.0.0.1 \
  --channel-db="$WORK/mailbox.sqlite" > "$WORK/mailbox.log" 2>&1 &
PYTHONUNBUFFERED=1 twistd3 -n --pidfile= transitrelay --port=tcp:0:interface=127.0.0.1 > "$WORK/transit.log" 2>&1 &
for _ in $(seq 1200); do grep -q "starting on" "$WORK/mailbox.log" && grep -q "starting on" "$WORK/transit.log" && break; sleep 0.05; done
MAILBOXURL=ws://127.0.0.1:$(grep -o 'starting on [0-9]*' "$WORK/mailbox.log" | awk '{print $3}')/v1
TRANSIT=tcp:127.0.0.1:$(grep -o 'starting on [0-9]*' "$WORK/transit.log" | awk '{print $3}')
CODESERVERS="--server $MAILBOXURL --relay $TRANSIT --advertise 127.0.0.1"
VISITOR="--config $WORK/visitor"
$SHARE id $VISITOR --name visitor | sed 's/^/   /'
head -c 5000000 /dev/urandom > "$WORK/slides.pdf"
$SHARE send $LAPTOP --code $CODESERVERS "$WORK/slides.pdf" --text "slides from the talk" 2> "$WORK/code-send.err" &
CODESEND=$!
await_line "$WORK/code-send.err" "^code "
CODE=$(grep -o '^code [0-9]*-[a-z-]*' "$WORK/code-send.err" | head -1 | awk '{print $2}')
echo "   the laptop prints a code; the visitor types it (and answers y to what is offered):"
echo y | $SHARE receive $VISITOR "$CODE" $CODESERVERS --into "$WORK/visitor-inbox" 2>&1 | sed 's/^/visitor | /'
wait $CODESEND; sed 's/^/ laptop | /' "$WORK/code-send.err"
echo "   nothing was trusted on either side: $($SHARE trust list $VISITOR 2>&1 | grep -c laptop || true) entries for the laptop"
WORMHOLE=(wormhole --relay-url "$MAILBOXURL" --transit-helper "$TRANSIT")
$SHARE send $DESK --code $CODESERVERS "$WORK/slides.pdf" 2> "$WORK/code-send2.err" &
CODESEND=$!
await_line "$WORK/code-send2.err" "^code "
CODE=$(grep -o '^code [0-9]*-[a-z-]*' "$WORK/code-send2.err" | head -1 | awk '{print $2}')
mkdir -p "$WORK/wormhole-out"
(cd "$WORK/wormhole-out" && "${WORMHOLE[@]}" receive --accept-file --hide-progress --no-listen "$CODE" 2>&1 | sed 's/^/wormhole | /')
wait $CODESEND; sed 's/^/   desk | /' "$WORK/code-send2.err" | tr '\r' '\n' | grep -v '^\s*$' | tail -2
cmp -s "$WORK/slides.pdf" "$WORK/wormhole-out/slides.pdf" && echo "   the wormhole command holds the same slides.pdf"

step "8c. a phone with LocalSend (localsendd from PyPI, in a network namespace of the demo's own) and the studio's agent"
LSTOOLS=${SHARE_TOOLS:-/opt/share-tools}/localsend
if [ "$(id -u)" -ne 0 ] || [ ! -x "$LSTOOLS/bin/localsendd" ] || ! ip netns add "share-demo-ls-$$" 2> /dev/null; then
  echo "   skipped: needs root, ip netns and localsendd (scripts/setup.sh installs them)"
else
  LSNS=share-demo-ls-$$
  trap 'kill $(jobs -p) 2>/dev/null || true; ip netns del "$LSNS" 2>/dev/null || true; netns_remove; rm -rf "$WORK"' EXIT
  ip netns exec "$LSNS" ip link set lo up
  ip netns exec "$LSNS" ip link set lo multicast on
  ip netns exec "$LSNS" ip route add 224.0.0.0/4 dev lo
  STUDIO="--config $WORK/studio"
  $SHARE id $STUDIO --name studio > /dev/null
  mkdir -p "$WORK/phone/downloads"
  HOME=$WORK/phone XDG_STATE_HOME=$WORK/phone/state XDG_CONFIG_HOME=$WORK/phone/config PYTHONUNBUFFERED=1 \
    ip netns exec "$LSNS" "$LSTOOLS/bin/localsendd" --alias phone --download-dir "$WORK/phone/downloads" \
    --socket "$WORK/phone/control.sock" --unattended --no-log-time > "$WORK/phone.log" 2>&1 &
  ip netns exec "$LSNS" $SHARE agent $STUDIO --port 0 --listen 127.0.0.1 --no-discovery --localsend \
    --localsend-port 53318 > "$WORK/studio.out" 2>&1 &
  await_line "$WORK/studio.out" "LocalSend on port"
  grep "LocalSend on port" "$WORK/studio.out" | head -1 | sed 's/^/ studio | /'
  # The phone, driven as its own localsendctl drives it: send FILES to NAME, wait for the outcome.
  phone() {
    "$LSTOOLS/bin/python" - "$WORK/phone/control.sock" "$@" << 'PY'
import sys
from localsendd.client import Client
sock, command = sys.argv[1], sys.argv[2]
with Client(sock, timeout=120) as c:
    if command == "devices":
        events = c.events()
        while True:
            devices = c.call("list_devices")["devices"]
            if devices:
                for d in devices:
                    print(f"sees {d['alias']} ({d['deviceModel']}, {d['deviceType']}), fingerprint {d['fingerprint'][:8]}")
                break
            next(events)  # the next change of its state
    else:
        c.call("send", to=sys.argv[3], files=sys.argv[4:])
        events = c.events()
        while True:
            state = c.call("get_state")
            if state.get("active") is None and state.get("result"):
                print(f"sending {len(sys.argv) - 4} file(s) to {sys.argv[3]}: {state['result']['kind']}")
                break
            next(events)  # the next change of its state
PY
  }
  await_line "$WORK/studio/state/localsend/peers.json" '"alias":"phone"'
  phone devices 2>&1 | sed 's/^/  phone | /'
  ip netns exec "$LSNS" $SHARE peers $STUDIO 2>&1 | grep LocalSend | sed 's/^/ studio | /'
  head -c 2500000 /dev/urandom > "$WORK/IMG_0001.jpg"
  head -c 1800000 /dev/urandom > "$WORK/IMG_0002.jpg"
  echo "   the phone sends two photos; a LocalSend device is a stranger: the upload waits in share pending"
  phone send studio "$WORK/IMG_0001.jpg" "$WORK/IMG_0002.jpg" > "$WORK/phone-send.out" 2>&1 &
  PHONESEND=$!
  for _ in $(seq 1200); do $SHARE pending $STUDIO 2> /dev/null | grep -q "(LocalSend)" && break; sleep 0.05; done
  $SHARE pending $STUDIO 2>&1 | sed 's/^/ studio | /'
  $SHARE accept $STUDIO "$($SHARE pending $STUDIO | grep -o '^[0-9a-f]\{8\}' | head -1)" 2>&1 | sed 's/^/ studio | /'
  wait $PHONESEND || true
  sed 's/^/  phone | /' "$WORK/phone-send.out"
  cmp -s "$WORK/IMG_0001.jpg" "$WORK/studio/data/inbox/phone (LocalSend "*/IMG_0001.jpg \
    && echo "   the studio's inbox holds the same IMG_0001.jpg, in the phone's own folder"
  echo "   the studio sends a file and a text to the phone by name: the engine picks each item's form for a receiver"
  echo "   that takes any file, or text"
  ip netns exec "$LSNS" $SHARE send $STUDIO --direct "$WORK/slides.pdf" --text "call me when you land" --to phone 2>&1 \
    | tr '\r' '\n' | grep -v '^\s*$' | tail -1 | sed 's/^/ studio | /'
  ls "$WORK/phone/downloads" | sed 's/^/  phone | downloads: /'
fi

step "9. beyond the LAN: the desk at home behind NAT, the laptop on another network, your own servers between them"
if [ "$(id -u)" -ne 0 ] || ! command -v nft > /dev/null || ! ip netns add share-demo-probe 2> /dev/null; then
  echo "   skipped: network namespaces need root, iproute2 and nftables (scripts/setup.sh installs them)"
else
  ip netns del share-demo-probe
  echo "   namespaces: laptop 10.1.0.2 behind NAT 198.51.100.2, desk 10.2.0.2 behind NAT 192.0.2.2, and a host on"
  echo "   203.0.113.10 running Syncthing's discovery server and relay from Debian, as Deploy/servers.sh sets them up"
  netns_internet "$(head -c3 /dev/urandom | od -An -tx1 | tr -d ' \n')"
  netns_servers "$WORK/servers"
  $SHARE servers add $LAPTOP "$DISCO_URL" 2>&1 | sed 's/^/ laptop | /'
  $SHARE servers add $DESK "$DISCO_URL" 2>&1 | sed 's/^/   desk | /'
  $SHARE servers add $DESK "$RELAY_URL" 2>&1 | sed 's/^/   desk | /'
  kill "$DESKAGENT"; wait "$DESKAGENT" 2> /dev/null || true
  ip netns exec "$NET_DESK" $SHARE agent $DESK --listen 0.0.0.0 --no-discovery > "$WORK/desk-home.out" 2>&1 &
  await_line "$WORK/desk-home.out" "relay://203.0.113.10"
  grep -E "joined the relay|announced" "$WORK/desk-home.out" | sed 's/^/   desk | /'
  echo "   the laptop names the desk; the address it learned when pairing is not reachable from here, so it looks"
  echo "   the desk up, cannot reach its port behind NAT, and goes through the relay"
  ip netns exec "$NET_LAPTOP" $SHARE ping $LAPTOP desk 2>&1 | sed 's/^/ laptop | /'
  ip netns exec "$NET_LAPTOP" $SHARE send $LAPTOP --direct --to desk "$WORK/holiday.mp4" 2>&1 | sed 's/^/ laptop | /'
  $SHARE status $DESK 2> /dev/null | grep -E "relay|discovery" | sed 's/^/   desk | /' || true
  $SHARE inbox $DESK | grep holiday.mp4 | sed 's/^/   desk | /'
fi
