#!/usr/bin/env python3
"""A trusted device that ends every folder link opened to it, for tests. It listens with TLS 1.3 and the device's
certificate, answers a session's hello as an agent, waits for the folder hello (0x30) and then closes the connection
(or, with `refuse`, sends a refusal first). It prints "listening" once it listens, serves for SECONDS from the first
folder link (which it waits for at most a minute, times the tests' patience), then prints how many folder links were
opened to it in that time ("links N").

Usage: hostile_link_peer.py PORT CERT KEY SECONDS [close|refuse]"""
import json, os, socket, ssl, sys, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peer import PATIENCE, receive_frame, send_frame  # noqa: E402

port, cert, key, seconds = int(sys.argv[1]), sys.argv[2], sys.argv[3], float(sys.argv[4])
how = sys.argv[5] if len(sys.argv) > 5 else "close"
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.minimum_version = ssl.TLSVersion.TLSv1_3
ctx.load_cert_chain(cert, key)
server = socket.create_server(("127.0.0.1", port))
print("listening", flush=True)
links = []
# Until the first link: a minute (the agent starts meanwhile); from it: SECONDS, whatever the machine's load.
deadline = time.monotonic() + 60 * PATIENCE
while True:
    left = deadline - time.monotonic()
    if left <= 0:
        break
    server.settimeout(left)
    try:
        raw, _ = server.accept()
    except (TimeoutError, socket.timeout):
        break
    raw.settimeout(10 * PATIENCE)
    try:
        conn = ctx.wrap_socket(raw, server_side=True)
        kind, _ = receive_frame(conn)
        if kind != 0x01:
            conn.close()
            continue
        send_frame(conn, 0x01, json.dumps({"magic": "share", "version": 4, "name": "hostile", "role": "agent"}).encode())
        kind, _ = receive_frame(conn)
        if kind == 0x30:
            links.append(time.monotonic())
            if len(links) == 1:
                deadline = links[0] + seconds
            if how == "refuse":
                send_frame(conn, 0x02, json.dumps({"code": "refused", "message": "no folder links"}).encode())
        conn.close()
    except (OSError, ssl.SSLError):
        raw.close()
print("links", len(links), flush=True)
