#!/usr/bin/env python3
"""A trusted but misbehaving share sender, for tests. It speaks the real protocol (TLS 1.3, frames, hello) and then
breaks one rule. Usage: hostile_peer.py PORT CERT KEY SCENARIO; prints what the receiver answered."""
import hashlib, json, os, struct, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peer import connect, receive_frame, send_frame  # noqa: E402

port, cert, key, scenario = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
sock = connect(port, cert, key, timeout=20)

def frame(kind, payload):
    send_frame(sock, kind, payload)

def message(kind, obj):
    frame(kind, json.dumps(obj).encode())

def receive():
    return receive_frame(sock)

def chunk(index, data, digest=None):
    frame(0x14, struct.pack(">Q", index) + (digest or hashlib.sha256(data).digest()) + data)

def offer(items, chunk_size=4096):
    message(0x10, {"items": items, "chunkSize": chunk_size})

def item(ident, size, name="file.bin", kind="file"):
    return {"id": ident, "label": name, "representations": [{"contentType": "public.data", "kind": kind, "size": size,
            "suggestedFileName": name}], "declarations": [], "version": "v1"}

if scenario in ("newer-version", "version-1-pairing"):
    # A peer from the future, or one of the previous version (1, which paired without commitments) asking to pair.
    if scenario == "newer-version":
        message(0x01, {"magic": "share", "version": 99, "name": "future", "role": "cli"})
    else:
        message(0x01, {"magic": "share", "version": 1, "name": "old", "role": "pair"})
    kind, body = receive()
    print("error", json.loads(body)["code"], json.loads(body)["message"] if kind == 0x02 else "no error")
    sys.exit(0)
if scenario == "trickle":
    # A hello sent one byte at a time, slower than the receiver allows for one message.
    import time
    payload = json.dumps({"magic": "share", "version": 2, "name": "slow", "role": "cli"}).encode()
    data = struct.pack(">BI", 0x01, len(payload)) + payload
    started = time.time()
    try:
        for byte in data:
            sock.sendall(bytes([byte]))
            time.sleep(0.5)
            if time.time() - started > 30:
                break
    except OSError:
        pass
    print("closed after %.0f s" % (time.time() - started))
    sys.exit(0)
message(0x01, {"magic": "share", "version": 2, "name": "hostile", "role": "cli"})
kind, body = receive()
assert kind == 0x01, "no hello from the receiver"

def until_resume():
    while True:
        kind, body = receive()
        if kind is None or kind == 0x12 or kind == 0x02:
            return kind, body

data = b"x" * 10000
if scenario == "lying-size":       # offers 10 bytes, sends a full 4096-byte chunk
    offer([item("a", 10)]); until_resume(); chunk(0, b"y" * 4096)
elif scenario == "past-end":       # chunk index beyond the item
    offer([item("a", 10000)]); until_resume(); chunk(7, data[:4096])
elif scenario == "duplicate":      # the same chunk twice
    offer([item("a", 10000)]); until_resume(); chunk(0, data[:4096]); chunk(0, data[:4096])
elif scenario == "out-of-order":
    offer([item("a", 10000)]); until_resume(); chunk(1, data[4096:8192]); chunk(0, data[:4096])
elif scenario == "bad-chunk-digest":
    offer([item("a", 10000)]); until_resume(); chunk(0, data[:4096], digest=b"\0" * 32)
elif scenario == "wrong-done-digest":
    offer([item("a", 10000)]); until_resume()
    for i in range(3):
        chunk(i, data[i * 4096:(i + 1) * 4096])
    message(0x15, {"item": "a", "size": 10000, "chunks": 3, "digest": "00" * 32})
elif scenario == "done-too-early":
    offer([item("a", 10000)]); until_resume(); chunk(0, data[:4096])
    message(0x15, {"item": "a", "size": 10000, "chunks": 3, "digest": "00" * 32})
elif scenario == "oversized-frame":
    offer([item("a", 10000)]); until_resume(); sock.sendall(struct.pack(">BI", 0x14, 0x7FFFFFFF))
elif scenario == "unknown-frame":
    sock.sendall(struct.pack(">BI", 0xEE, 0))
elif scenario == "garbage-offer":
    frame(0x10, b"{not json")
elif scenario == "ten-thousand-items":
    offer([item("i%d" % n, 1, "f%d" % n) for n in range(10000)])
    kind, body = receive()
    print("select" if kind == 0x11 else "no-select")
    sock.close()
    sys.exit(0)
else:
    raise SystemExit("unknown scenario " + scenario)

while True:
    kind, body = receive()
    if kind is None:
        print("closed")
        break
    if kind == 0x02:
        print("error", json.loads(body)["code"])
        break
