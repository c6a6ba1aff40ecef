#!/usr/bin/env python3
"""Sends FILE in 64 KiB chunks as share 0.1 did (no compression asked), under VERSION: with N, the first N chunks
and then the connection drops; with `resume`, the chunks the receiver does not hold and `done`, printing what the
receiver said it held and its acknowledgement. Usage: partial_sender.py PORT CERT KEY FILE VERSION N|resume"""
import hashlib, json, os, socket, ssl, struct, sys

port, cert, key, path, version, mode = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6]
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
ctx.minimum_version = ssl.TLSVersion.TLSv1_3
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
ctx.load_cert_chain(cert, key)
sock = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=20))


def frame(kind, payload):
    sock.sendall(struct.pack(">BI", kind, len(payload)) + payload)


def receive():
    header = b""
    while len(header) < 5:
        header += sock.recv(5 - len(header))
    kind, length = struct.unpack(">BI", header)
    body = b""
    while len(body) < length:
        body += sock.recv(length - len(body))
    return kind, body


data = open(path, "rb").read()
frame(0x01, json.dumps({"magic": "share", "version": 1, "name": "laptop", "role": "cli"}).encode())
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
