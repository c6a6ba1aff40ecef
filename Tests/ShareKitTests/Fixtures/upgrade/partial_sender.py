#!/usr/bin/env python3
"""Sends FILE in 64 KiB chunks as share 0.1 did (no compression asked), under VERSION: with N, the first N chunks
and then the connection drops; with `resume`, the chunks the receiver does not hold and `done`, printing what the
receiver said it held and its acknowledgement. It speaks protocol PROTOCOL (default 2; the fixtures were made with
1, the version before). Usage: partial_sender.py PORT CERT KEY FILE VERSION N|resume [PROTOCOL]"""
import hashlib, json, os, struct, sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from peer import connect, receive_frame, send_frame  # noqa: E402

port, cert, key, path, version, mode = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6]
protocol = int(sys.argv[7]) if len(sys.argv) > 7 else 2
sock = connect(port, cert, key, timeout=20)


def frame(kind, payload):
    send_frame(sock, kind, payload)


def receive():
    return receive_frame(sock)


data = open(path, "rb").read()
frame(0x01, json.dumps({"magic": "share", "version": protocol, "name": "laptop", "role": "cli"}).encode())
receive()
item = {"id": "upgrade-big-file", "label": "big.txt", "version": version, "declarations": [],
        "representations": [{"contentType": "public.plain-text", "kind": "file", "size": len(data),
                             "suggestedFileName": "big.txt"}]}
frame(0x10, json.dumps({"items": [item], "chunkSize": 65536}).encode())
while True:
    kind, body = receive()
    if kind == 0x12:
        break
    if kind == 0x02:
        raise SystemExit("error " + body.decode())
held = set()
for start, end in [(r["start"], r["end"]) for r in json.loads(body)["verified"]]:
    held.update(range(start, end))
chunks = (len(data) + 65535) // 65536
digests = []
for index in range(chunks):
    piece = data[index * 65536:(index + 1) * 65536]
    digests.append(hashlib.sha256(piece).digest())
    if mode != "resume" and index >= int(mode):
        sock.close()
        sys.exit(0)
    if index not in held:
        frame(0x14, struct.pack(">Q", index) + digests[-1] + piece)
frame(0x15, json.dumps({"item": "upgrade-big-file", "size": len(data), "chunks": chunks,
                        "digest": hashlib.sha256(b"".join(digests)).hexdigest()}).encode())
kind, body = receive()
print("held", len(held), "answer", kind, body.decode())
frame(0x1F, b"{}")
