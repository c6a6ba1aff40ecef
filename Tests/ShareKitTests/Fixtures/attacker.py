#!/usr/bin/env python3
"""A trusted device that attacks: the outside review's attacks, as scripts. It speaks the real protocol (TLS 1.3 with
its own certificate, frames, hello) and tries one thing the receiver must refuse.

Usage: attacker.py PORT CERT KEY SCENARIO [ARG...]; prints what the other side answered, one line per session:
`error CODE MESSAGE`, `ack OUTCOME`, `select ...` or `closed`."""
import hashlib, io, json, os, socket, ssl, struct, sys, tarfile, threading, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peer import connect, receive_frame, send_frame  # noqa: E402

port, cert, key, scenario, args = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:]


class Session:
    def __init__(self, role="cli", forward_to=None, accept=None, name="attacker"):
        self.sock = connect(port, cert, key)
        hello = {"magic": "share", "version": 2, "name": name, "role": role}
        if forward_to:
            hello["forwardTo"] = forward_to
        if accept is not None:
            hello["accept"] = {"entries": [{"contentType": t} for t in accept], "declarations": []}
        self.message(0x01, hello)
        kind, body = self.receive()
        if kind != 0x01:
            raise SystemExit("no hello: %r %r" % (kind, body))

    def frame(self, kind, payload):
        send_frame(self.sock, kind, payload)

    def message(self, kind, obj):
        self.frame(kind, json.dumps(obj).encode())

    def receive(self):
        return receive_frame(self.sock)

    def chunk(self, index, data, kind=0x14):
        self.frame(kind, struct.pack(">Q", index) + hashlib.sha256(data).digest() + data)

    def offer(self, items, chunk_size=65536):
        self.message(0x10, {"items": items, "chunkSize": chunk_size})

    def until(self, *kinds):
        """Frames until one of `kinds`, an error, or the end; returns (kind, decoded body)."""
        while True:
            kind, body = self.receive()
            if kind is None:
                return None, None
            if kind == 0x02 or kind in kinds:
                return kind, (json.loads(body) if body and kind != 0x13 and kind != 0x14 else body)

    def send_item(self, ident, data, chunk_size=65536, sized=True):
        """Streams one accepted item and its done; returns the answer (ack or error)."""
        kind, body = self.until(0x12)
        if kind != 0x12:
            return kind, body
        digests = []
        for index, start in enumerate(range(0, max(len(data), 1), chunk_size)):
            piece = data[start:start + chunk_size]
            digests.append(hashlib.sha256(piece).digest())
            try:
                self.chunk(index, piece)
            except OSError:
                break
        root = hashlib.sha256(b"".join(digests)).hexdigest()
        try:
            self.message(0x15, {"item": ident, "size": len(data), "chunks": len(digests), "digest": root})
        except OSError:
            pass
        return self.until(0x16)


def report(kind, body):
    if kind == 0x02:
        print("error", body.get("code"), body.get("message"))
    elif kind == 0x16:
        print("ack", body.get("outcome"))
    elif kind == 0x11:
        print("select", json.dumps(body))
    else:
        print("closed")
    sys.stdout.flush()


def item(ident, content_type, size=None, kind="data", name=None, version=None, origin=None):
    representation = {"contentType": content_type, "kind": kind}
    if size is not None:
        representation["size"] = size
    if name:
        representation["suggestedFileName"] = name
    entry = {"id": ident, "label": name or ident, "representations": [representation], "declarations": []}
    if version:
        entry["version"] = version
    if origin:
        entry["origin"] = origin
    return entry


def tar_bytes(members):
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for info, data in members:
            archive.addfile(info, io.BytesIO(data) if data is not None else None)
    return raw.getvalue()


def tar_file(path, data):
    info = tarfile.TarInfo(path)
    info.size = len(data)
    return info, data


def tar_entry(path, kind, target=""):
    info = tarfile.TarInfo(path)
    info.type = kind
    info.linkname = target
    return info, None


if scenario == "share-folders":
    # Opens a folder link (as an agent) and announces a folder: answered with the agent's own folder hello, or refused.
    s = Session(role="agent", name="folders")
    folder = {"id": "policy-check", "label": "notes", "type": "send-receive", "devices": [], "indexID": "1",
              "sequence": 0, "heldIndexID": "", "heldSequence": 0}
    s.message(0x30, {"folders": [folder]})
    kind, body = s.receive()
    if kind == 0x30:
        print("linked")
    elif kind == 0x02:
        report(kind, json.loads(body))
    else:
        print("closed")
elif scenario == "attach-as-watch":
    # C1 (a), M1: any trusted device registering as a watch. Welcomed with a ping, or held for two seconds without an
    # error: attached.
    s = Session(role="watch", accept=["public.item"])
    s.sock.settimeout(2)
    try:
        kind, body = s.receive()
    except (socket.timeout, TimeoutError):
        kind, body = "attached", None
    if kind == "attached" or kind == 0x03:
        print("attached")
    elif kind == 0x02:
        report(kind, json.loads(body))
    else:
        print("closed")
elif scenario == "forward":
    # M1, L5: items passed on through an agent to the device named ARG.
    s = Session(forward_to=args[0])
    data = b"hello through you"
    s.offer([item("f1", "public.utf8-plain-text", len(data))])
    kind, body = s.until(0x11)
    if kind != 0x11 or body["choices"][0].get("representation") is None:
        report(kind, body if kind != 0x11 else {"code": "refused", "message": body["choices"][0]["reason"]})
    else:
        report(*s.send_item("f1", data))
elif scenario == "profile-paths":
    # H2: a profile whose portrait and video name files of the receiver.
    profile = {"id": "7E1B8A54-0000-4000-8000-000000000001", "name": "Mallory", "bio": "", "funFacts": [],
               "portrait": "file://" + args[0], "video": "file://" + args[1]}
    data = json.dumps(profile).encode()
    s = Session()
    s.offer([item("p1", "app.share.profile", len(data), name="Mallory.json")])
    s.until(0x11)
    report(*s.send_item("p1", data))
elif scenario == "bundle":
    # H1: a profiles bundle whose manifest names paths through links (chained, each looking inside by its name).
    manifest = {"format": 1, "profiles": [{"id": "7E1B8A54-0000-4000-8000-000000000002", "name": "Mallory",
                                           "bio": "", "funFacts": [], "portrait": "media/d/" + args[0]}]}
    data = tar_bytes([
        tar_file("manifest.json", json.dumps(manifest).encode()),
        tar_entry("media", tarfile.DIRTYPE),
        tar_entry("media/x/y/z/w", tarfile.DIRTYPE),
        tar_entry("media/x/y/z/w/r", tarfile.SYMTYPE, "../../../.."),
        tar_entry("media/d", tarfile.SYMTYPE, "x/y/z/w/r/../../../../.."),
    ])
    s = Session()
    s.offer([item("b1", "app.share.profiles-archive", len(data), kind="archive", name="Profiles",
                  version="v1")])
    s.until(0x11)
    report(*s.send_item("b1", data))
elif scenario == "folder":
    # L3: a folder whose links lead out when followed one after the other; and modes 0777.
    info_dir = tarfile.TarInfo("open")
    info_dir.type = tarfile.DIRTYPE
    info_dir.mode = 0o777
    data = tar_bytes([
        (info_dir, None),
        tar_entry("open/x/y/z/w", tarfile.DIRTYPE),
        tar_entry("open/x/y/z/w/r", tarfile.SYMTYPE, "../../../.."),
        tar_entry("open/d", tarfile.SYMTYPE, "x/y/z/w/r/../../../../.."),
    ] if args and args[0] == "chained" else [(info_dir, None), tar_file("open/f.txt", b"fine")])
    s = Session()
    s.offer([item("d1", "public.tar-archive", len(data), kind="archive", name="Folder", version="v1")])
    s.until(0x11)
    report(*s.send_item("d1", data))
elif scenario == "unsized":
    # M3: an item that does not say its size, ARG0 bytes of type ARG1, to the device ARG2 (or the inbox).
    size, content_type = int(args[0]), args[1]
    s = Session(forward_to=args[2] if len(args) > 2 else None)
    s.offer([item("u1", content_type, None, name="big.png")])
    kind, body = s.until(0x11)
    if kind != 0x11 or body["choices"][0].get("representation") is None:
        report(kind, body)
    else:
        report(*s.send_item("u1", b"\x89PNG" + b"\0" * (size - 4)))
elif scenario == "race":
    # C1 (b): two sessions of one item at once, writing the same partial.
    results = []

    def session(delay):
        time.sleep(delay)
        s = Session(forward_to=args[0] if args else None)
        data = b"r" * (200 << 10)
        s.offer([item("same", "public.png", len(data), kind="file", name="same.png", version="v1")])
        kind, body = s.until(0x12)
        if kind != 0x12:
            results.append((kind, body))
            return
        # Hold the partial: send slowly.
        for index in range(0, 3):
            s.chunk(index, data[index * 65536:(index + 1) * 65536])
            time.sleep(0.5)
        s.sock.close()
        results.append((None, None))

    threads = [threading.Thread(target=session, args=(d,)) for d in (0, 0.5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for kind, body in results:
        report(kind, body)
elif scenario == "sessions":
    # M4: ARG0 sessions at once from one device, each passing an image on to the device ARG1 and holding on.
    count, target = int(args[0]), args[1]
    sessions, answers = [], []
    for n in range(count):
        try:
            s = Session(forward_to=target)
            sessions.append(s)
            s.offer([item("h%d" % n, "public.png", 100 << 10, kind="file", name="h%d.png" % n, version="v1")])
        except (OSError, ssl.SSLError):
            pass
    for s in sessions:
        kind, body = s.until(0x12)
        if kind == 0x12:
            answers.append("resume")
        elif kind == 0x02:
            answers.append("error %s %s" % (body.get("code"), body.get("message")))
        else:
            answers.append("closed")
    for answer in answers:
        print(answer)
else:
    raise SystemExit("unknown scenario " + scenario)
