#!/usr/bin/env python3
"""A trusted share sender that tries to write where it should not, or to read what it never had. It speaks the real
protocol (TLS 1.3, frames, a version-4 hello that says it speaks delta and mirrored folders), offers one item, and
reports what the receiver did: refused it, sent a basis (the index of a file it holds), answered block sums over that
basis, or took the item.

Usage: hostile_sender.py PORT CERT KEY SCENARIO ARG...
  mirror FOLDER PATH SIZE   a file of a mirrored folder (SIZE bytes of 'A'), sent whole when accepted
  file NAME SIZE VERSION    an ordinary file of SIZE bytes ('B'), its version string VERSION, sent whole when accepted
Before it sends, when the receiver offers a basis, it asks once for block sums of the basis's first 4 KiB in 32-byte
blocks, and prints how many came back ("sums N"). Prints "basis" or "no-basis", then "refused CODE", "saved", "closed"
or "error CODE"."""
import hashlib, json, os, struct, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peer import connect, receive_frame, send_frame  # noqa: E402

port, cert, key, scenario = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
args = sys.argv[5:]
sock = connect(port, cert, key, timeout=20)


def message(kind, obj):
    send_frame(sock, kind, json.dumps(obj).encode())


def out(*words):
    print(*words, flush=True)


message(0x01, {"magic": "share", "version": 4, "name": "hostile", "role": "cli",
               "features": ["delta-2", "mirror-1"]})
kind, body = receive_frame(sock)
if kind != 0x01:
    out("no hello", kind, body)
    sys.exit(1)

if scenario == "mirror":
    folder, path, size = args[0], args[1], int(args[2])
    content = b"A" * size
    item = {"id": "m1", "label": folder + "/" + path, "declarations": [], "version": "v-" + str(size),
            "representations": [{"contentType": "public.data", "kind": "file", "size": size,
                                 "suggestedFileName": path.split("/")[-1]}],
            "mirror": {"folder": folder, "path": path}}
elif scenario == "file":
    name, size, version = args[0], int(args[1]), args[2]
    content = b"B" * size
    item = {"id": "f1", "label": name, "declarations": [], "version": version,
            "representations": [{"contentType": "public.data", "kind": "file", "size": size,
                                 "suggestedFileName": name}]}
else:
    raise SystemExit("unknown scenario " + scenario)

chunk_size = 64 << 10
message(0x10, {"items": [item], "chunkSize": chunk_size})
kind, body = receive_frame(sock)
if kind == 0x02:
    out("no-basis")
    out("error", json.loads(body)["code"])
    sys.exit(0)
if kind != 0x11:
    out("no-basis")
    out("closed" if kind is None else "unexpected %r" % kind)
    sys.exit(0)
choice = json.loads(body)["choices"][0]
if choice.get("representation") is None:
    out("no-basis")
    out("refused", (choice.get("refusal") or {}).get("code"))
    sys.exit(0)

# The receiver's basis (if any) comes before the item's resume.
basis = False
while True:
    kind, body = receive_frame(sock)
    if kind == 0x19:
        basis = True
        continue
    break
out("basis" if basis else "no-basis")
if kind == 0x02:
    out("error", json.loads(body)["code"])
    sys.exit(0)
if kind != 0x12:
    out("closed" if kind is None else "unexpected %r" % kind)
    sys.exit(0)

if basis:
    # One block question over the first 4 KiB of the basis: 128 sums of 32-byte blocks.
    ident = item["id"].encode()
    query = bytes([len(ident)]) + ident + struct.pack(">I", 1) + struct.pack(">QIBB", 0, 4096, 0, 5)
    send_frame(sock, 0x22, query)
    kind, body = receive_frame(sock)
    if kind == 0x23:
        count = struct.unpack(">I", body[1 + body[0]:5 + body[0]])[0]
        out("sums", count)
    elif kind == 0x02:
        out("sums-refused", json.loads(body)["code"])
        sys.exit(0)
    else:
        out("sums-unanswered", kind)
        sys.exit(0)

digests = []
for index in range(0, (len(content) + chunk_size - 1) // chunk_size):
    data = content[index * chunk_size:(index + 1) * chunk_size]
    digest = hashlib.sha256(data).digest()
    digests.append(digest)
    send_frame(sock, 0x14, struct.pack(">Q", index) + digest + data)
whole = hashlib.sha256(b"".join(digests)).hexdigest()
message(0x15, {"item": item["id"], "size": len(content), "chunks": len(digests), "digest": whole})
while True:
    kind, body = receive_frame(sock)
    if kind is None:
        out("closed")
        break
    if kind == 0x16:
        ack = json.loads(body)
        out("saved" if ack.get("outcome") in ("saved", "mirrored") else ack.get("outcome"), ack.get("savedAs") or "")
        send_frame(sock, 0x1F, b"{}")
        break
    if kind == 0x02:
        out("error", json.loads(body)["code"])
        break
