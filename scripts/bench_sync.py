#!/usr/bin/env python3
"""Shared folders on three devices, every tool in the same run (scripts/bench-sync.sh sets it up and explains it).

Each device is a network namespace of its own on a shaped link profile, or all three share one namespace's loopback.
Tools: share (three agents, `share sync`), `share send` of the same folder to both other devices at once (the
baseline the first sync is held to), rsync -a over ssh from the first device to the other two at once (one way;
-z too for the update), and Syncthing (Debian's, three instances, one send-receive folder, the watcher on with its
default delay, and again with a rescan asked for at once). Every clock stops when the devices hold the new state:
share's and Syncthing's when every device says it is in step and the trees are then found equal on disk (share's
agents answer a request that waits for that, as `share sync --wait` does; Syncthing's REST status is read again at
each folder event its long-polled event stream reports, and every 50 ms anyway), rsync's and share send's when both
processes exited and the trees are equal. The files a phase changes are chosen before its clock starts. Bytes are
the kernel's counters of the links' interfaces (both directions, loopback: lo). CPU is the machine's busy seconds
during the phase; RSS the peak of the tool's largest process (share's agents, Syncthing, share receive).

Usage: bench_sync.py WORK BIN   (settings from the environment: see scripts/bench-sync.sh)
"""

import ctypes
import filecmp
import http.client
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET

WORK, BIN = sys.argv[1], sys.argv[2]
SMOKE = bool(os.environ.get("SHARE_SMOKE"))
FILES = int(os.environ.get("FILES", 200 if SMOKE else 5000))
MANY = int(os.environ.get("MANY", 2000 if SMOKE else 100000))
ROUNDS = int(os.environ.get("ROUNDS", 1))
PROFILES = os.environ.get("PROFILES", "loopback" if SMOKE else "loopback 100mbit").split()
SYNCTHING = os.environ.get("SYNCTHING", "0" if SMOKE else "1") == "1"
LIMIT = float(os.environ.get("LIMIT", 120 if SMOKE else 600))
IDLE = float(os.environ.get("IDLE", 2 if SMOKE else 20))
PHASES = os.environ.get("PHASES", "send sync rsync syncthing many").split()
EDITS, RENAMES, REMOVALS = (10, 5, 2) if SMOKE else (100, 50, 20)
METADATA = int(os.environ.get("METADATA", 100 if SMOKE else 1000))
META = f"{METADATA} links+folders+modes"
TAG = os.urandom(3).hex()
SHAPES = {"100mbit": ("100mbit", 1000), "lan": ("1gbit", 250)}  # rate, one-way delay in microseconds
INTERNAL = (".share-", ".sharefolder", ".stfolder", ".stversions")
rows = []  # (profile, phase, tool, seconds, bytes, cpu, rss)


def log(*words):
    print(*words, file=sys.stderr, flush=True)


# MARK: Namespaces

libc = ctypes.CDLL(None, use_errno=True)
CLONE_NEWNET = 0x40000000


class Net:
    """Three devices: one namespace (loopback) or three joined pairwise by shaped links (a mesh)."""

    def __init__(self, profile):
        self.profile = profile
        self.shapers = []
        if profile == "loopback":
            ns = f"bsy-{TAG}"
            subprocess.run(["ip", "netns", "add", ns], check=True)
            subprocess.run(["ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up"], check=True)
            self.ns = [ns] * 3
            self.interfaces = [(ns, "lo")]
            self.listen = ["127.0.0.1"] * 3
            return
        rate, delay = SHAPES[profile]
        self.ns = [f"bs{i}-{TAG}" for i in range(3)]
        for ns in self.ns:
            subprocess.run(["ip", "netns", "add", ns], check=True)
            subprocess.run(["ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up"], check=True)
        self.interfaces = []
        for i, j in ((0, 1), (0, 2), (1, 2)):
            name = f"l{i}{j}"
            shaper = subprocess.Popen(
                [os.path.join(WORK, "linkshaper"), self.ns[i], self.ns[j], str(delay), name],
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            if shaper.stdout.readline().strip() != "ready":
                raise SystemExit("bench-sync: the link shaper did not start")
            self.shapers.append(shaper)
            for end, device in ((1, i), (2, j)):
                run = ["ip", "netns", "exec", self.ns[device]]
                subprocess.run(run + ["ip", "addr", "add", f"10.81.{10 * i + j}.{end}/24", "dev", name], check=True)
                subprocess.run(run + ["ip", "link", "set", name, "up"], check=True)
                subprocess.run(run + ["tc", "qdisc", "replace", "dev", name, "root", "tbf", "rate", rate, "burst",
                                      "256kb", "latency", "20ms"], check=True)
                if end == 1:
                    self.interfaces.append((self.ns[device], name))
        self.listen = ["0.0.0.0"] * 3

    def address(self, i, j):
        """Where device i reaches device j."""
        if self.profile == "loopback":
            return "127.0.0.1"
        a, b = min(i, j), max(i, j)
        return f"10.81.{10 * a + b}.{2 if j == b else 1}"

    def command(self, i, argv):
        return ["ip", "netns", "exec", self.ns[i], *argv]

    def bytes(self):
        """Bytes the links carried so far, both directions."""
        total = 0
        for ns, name in self.interfaces:
            out = subprocess.run(["ip", "netns", "exec", ns, "cat", f"/sys/class/net/{name}/statistics/tx_bytes",
                                  f"/sys/class/net/{name}/statistics/rx_bytes"], capture_output=True, text=True)
            values = [int(v) for v in out.stdout.split()]
            total += values[0] if name == "lo" else sum(values)
        return total

    def connect(self, i, host, port):
        """A TCP connection made inside device i's namespace."""
        own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
        target = os.open(f"/var/run/netns/{self.ns[i]}", os.O_RDONLY)
        try:
            if libc.setns(target, CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), "setns")
            try:
                return socket.create_connection((host, port), timeout=5)
            finally:
                libc.setns(own, CLONE_NEWNET)
        finally:
            os.close(own)
            os.close(target)

    def close(self):
        for shaper in self.shapers:
            shaper.kill()
            shaper.wait()
        for ns in set(self.ns):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


# MARK: Processes

def cpu_seconds(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except OSError:
        return 0.0


def peak_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def reap(process):
    """Waits for a child (bounded) and returns its peak RSS in KiB, as the kernel kept it."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        pid, status, usage = os.wait4(process.pid, os.WNOHANG)
        if pid == process.pid:
            process.returncode = os.waitstatus_to_exitcode(status)
            return usage.ru_maxrss
        time.sleep(0.05)
    process.kill()
    process.wait()
    return 0


def stop(processes):
    for p in processes:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in processes:
        try:
            p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def busy_seconds():
    """CPU seconds the machine spent busy so far (every process and the kernel)."""
    with open("/proc/stat") as f:
        fields = [int(v) for v in f.readline().split()[1:]]
    # user nice system idle iowait irq softirq steal
    return (sum(fields[:8]) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


class Clock:
    """One measured phase: seconds, bytes on the links, and the machine's busy CPU seconds meanwhile (every tool's
    processes alike: rsync's ssh and sshd too, and the benchmark's own polling)."""

    def __init__(self, net, processes=()):
        # What earlier phases and the set-up wrote is on the disk before the clock starts (as bench-transfer.sh
        # settles): otherwise the kernel's writeback of, say, the 100,000 files just copied in runs during whichever
        # tool's clock comes next, and each phase pays for the one before it.
        os.sync()
        self.net = net
        self.cpu = busy_seconds()
        self.bytes = net.bytes()
        self.start = time.monotonic()
        self.wall = time.time()

    def stop(self, at=None):
        seconds = (at or time.monotonic()) - self.start
        if os.environ.get("MARKS"):
            with open(os.environ["MARKS"], "a") as marks:
                marks.write(f"{self.wall:.3f} {self.wall + seconds:.3f}\n")
        return seconds, self.net.bytes() - self.bytes, busy_seconds() - self.cpu


# MARK: Workloads

def make_folder(root, count, seed):
    """`count` random files of 1–20 KiB, 100 to a folder, written an hour ago."""
    rng = random.Random(seed)
    for n in range(count):
        path = os.path.join(root, f"d{n // 100:03d}", f"f{n:05d}.bin")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(rng.randbytes(rng.randint(1024, 20 * 1024)))
    past = time.time() - 3600
    for base, _, names in os.walk(root):
        for name in names:
            os.utime(os.path.join(base, name), (past, past))


def make_many(root, count):
    """`count` small text files, 1,000 to a folder."""
    for n in range(count):
        path = os.path.join(root, f"t{n // 1000:03d}", f"n{n:06d}.txt")
        if n % 1000 == 0:
            os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(f"note {n}: " + "x" * (n % 90) + "\n")


def files_of(root):
    return sorted(os.path.relpath(os.path.join(base, n), root) for base, dirs, names in os.walk(root)
                  for n in names if not any(part.startswith(INTERNAL) for part in
                                            os.path.relpath(os.path.join(base, n), root).split(os.sep)))


def update(root, seed, edits=EDITS, renames=RENAMES, removals=REMOVALS):
    """Edits (1 KiB rewritten in place), renames (in their folder) and removals of distinct files: chosen now (a walk
    of the whole tree), made when the returned function is called, once the tool's clock runs."""
    rng = random.Random(seed)
    picked = rng.sample(files_of(root), edits + renames + removals)

    def make():
        for path in picked[:edits]:
            full = os.path.join(root, path)
            size = os.path.getsize(full)
            with open(full, "r+b") as f:
                f.seek(rng.randrange(0, max(1, size - 1024)))
                f.write(rng.randbytes(1024))
        for n, path in enumerate(picked[edits:edits + renames]):
            full = os.path.join(root, path)
            os.rename(full, os.path.join(os.path.dirname(full), f"renamed-{seed}-{n}.bin"))
        for path in picked[edits + renames:]:
            os.remove(os.path.join(root, path))
    return make


def metadata_change(root, seed):
    """METADATA symbolic links (half to a file of the folder, half leaving it), METADATA empty folders, and the
    executable bit set on METADATA files: no content at all. Chosen now, made when the returned function is called."""
    rng = random.Random(seed)
    names = files_of(root)
    targets = [os.path.join("..", rng.choice(names)) if n % 2 == 0 else f"../../outside/{n}" for n in range(METADATA)]
    executables = rng.sample(names, min(METADATA, len(names)))

    def make():
        os.makedirs(os.path.join(root, "links"))
        os.makedirs(os.path.join(root, "empty"))
        for n, target in enumerate(targets):
            os.symlink(target, os.path.join(root, "links", f"l{n}"))
            os.makedirs(os.path.join(root, "empty", f"e{n}"))
        for path in executables:
            os.chmod(os.path.join(root, path), 0o755)
    return make


def meta_tree(root):
    """Every entry but the tools' own: its kind, a link's target, the permission bits."""
    out = {}
    for base, dirs, names in os.walk(root):
        for name in dirs + names:
            full = os.path.join(base, name)
            rel = os.path.relpath(full, root)
            if any(part.startswith(INTERNAL) for part in rel.split(os.sep)):
                continue
            st = os.lstat(full)
            kind = "link" if os.path.islink(full) else "dir" if os.path.isdir(full) else "file"
            out[rel] = (kind, os.readlink(full) if kind == "link" else "", st.st_mode & 0o777 if kind != "link" else 0)
    return out


def discard(path):
    """Moves a finished run's folder aside (removed with WORK): ext4 checks every inode it hands out against those
    freed in the last seconds (recently_deleted), so deleting thousands of files would charge the next run's creates."""
    if os.path.exists(path):
        aside = os.path.join(WORK, "discarded")
        os.makedirs(aside, exist_ok=True)
        os.rename(path, os.path.join(aside, f"{len(os.listdir(aside))}-{os.path.basename(path)}"))


def same_tree(a, b):
    names = files_of(a)
    return names == files_of(b) and all(filecmp.cmp(os.path.join(a, n), os.path.join(b, n), shallow=False)
                                        for n in names)


def copy_tree(source, target):
    discard(target)
    subprocess.run(["cp", "-a", source, target], check=True)


def record(profile, phase, tool, result, rss=0):
    seconds, moved, cpu = result
    rows.append((profile, phase, tool, seconds, moved, cpu, rss))
    log(f"  {profile} {phase} {tool}: {seconds:.3f} s, {moved} bytes, CPU {cpu:.2f} s, RSS {rss} KiB")


# MARK: share

class ShareDevices:
    """Three share devices that trust each other as the owner's; each agent takes the others' folders unasked."""

    def __init__(self, net, name):
        self.net = net
        self.root = os.path.join(WORK, name)
        discard(self.root)
        self.configs = [os.path.join(self.root, f"c{i}") for i in range(3)]
        self.ports = [22100 + i for i in range(3)]
        self.agents = []
        ids = []
        for i, config in enumerate(self.configs):
            subprocess.run([BIN, "id", "--config", config, "--name", f"dev{i}"], check=True, capture_output=True)
            ids.append(subprocess.run([BIN, "id", "--config", config], check=True, capture_output=True,
                                      text=True).stdout.strip().splitlines()[-1])
        for i, config in enumerate(self.configs):
            for j in range(3):
                if i != j:
                    subprocess.run([BIN, "trust", "add", "--config", config, ids[j], "--name", f"dev{j}", "--team",
                                    "--address", f"{net.address(i, j)}:{self.ports[j]}"], check=True,
                                   capture_output=True)
            with open(os.path.join(config, "agent.json"), "w") as f:
                json.dump({"folders": {"autoAccept": [f"dev{j}" for j in range(3) if j != i],
                                       "path": self.place(i)}}, f)

    def place(self, i):
        return os.path.join(self.root, f"in{i}")

    def start(self):
        for i, config in enumerate(self.configs):
            out = open(os.path.join(self.root, f"agent{i}.log"), "a")
            self.agents.append(subprocess.Popen(self.net.command(i, [
                BIN, "agent", "--config", config, "--port", str(self.ports[i]), "--listen", self.net.listen[i],
                "--no-discovery"] + (["--log-level", os.environ["AGENT_LOG"]] if os.environ.get("AGENT_LOG") else [])),
                stdout=out, stderr=subprocess.STDOUT))
        for i in range(3):
            deadline = time.monotonic() + 60
            while not os.path.exists(self.socket(i)):
                if time.monotonic() > deadline or self.agents[i].poll() is not None:
                    raise SystemExit(f"bench-sync: agent {i} did not start; see {self.root}/agent{i}.log")
                time.sleep(0.05)

    def stop(self):
        stop(self.agents)
        self.agents = []

    def socket(self, i):
        return os.path.join(self.configs[i], "state", "agent.sock")

    def ask(self, i, request):
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(30 + request.get("timeout", 0))
        try:
            s.connect(self.socket(i))
            s.sendall(json.dumps(request).encode() + b"\n")
            data = b""
            while not data.endswith(b"\n"):
                part = s.recv(1 << 20)
                if not part:
                    break
                data += part
            return json.loads(data)
        finally:
            s.close()

    def folders(self, i, wait=None):
        """Device i's folders; with `wait`, once they are up to date and in step (the agent answers then, or after
        `wait` seconds: `share sync --wait`'s request)."""
        request = {"op": "folders"}
        if wait is not None:
            request["timeout"] = max(0.0, wait)
        try:
            return self.ask(i, request).get("folders") or []
        except (OSError, ValueError):
            return []

    def settled(self, files, wait=None):
        """Whether every device holds `files` files of one folder, up to date and in step with every other (each
        device asked to answer once it is, within `wait` seconds)."""
        for i in range(3):
            folders = self.folders(i, wait)
            if len(folders) != 1:
                return False
            folder = folders[0]
            if os.environ.get("SETTLE_TRACE"):
                log(f"{time.time():.3f} d{i} {folder['state']} files={folder['files']} needed={folder['neededFiles']} "
                    f"peers={[(p.get('inStep'), p.get('differences', p.get('outOfStep'))) for p in folder['peers']]}")
            if (folder["state"] != "up to date" or folder["files"] != files or folder["neededFiles"] != 0
                    or not all(p["inStep"] for p in folder["peers"])):
                return False
        return True

    def path(self, i):
        folders = self.folders(i)
        return folders[0]["settings"]["path"] if folders else None

    def share(self, folder):
        out = subprocess.run(self.net.command(0, [BIN, "sync", "add", folder, "--config", self.configs[0], "--with",
                                                  "dev1", "--with", "dev2"]), capture_output=True, text=True)
        if out.returncode != 0:
            raise SystemExit(f"bench-sync: share sync add failed: {out.stderr.strip()}")
        line = next(line for line in out.stderr.splitlines() if line.startswith("sharing "))
        return line.split(" (", 1)[1].split(")", 1)[0]

    def wait_converged(self, clock, source, files):
        """Polls until every device is in step and holds `source`'s tree; the clock's result then."""
        deadline = time.monotonic() + LIMIT
        while time.monotonic() < deadline:
            if self.settled(files, wait=deadline - time.monotonic()):
                at = time.monotonic()
                paths = [self.path(i) for i in (1, 2)]
                if all(p and same_tree(source, p) for p in paths):
                    return clock.stop(at)
            time.sleep(0.05)
        for i in range(3):
            log(f"    device {i}: {json.dumps(self.folders(i))[:600]}")
        raise SystemExit("bench-sync: share did not converge within the limit")

    def wait_meta(self, clock, source):
        """Polls until every device is up to date, in step, and holds `source`'s entries (kinds, links, modes)."""
        deadline = time.monotonic() + LIMIT
        want = meta_tree(source)
        while time.monotonic() < deadline:
            folders = [self.folders(i, wait=deadline - time.monotonic()) for i in range(3)]
            if all(len(f) == 1 and f[0]["state"] == "up to date" and f[0]["neededFiles"] == 0
                   and all(p["inStep"] for p in f[0]["peers"]) for f in folders):
                at = time.monotonic()
                if all(meta_tree(self.path(i)) == want for i in (1, 2)):
                    return clock.stop(at)
            time.sleep(0.05)
        raise SystemExit("bench-sync: share did not carry the links, folders and modes within the limit")

    def peak(self):
        return max(peak_kib(p.pid) for p in self.agents)


def share_send_both(net, profile, source):
    """`share send` of the folder from device 0 to `share receive` on devices 1 and 2 at once."""
    devices = ShareDevices(net, "send")
    into = [os.path.join(devices.root, f"got{i}") for i in range(3)]
    receivers = []
    for i in (1, 2):
        os.makedirs(into[i])
        receivers.append(subprocess.Popen(net.command(i, [
            BIN, "receive", "--config", devices.configs[i], "--port", str(devices.ports[i]), "--listen",
            net.listen[i], "--into", into[i], "--timeout", str(int(LIMIT)), "--quiet"]),
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
    time.sleep(0.5 if SMOKE else 1)  # each receiver's port is fixed; a send retries until it answers
    clock = Clock(net, receivers)
    senders = [subprocess.Popen(net.command(0, [BIN, "send", "--config", devices.configs[0], "--direct", "--quiet",
                                                "--to", f"{net.address(0, i)}:{devices.ports[i]}", source]),
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for i in (1, 2)]
    for p in senders:
        p.wait(timeout=LIMIT)
    result = clock.stop()
    rss = max(reap(p) for p in receivers)
    for i in (1, 2):
        got = os.path.join(into[i], os.path.basename(source))
        if not same_tree(source, got):
            raise SystemExit(f"bench-sync: share send delivered something else to device {i}")
    record(profile, "first", "share send", result, rss)
    discard(devices.root)


def share_sync(net, profile, pristine, seed):
    """The first sync of the folder from device 0, then an update, renames alone and one edit."""
    devices = ShareDevices(net, "sync")
    source = os.path.join(devices.root, "bench")
    copy_tree(pristine, source)
    devices.start()
    try:
        clock = Clock(net, devices.agents)
        before = [cpu_seconds(p.pid) for p in devices.agents]
        devices.share(source)
        result = devices.wait_converged(clock, source, FILES)
        if os.environ.get("SETTLE_TRACE"):
            log("    CPU seconds of each agent: "
                + ", ".join(f"{cpu_seconds(p.pid) - b:.2f}" for p, b in zip(devices.agents, before)))
        record(profile, "first", "share sync", result, devices.peak())
        change = update(source, seed)
        clock = Clock(net, devices.agents)
        change()
        record(profile, "update", "share sync", devices.wait_converged(clock, source, FILES - REMOVALS),
               devices.peak())
        change = update(source, seed + 1000, edits=0, removals=0)
        clock = Clock(net, devices.agents)
        change()
        seconds, moved, cpu = devices.wait_converged(clock, source, FILES - REMOVALS)
        record(profile, f"{RENAMES} renames", "share sync", (seconds, moved, cpu), devices.peak())
        record_edit(profile, "share sync", source, [devices.path(1), devices.path(2)], net)
        change = metadata_change(source, seed)
        clock = Clock(net, devices.agents)
        change()
        record(profile, META, "share sync", devices.wait_meta(clock, source), devices.peak())
    finally:
        devices.stop()
    discard(devices.root)


def record_edit(profile, tool, source, copies, net):
    """One 8 KiB file rewritten on device 0: seconds until both others hold it (as saved: watchers decide)."""
    names = files_of(source)
    path = names[len(names) // 2]
    data = os.urandom(8192)
    clock = Clock(net)
    with open(os.path.join(source, path), "wb") as f:
        f.write(data)
    deadline = time.monotonic() + LIMIT
    while time.monotonic() < deadline:
        held = 0
        for copy in copies:
            try:
                with open(os.path.join(copy, path), "rb") as f:
                    held += f.read() == data
            except OSError:
                pass
        if held == len(copies):
            record(profile, "one edit", tool, clock.stop())
            return
        time.sleep(0.01)
    raise SystemExit(f"bench-sync: {tool} did not carry one edit within the limit")


# MARK: rsync

def rsync_run(net, profile, phase, source, targets, flags):
    clock = Clock(net)
    runs = [subprocess.Popen(net.command(0, ["rsync", *flags, "--delete", "-e",
                                             f"ssh {SSHOPTS} -p 2222", source + "/",
                                             f"root@{net.address(0, i)}:{targets[i - 1]}/"]),
                             stderr=subprocess.PIPE, text=True) for i in (1, 2)]
    for p in runs:
        if p.wait(timeout=LIMIT) != 0:
            raise SystemExit(f"bench-sync: rsync failed: {p.stderr.read().strip()}")
    result = clock.stop()
    for target in targets:
        if not same_tree(source, target):
            raise SystemExit(f"bench-sync: rsync {' '.join(flags)} left another tree")
    record(profile, phase, "rsync " + " ".join(flags), result)


def rsync_all(net, profile, pristine, seed):
    root = os.path.join(WORK, "rsync")
    discard(root)
    os.makedirs(root)
    source = os.path.join(root, "bench")
    copy_tree(pristine, source)
    targets = [os.path.join(root, f"to{i}") for i in (1, 2)]
    for target in targets:
        os.makedirs(target)
    rsync_run(net, profile, "first", source, targets, ["-a"])
    update(source, seed)()
    for flags in (["-a"], ["-az"]):
        for target in targets:
            copy_tree(pristine, target)
        rsync_run(net, profile, "update", source, targets, flags)
    discard(root)


# MARK: Syncthing

class Syncthing:
    """Three Syncthing devices, each knowing the other two at fixed addresses (no discovery, relays or NAT)."""

    def __init__(self, net, folders, paused_first):
        self.net = net
        self.root = os.path.join(WORK, "syncthing")
        discard(self.root)
        loop = net.profile == "loopback"
        self.ports = [(22000 + i, 8384 + i) if loop else (22000, 8384) for i in range(3)]
        self.homes = [os.path.join(self.root, f"h{i}") for i in range(3)]
        ids = []
        for home in self.homes:
            subprocess.run(["syncthing", "generate", f"--home={home}", "--no-default-folder",
                            "--skip-port-probing"], check=True, capture_output=True, timeout=60)
            ids.append(subprocess.run(["syncthing", "serve", f"--home={home}", "--device-id"], check=True,
                                      capture_output=True, text=True, timeout=60).stdout.strip())
        self.keys = []
        for i, home in enumerate(self.homes):
            os.makedirs(os.path.join(folders[i], ".stfolder"), exist_ok=True)
            self.keys.append(self.configure(i, home, ids, folders[i], paused=paused_first and i == 0))
        env = dict(os.environ, STNOUPGRADE="1", STNORESTART="1", STMONITORED="yes")
        out = open(os.path.join(self.root, "syncthing.log"), "w")
        self.processes = [subprocess.Popen(net.command(i, ["syncthing", "serve", f"--home={home}", "--no-browser",
                                                           "--no-restart"]), env=env, stdout=out,
                                           stderr=subprocess.STDOUT) for i, home in enumerate(self.homes)]
        # Each device's folder events, long-polled: a wait below looks again as soon as a folder changes state or
        # completes on another device (as share's status answers the moment it settles), and every 50 ms anyway.
        self.changed = threading.Event()
        self.stopping = False
        self.followers = [threading.Thread(target=self.follow, args=(i,), daemon=True) for i in range(3)]
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if all(self.connected(i) == 2 for i in range(3)):
                for follower in self.followers:
                    follower.start()
                return
            time.sleep(0.2)
        self.stop()
        raise SystemExit("bench-sync: the Syncthing devices did not connect")

    EVENTS = "events=StateChanged,FolderCompletion"

    def follow(self, i):
        """Sets `changed` whenever device `i` reports a folder event (until `stop`)."""
        last = self.rest(i, "GET", f"/rest/events?{self.EVENTS}&limit=1&timeout=0") or []
        since = last[-1]["id"] if last else 0
        while not self.stopping:
            events = self.rest(i, "GET", f"/rest/events?{self.EVENTS}&since={since}&timeout=1")
            if events:
                since = events[-1]["id"]
                self.changed.set()
            elif events is None:
                time.sleep(0.05)  # not answering (stopping): the loop's bound is `stopping`

    def settle(self):
        """Waits for the next folder event on any device, 50 ms at the most."""
        self.changed.wait(0.05)

    def configure(self, i, home, ids, path, paused):
        config = os.path.join(home, "config.xml")
        tree = ET.parse(config)
        root = tree.getroot()
        for element in root.findall("folder") + [d for d in root.findall("device") if d.get("id") != ids[i]]:
            root.remove(element)
        folder = ET.SubElement(root, "folder", {
            "id": "bench", "label": "bench", "path": path, "type": "sendreceive", "rescanIntervalS": "3600",
            "fsWatcherEnabled": "true", "fsWatcherDelayS": "10", "ignorePerms": "false", "autoNormalize": "true"})
        ET.SubElement(folder, "paused").text = "true" if paused else "false"
        for device_id in ids:
            ET.SubElement(folder, "device", {"id": device_id, "introducedBy": ""})
        ET.SubElement(folder, "minDiskFree", {"unit": "%"}).text = "0"
        for j, device_id in enumerate(ids):
            if j == i:
                continue
            device = ET.SubElement(root, "device", {"id": device_id, "name": f"dev{j}", "compression": "metadata",
                                                    "introducer": "false", "introducedBy": ""})
            # The lower device dials (two dials at once can leave neither connection kept).
            ET.SubElement(device, "address").text = (
                f"tcp://{self.net.address(i, j)}:{self.ports[j][0]}" if i < j else "dynamic")
        gui = root.find("gui")
        gui.set("tls", "false")
        gui.find("address").text = f"127.0.0.1:{self.ports[i][1]}"
        options = root.find("options")
        for element in options.findall("listenAddress"):
            options.remove(element)
        ET.SubElement(options, "listenAddress").text = f"tcp://{self.net.listen[i]}:{self.ports[i][0]}"
        for name, value in [
            ("globalAnnounceEnabled", "false"), ("localAnnounceEnabled", "false"), ("relaysEnabled", "false"),
            ("natEnabled", "false"), ("urAccepted", "-1"), ("autoUpgradeIntervalH", "0"), ("startBrowser", "false"),
            ("crashReportingEnabled", "false"), ("announceLANAddresses", "false"), ("reconnectionIntervalS", "5"),
        ]:
            element = options.find(name)
            if element is None:
                element = ET.SubElement(options, name)
            element.text = value
        tree.write(config)
        return gui.findtext("apikey")

    def rest(self, i, method, path, body=None):
        try:
            sock = self.net.connect(i, "127.0.0.1", self.ports[i][1])
        except OSError:
            return None
        connection = http.client.HTTPConnection("127.0.0.1", self.ports[i][1], timeout=10)
        connection.sock = sock
        try:
            headers = {"X-API-Key": self.keys[i]}
            if body is not None:
                headers["Content-Type"] = "application/json"
            connection.request(method, path, body=json.dumps(body) if body is not None else None, headers=headers)
            answer = connection.getresponse()
            data = answer.read()
            return json.loads(data) if data and answer.status == 200 else ({} if answer.status == 200 else None)
        except (OSError, ValueError, http.client.HTTPException):
            return None
        finally:
            connection.close()

    def connected(self, i):
        state = self.rest(i, "GET", "/rest/system/connections") or {}
        return sum(1 for c in (state.get("connections") or {}).values() if c.get("connected"))

    def in_step(self, i, files):
        state = self.rest(i, "GET", "/rest/db/status?folder=bench")
        return bool(state and state.get("state") == "idle" and state.get("needFiles") == 0
                    and state.get("localFiles") == files and state.get("globalFiles") == files
                    and state.get("needDeletes", 0) == 0)

    def wait_converged(self, clock, folders, files):
        deadline = time.monotonic() + LIMIT
        while time.monotonic() < deadline:
            self.changed.clear()
            if all(self.in_step(i, files) for i in range(3)):
                at = time.monotonic()
                if all(same_tree(folders[0], folders[i]) for i in (1, 2)):
                    return clock.stop(at)
            self.settle()
        raise SystemExit("bench-sync: Syncthing did not converge within the limit")

    def scan(self, i):
        self.rest(i, "POST", "/rest/db/scan?folder=bench")

    def wait_meta(self, clock, folders):
        deadline = time.monotonic() + LIMIT
        while time.monotonic() < deadline:
            self.changed.clear()
            states = [self.rest(i, "GET", "/rest/db/status?folder=bench") or {} for i in range(3)]
            if all(s.get("state") == "idle" and s.get("needTotalItems", 1) == 0 for s in states):
                at = time.monotonic()
                want = meta_tree(folders[0])
                if all(meta_tree(folders[i]) == want for i in (1, 2)):
                    return clock.stop(at)
            self.settle()
        raise SystemExit("bench-sync: Syncthing did not carry the links, folders and modes within the limit")

    def peak(self):
        return max(peak_kib(p.pid) for p in self.processes)

    def stop(self):
        self.stopping = True
        stop(self.processes)
        for follower in self.followers:
            if follower.is_alive():
                follower.join(15)  # a long poll answers within its second; a dead device's connect fails at once


def syncthing_all(net, profile, pristine, seed):
    root = os.path.join(WORK, "st-folders")
    discard(root)
    os.makedirs(root)
    folders = [os.path.join(root, f"f{i}") for i in range(3)]
    copy_tree(pristine, folders[0])
    for folder in folders[1:]:
        os.makedirs(folder)
    st = Syncthing(net, folders, paused_first=True)
    try:
        clock = Clock(net, st.processes)
        # The first device's folder is resumed: it scans and the others fetch (as share sync add starts).
        if st.rest(0, "PATCH", "/rest/config/folders/bench", {"paused": False}) is None:
            raise SystemExit("bench-sync: Syncthing would not resume its folder")
        record(profile, "first", "syncthing", st.wait_converged(clock, folders, FILES), st.peak())
        change = update(folders[0], seed)
        clock = Clock(net, st.processes)
        change()
        record(profile, "update", "syncthing (watcher, 10 s)", st.wait_converged(clock, folders, FILES - REMOVALS),
               st.peak())
        change = update(folders[0], seed + 1, edits=EDITS, renames=RENAMES, removals=REMOVALS)
        clock = Clock(net, st.processes)
        change()
        st.scan(0)
        record(profile, "update", "syncthing (rescan at once)",
               st.wait_converged(clock, folders, FILES - 2 * REMOVALS), st.peak())
        change = update(folders[0], seed + 1000, edits=0, removals=0)
        clock = Clock(net, st.processes)
        change()
        st.scan(0)
        record(profile, f"{RENAMES} renames", "syncthing (rescan at once)",
               st.wait_converged(clock, folders, FILES - 2 * REMOVALS), st.peak())
        record_edit(profile, "syncthing (watcher, 10 s)", folders[0], folders[1:], net)
        change = metadata_change(folders[0], seed)
        clock = Clock(net, st.processes)
        change()
        st.scan(0)
        record(profile, META, "syncthing (rescan at once)", st.wait_meta(clock, folders), st.peak())
    finally:
        st.stop()
    discard(root)
    discard(st.root)


# MARK: Many files, idle, rescan

def many(net, profile):
    pristine = os.path.join(WORK, "many-pristine")
    make_many(pristine, MANY)
    devices = ShareDevices(net, "many")
    source = os.path.join(devices.root, "notes")
    copy_tree(pristine, source)
    devices.start()
    try:
        clock = Clock(net, devices.agents)
        before = [cpu_seconds(p.pid) for p in devices.agents]
        folder = devices.share(source)
        result = devices.wait_converged(clock, source, MANY)
        if os.environ.get("SETTLE_TRACE"):
            log("    CPU seconds of each agent: "
                + ", ".join(f"{cpu_seconds(p.pid) - b:.2f}" for p, b in zip(devices.agents, before)))
        record(profile, f"first, {MANY} files", "share sync", result, devices.peak())
        if os.environ.get("SETTLE_TRACE"):
            for i in range(3):
                for _ in range(3):
                    t = time.monotonic()
                    devices.folders(i)
                    log(f"status of d{i}: {time.monotonic() - t:.3f} s")
        # Idle: nothing changes; the agents' CPU over IDLE seconds, after a quarter of it to settle.
        time.sleep(IDLE / 4)
        before = [cpu_seconds(p.pid) for p in devices.agents]
        time.sleep(IDLE)
        cpu = [(cpu_seconds(p.pid) - b) / IDLE * 100 for p, b in zip(devices.agents, before)]
        rss = []
        for p in devices.agents:
            with open(f"/proc/{p.pid}/status") as f:
                rss += [int(line.split()[1]) for line in f if line.startswith("VmRSS:")]
        print(f"idle with {MANY} files: agent CPU {', '.join(f'{c:.2f}' for c in cpu)} %, "
              f"RSS {', '.join(str(r) for r in rss)} KiB")
        started = time.monotonic()
        out = subprocess.run([BIN, "sync", "rescan", folder, "--config", devices.configs[0], "--json"],
                             capture_output=True, text=True, timeout=LIMIT)
        if out.returncode != 0:
            raise SystemExit(f"bench-sync: share sync rescan failed: {out.stderr.strip()}")
        status = json.loads(out.stdout)
        print(f"full rescan of {status['files']} unchanged files: {status['lastScanSeconds']:.3f} s "
              f"(the command took {time.monotonic() - started:.3f} s)")
    finally:
        devices.stop()
    discard(devices.root)
    root = os.path.join(WORK, "rsync-many")
    os.makedirs(root)
    targets = [os.path.join(root, f"to{i}") for i in (1, 2)]
    for target in targets:
        os.makedirs(target)
    rsync_run(net, profile, f"first, {MANY} files", pristine, targets, ["-a"])
    discard(root)
    discard(pristine)


# MARK: The run

SSHOPTS = (f"-i {WORK}/ssh/id -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o BatchMode=yes "
           "-o LogLevel=ERROR -c aes128-gcm@openssh.com")


def sshd(net):
    """sshd in each receiving device's namespace (one for loopback), for rsync."""
    daemons = []
    for i in ({1} if net.profile == "loopback" else {1, 2}):
        config = os.path.join(WORK, "ssh", f"config{i}")
        with open(os.path.join(WORK, "ssh", "config")) as f:
            text = f.read().replace(f"{WORK}/sshd.pid", f"{WORK}/sshd{i}.pid")
        with open(config, "w") as f:
            f.write(text.replace("ListenAddress 127.0.0.1", f"ListenAddress {net.listen[i]}"))
        subprocess.run(net.command(i, ["/usr/sbin/sshd", "-f", config]), check=True)
        daemons.append(os.path.join(WORK, f"sshd{i}.pid"))
    for i in (1, 2):
        for _ in range(100):
            if subprocess.run(net.command(0, ["ssh", *SSHOPTS.split(), "-p", "2222", f"root@{net.address(0, i)}",
                                              "true"]), capture_output=True).returncode == 0:
                break
            time.sleep(0.1)
    return daemons


def main():
    print(f"bench-sync: {FILES} files ({MANY} on loopback), links: {' '.join(PROFILES)}, "
          f"{ROUNDS} round(s){'' if SYNCTHING else ', without Syncthing'}", flush=True)
    pristine = os.path.join(WORK, "pristine")
    make_folder(pristine, FILES, seed=7)
    for profile in PROFILES:
        net = Net(profile)
        daemons = []
        try:
            daemons = sshd(net)
            for round_ in range(ROUNDS):
                seed = 100 + round_
                if "send" in PHASES:
                    share_send_both(net, profile, pristine)
                if "sync" in PHASES:
                    share_sync(net, profile, pristine, seed)
                if "rsync" in PHASES:
                    rsync_all(net, profile, pristine, seed)
                if SYNCTHING and "syncthing" in PHASES:
                    syncthing_all(net, profile, pristine, seed)
            if profile == "loopback" and "many" in PHASES:
                many(net, profile)
        finally:
            for pid_file in daemons:
                try:
                    os.kill(int(open(pid_file).read()), signal.SIGTERM)
                except (OSError, ValueError):
                    pass
            net.close()
    if PHASES != ["send", "sync", "rsync", "syncthing", "many"]:
        return
    # The table: medians over the rounds.
    print(f"{'link':<9} {'phase':<22} {'tool':<28} {'seconds':>8} {'bytes':>12} {'CPU s':>7} {'peak RSS KiB':>13}")
    keys = []
    for row in rows:
        if row[:3] not in keys:
            keys.append(row[:3])
    medians = {}
    for key in keys:
        picked = [r for r in rows if r[:3] == key]

        def median(index):
            values = sorted(r[index] for r in picked)
            return values[(len(values) - 1) // 2]
        medians[key] = (median(3), median(4), median(5), median(6))
        seconds, moved, cpu, rss = medians[key]
        print(f"{key[0]:<9} {key[1]:<22} {key[2]:<28} {seconds:>8.3f} {moved:>12} {cpu:>7.2f} {rss or '-':>13}")
    # The targets, each as a verdict line.
    for profile in PROFILES:
        def get(phase, tool):
            return medians.get((profile, phase, tool))
        sync, send = get("first", "share sync"), get("first", "share send")
        print(f"{profile} first sync: {sync[0] / send[0]:.2f}x share send "
              f"({'ok' if sync[0] <= 1.5 * send[0] else 'OVER'}, at most 1.5x)")
        st = get("first", "syncthing")
        if st:
            print(f"{profile} first sync: {sync[0] / st[0]:.2f}x Syncthing ({'ok' if sync[0] < st[0] else 'OVER'})")
        up, z = get("update", "share sync"), get("update", "rsync -az")
        print(f"{profile} update: {up[1]} bytes, {up[1] / max(1, z[1]):.2f}x rsync -az's "
              f"({'ok' if up[1] <= z[1] else 'OVER'})")
        st = get("update", "syncthing (rescan at once)")
        if st:
            print(f"{profile} update: {up[0] / st[0]:.2f}x Syncthing's time with a rescan at once "
                  f"({'ok' if up[0] < st[0] else 'OVER'})")
        renames = get(f"{RENAMES} renames", "share sync")
        print(f"{profile} a rename: {renames[1] / RENAMES:.0f} bytes ({'ok' if renames[1] / RENAMES < 1000 else 'OVER'},"
              f" under 1 KB)")
        meta, st = get(META, "share sync"), get(META, "syncthing (rescan at once)")
        if st:
            print(f"{profile} {META}: {meta[0]:.3f} s, {meta[0] / st[0]:.2f}x Syncthing's time "
                  f"({'ok' if meta[0] < st[0] else 'OVER'}); {meta[1]} bytes, {meta[1] / max(1, st[1]):.2f}x "
                  f"Syncthing's ({'ok' if meta[1] <= 1.2 * st[1] else 'OVER'}, at most 1.2x)")
        edit = get("one edit", "share sync")
        print(f"{profile} one edit on both others after {edit[0]:.3f} s ({'ok' if edit[0] <= 2 else 'OVER'}, 2 s)")
        if profile == "loopback":
            m, r = get(f"first, {MANY} files", "share sync"), get(f"first, {MANY} files", "rsync -a")
            print(f"{profile} first sync of {MANY} files: {m[0] / r[0]:.2f}x rsync -a ({'ok' if m[0] < r[0] else 'OVER'})")


if __name__ == "__main__":
    main()
