#!/usr/bin/env python3
"""Holds idle TCP connections to a port and opens each again as soon as it is cut: the flood a hostile local user or
LAN host keeps up against a server's connection limits. Nothing is ever sent.

Usage: idle_flood.py PORT SOURCES PER_SOURCE SECONDS
  SOURCES: a comma-separated list of local addresses to connect from (any 127.x.y.z is this machine's loopback), or
  N@BASE for N addresses counting up from BASE (10@127.0.5.1 is 127.0.5.1 … 127.0.5.10).
Runs for SECONDS (or until its standard input closes), then prints "opened N cut M" and exits."""
import ipaddress, os, selectors, socket, sys, time

port, sources, per_source, seconds = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
if "@" in sources:
    count, base = sources.split("@")
    start = ipaddress.ip_address(base)
    addresses = [str(start + n) for n in range(int(count))]
else:
    addresses = sources.split(",")

selector = selectors.DefaultSelector()
opened = cut = 0


def open_one(source):
    global opened
    try:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setblocking(False)
        sock.bind((source, 0))
        sock.connect_ex(("127.0.0.1", port))
        selector.register(sock, selectors.EVENT_READ, source)
        opened += 1
    except OSError:
        pass


for source in addresses:
    for _ in range(per_source):
        open_one(source)
print("flooding", len(addresses) * per_source, flush=True)
deadline = time.monotonic() + seconds
while time.monotonic() < deadline:
    for key, _ in selector.select(timeout=0.2):
        sock = key.fileobj
        try:
            data = sock.recv(4096)
        except (BlockingIOError, InterruptedError):
            continue
        except OSError:
            data = b""
        if data:
            continue  # a server's answer (an error page): read and ignored; the connection stays
        selector.unregister(sock)
        sock.close()
        cut += 1
        open_one(key.data)
print("opened", opened, "cut", cut, flush=True)
