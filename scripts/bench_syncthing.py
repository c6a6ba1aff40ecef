#!/usr/bin/env python3
"""One Syncthing transfer of a folder, for the benchmarks: two Syncthing devices (the Debian package), each started
inside its own network namespace, that know only each other at a fixed address (no global or local discovery, no
relays, no NAT traversal, no usage reporting). The sender shares SRC send-only; the receiver receives it into DST
receive-only. The clock starts when both are started and stops when the receiver's REST API reports that it holds
every file and byte of the folder (state idle, nothing needed; Syncthing counts 128 bytes per directory as well). Prints "seconds sender-peak-rss-kib
receiver-peak-rss-kib", or "inf 0 0" when the limit passes first. Syncthing's folder marker is left out of DST after.

Usage: bench_syncthing.py WORK SENDER-NS SENDER-ADDR RECEIVER-NS RECEIVER-ADDR SRC DST LIMIT-SECONDS

--delta (scripts/bench-delta.sh): the two devices first bring DST in sync with SRC (not timed); then EDIT (a shell
command) changes SRC, the sender is asked to rescan, and the clock runs until DST holds exactly what SRC holds.
Prints "seconds bytes", the bytes being what COUNTER (a shell command printing the link's byte count) grew by.
Both devices may share one namespace and address (loopback): they then listen on ports of their own.
Usage: bench_syncthing.py --delta WORK SENDER-NS SENDER-ADDR RECEIVER-NS RECEIVER-ADDR SRC DST LIMIT EDIT COUNTER
"""

import json
import os
import shutil
import subprocess
import sys
import time
import filecmp
import xml.etree.ElementTree as ET

delta = sys.argv[1] == "--delta"
arguments = sys.argv[2:] if delta else sys.argv[1:]
work, sender_ns, sender_addr, receiver_ns, receiver_addr, src, dst, limit = arguments[:8]
edit, counter = arguments[8:10] if delta else (None, None)
limit = float(limit)
FOLDER = "bench"
# Ports of the sender and the receiver (distinct when they share an address).
PORTS = {"sender": (22000, 8384), "receiver": (22001 if sender_addr == receiver_addr else 22000,
                                                8385 if sender_addr == receiver_addr else 8384)}


def inside(ns, *command):
    return ["ip", "netns", "exec", ns, *command] if ns else list(command)


def generate(home):
    shutil.rmtree(home, ignore_errors=True)
    subprocess.run(
        ["syncthing", "generate", f"--home={home}", "--no-default-folder", "--skip-port-probing"],
        check=True, capture_output=True, timeout=60,
    )
    out = subprocess.run(
        ["syncthing", "serve", f"--home={home}", "--device-id"], check=True, capture_output=True, text=True,
        timeout=60,
    ).stdout.strip()
    return out


def configure(home, me, my_addr, peer, peer_addr, path, kind, marker, dials, mine, theirs):
    PORT, GUI = mine
    config = os.path.join(home, "config.xml")
    tree = ET.parse(config)
    root = tree.getroot()
    for folder in root.findall("folder"):
        root.remove(folder)
    for device in root.findall("device"):
        if device.get("id") != me:
            root.remove(device)
    folder = ET.SubElement(root, "folder", {
        "id": FOLDER, "label": FOLDER, "path": path, "type": kind, "rescanIntervalS": "3600",
        "fsWatcherEnabled": "false", "ignorePerms": "false", "autoNormalize": "true",
    })
    for device_id in (me, peer):
        ET.SubElement(folder, "device", {"id": device_id, "introducedBy": ""})
    ET.SubElement(folder, "markerName").text = marker
    ET.SubElement(folder, "minDiskFree", {"unit": "%"}).text = "0"
    device = ET.SubElement(root, "device", {
        "id": peer, "name": "peer", "compression": "metadata", "introducer": "false", "skipIntroductionRemovals":
        "false", "introducedBy": "",
    })
    # One side dials: two simultaneous dials over a long round trip can end with neither connection kept, and the next
    # attempt comes a minute later.
    ET.SubElement(device, "address").text = f"tcp://{peer_addr}:{theirs[0]}" if dials else "dynamic"
    ET.SubElement(device, "autoAcceptFolders").text = "false"
    gui = root.find("gui")
    gui.set("tls", "false")
    gui.find("address").text = f"{my_addr}:{GUI}"
    options = root.find("options")

    def option(name, value):
        element = options.find(name)
        if element is None:
            element = ET.SubElement(options, name)
        element.text = value

    for element in options.findall("listenAddress"):
        options.remove(element)
    ET.SubElement(options, "listenAddress").text = f"tcp://{my_addr}:{PORT}"
    for name, value in [
        ("globalAnnounceEnabled", "false"), ("localAnnounceEnabled", "false"), ("relaysEnabled", "false"),
        ("natEnabled", "false"), ("urAccepted", "-1"), ("autoUpgradeIntervalH", "0"), ("startBrowser", "false"),
        ("crashReportingEnabled", "false"), ("announceLANAddresses", "false"), ("reconnectionIntervalS", "5"),
    ]:
        option(name, value)
    tree.write(config)
    return gui.findtext("apikey")


def status(ns, addr, key, gui):
    try:
        out = subprocess.run(
            inside(ns, "curl", "-sf", "-m", "2", "-H", f"X-API-Key: {key}",
                   f"http://{addr}:{gui}/rest/db/status?folder={FOLDER}"),
            capture_output=True, text=True, timeout=10,
        ).stdout
        return json.loads(out) if out else None
    except (subprocess.TimeoutExpired, json.JSONDecodeError):
        return None


def peak_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def expected(path):
    files, size = 0, 0
    for base, _, names in os.walk(path):
        for name in names:
            files += 1
            size += os.path.getsize(os.path.join(base, name))
    return files, size


sender_home, receiver_home = os.path.join(work, "st-sender"), os.path.join(work, "st-receiver")
sender_id, receiver_id = generate(sender_home), generate(receiver_home)
# The sender's marker is an entry the workload has (so SRC stays as every other tool sees it).
marker = sorted(os.listdir(src))[0]
sender_key = configure(
    sender_home, sender_id, sender_addr, receiver_id, receiver_addr, src, "sendonly", marker, dials=False,
    mine=PORTS["sender"], theirs=PORTS["receiver"])
key = configure(
    receiver_home, receiver_id, receiver_addr, sender_id, sender_addr, dst, "receiveonly", ".stfolder", dials=True,
    mine=PORTS["receiver"], theirs=PORTS["sender"])
os.makedirs(os.path.join(dst, ".stfolder"), exist_ok=True)
files, size = expected(src)
# STMONITORED: no monitor process in front, so the peak RSS read is Syncthing's own.
env = dict(os.environ, STNOUPGRADE="1", STNORESTART="1", STMONITORED="yes")
log = open(os.path.join(work, "syncthing.log"), "w")
start = time.monotonic()
processes = [
    subprocess.Popen(inside(ns, "syncthing", "serve", f"--home={home}", "--no-browser", "--no-restart"), env=env,
                     stdout=log, stderr=subprocess.STDOUT)
    for ns, home in ((sender_ns, sender_home), (receiver_ns, receiver_home))
]
done = None
state = None


def same_tree(a, b):
    """Whether folder b holds exactly a's files with a's bytes (Syncthing's marker aside)."""
    def listing(root):
        return sorted(os.path.relpath(os.path.join(base, n), root) for base, dirs, names in os.walk(root)
                      for n in names if ".stfolder" not in base)
    names = listing(a)
    return names == listing(b) and all(filecmp.cmp(os.path.join(a, n), os.path.join(b, n), shallow=False)
                                       for n in names)


def wait_in_sync(files, size, check):
    while time.monotonic() - start < limit:
        state = status(receiver_ns, receiver_addr, key, PORTS["receiver"][1])
        if (state and state.get("state") == "idle" and state.get("globalFiles") == files
                and state.get("localFiles") == files and state.get("globalBytes", 0) >= size
                and state.get("localBytes") == state.get("globalBytes")
                and state.get("needFiles") == 0 and state.get("needBytes") == 0 and (not check or check())):
            return time.monotonic() - start
        # Polling the receiver's REST API: Syncthing signals nothing this process could wait on.
        time.sleep(0.05)
    return None


try:
    done = wait_in_sync(files, size, None)
    if delta and done is not None:
        subprocess.run(["sh", "-c", edit], check=True)
        files, size = expected(src)
        before = int(subprocess.run(["sh", "-c", counter], capture_output=True, text=True).stdout)
        start = time.monotonic()
        subprocess.run(
            inside(sender_ns, "curl", "-sf", "-m", "5", "-X", "POST", "-H", f"X-API-Key: {sender_key}",
                   f"http://{sender_addr}:{PORTS['sender'][1]}/rest/db/scan?folder={FOLDER}"), timeout=30)
        done = wait_in_sync(files, size, lambda: same_tree(src, dst))
        moved = int(subprocess.run(["sh", "-c", counter], capture_output=True, text=True).stdout) - before
    rss = [peak_kib(p.pid) for p in processes]
finally:
    for p in processes:
        p.terminate()
    for p in processes:
        try:
            p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    shutil.rmtree(os.path.join(dst, ".stfolder"), ignore_errors=True)
if done is None:
    # Given up: what the receiver last said, and the end of both logs, for whoever reads the benchmark's output.
    print(f"syncthing: no complete folder after {limit:.0f} s; receiver status {json.dumps(state)}", file=sys.stderr)
    with open(os.path.join(work, "syncthing.log")) as f:
        sys.stderr.writelines(f.readlines()[-15:])
if delta:
    print(f"{done:.3f} {moved}" if done is not None else "inf 0")
else:
    print(f"{done:.3f} {rss[0]} {rss[1]}" if done is not None else "inf 0 0")
