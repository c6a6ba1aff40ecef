#!/usr/bin/env bash
# Benchmarks the secure transport on loopback (release build):
#  - handshake + hello + ping latency over 200 fresh connections (median, p99);
#  - 1 GiB authenticated stream between two processes, beside `openssl s_server`/`s_client` carrying the same bytes.
# Usage: scripts/bench-tls.sh [bytes] [connections] [rounds]   (default 1 GiB, 200, 3)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
source scripts/lib-bench.sh
BYTES=${1:-1073741824}
CONNECTIONS=${2:-200}
ROUNDS=${3:-3}
release_build share >/dev/null
release_build share-bench-tls >/dev/null
BIN=$(bin_dir)
WORK=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$WORK" || true' EXIT

A=$WORK/a; B=$WORK/b
$BIN/share id --config "$A" --name bench-a >/dev/null
$BIN/share id --config "$B" --name bench-b >/dev/null
IDA=$($BIN/share id --config "$A" | tail -1); IDB=$($BIN/share id --config "$B" | tail -1)
$BIN/share trust add --config "$A" "$IDB" --name bench-b --team >/dev/null
$BIN/share trust add --config "$B" "$IDA" --name bench-a --team >/dev/null

echo "== handshake latency =="
$BIN/share agent --config "$A" --port 0 --listen 127.0.0.1 --no-discovery > "$WORK/agent.out" 2>&1 &
await_line "$WORK/agent.out" "listening on port"
PORT=$(grep -o 'listening on port [0-9]*' "$WORK/agent.out" | awk '{print $4}')
[ -n "$PORT" ] || { echo "bench-tls: the agent did not start: $(cat "$WORK/agent.out")" >&2; exit 1; }
$BIN/share-bench-tls latency --config "$B" --peer 127.0.0.1:$PORT --count "$CONNECTIONS"
kill %1; wait %1 2>/dev/null || true

echo "== throughput: $((BYTES >> 20)) MiB =="
for round in $(seq "$ROUNDS"); do
  : > "$WORK/serve.out"  # a fresh log: the last round's port line must not be read as this one's
  $BIN/share-bench-tls serve --config "$A" > "$WORK/serve.out" &
  await_line "$WORK/serve.out" "^port"
  SPORT=$(awk '/^port/{print $2}' "$WORK/serve.out")
  $BIN/share-bench-tls stream --config "$B" --peer 127.0.0.1:$SPORT --bytes "$BYTES"
  wait
done

# The same bytes through the openssl command-line pair (same cipher, TLS 1.3, Ed25519 certificates). The pair never
# ends on its own, so it is timed until the server has written every byte.
openssl req -x509 -newkey ed25519 -nodes -keyout "$WORK/k" -out "$WORK/c" -subj /CN=bench -days 1 2>/dev/null
for round in $(seq "$ROUNDS"); do
  OPORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  openssl s_server -accept "$OPORT" -naccept 1 -tls1_3 -ciphersuites TLS_AES_128_GCM_SHA256 -cert "$WORK/c" -key "$WORK/k" -quiet \
    > "$WORK/received" 2>/dev/null < <(sleep 300) &
  SPID=$!
  for _ in $(seq 100); do ss -ltnH "sport = :$OPORT" | grep -q . && break; sleep 0.05; done
  START=$(date +%s.%N)
  head -c "$BYTES" /dev/zero | openssl s_client -connect 127.0.0.1:$OPORT -tls1_3 -ciphersuites TLS_AES_128_GCM_SHA256 \
    -cert "$WORK/c" -key "$WORK/k" -quiet > /dev/null 2>&1 &
  CPID=$!
  for _ in $(seq 24000); do [ "$(stat -c %s "$WORK/received")" -ge "$BYTES" ] && break; sleep 0.005; done
  END=$(date +%s.%N)
  kill $CPID $SPID 2>/dev/null; wait $CPID $SPID 2>/dev/null || true
  python3 -c "b=$BYTES; t=$END-$START; print(f'openssl s_client -> s_server: {b>>20} MiB in {t:.2f} s = {b/t/1048576:.0f} MiB/s (TLS_AES_128_GCM_SHA256)')"
  rm -f "$WORK/received"
done
