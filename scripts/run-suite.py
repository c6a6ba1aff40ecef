#!/usr/bin/env python3
"""Runs the Swift Testing suite of a built test bundle in several processes at once.

The end-to-end suites start real `share` processes and mostly wait on them (handshakes, keepalives, timeouts), and
each test process runs its synchronous tests on a cooperative pool as wide as the machine (two threads here). So the
suites are spread over several test processes: every end-to-end suite is one job (its tests stay one at a time, as
the suite says), the other suites one job per test module, and a pool of workers takes the longest jobs first.
Every job has a time bound; a job that passes it is killed with every process it started. Logs go to LOGDIR, one per
job; a failing job's failures and the end of its log are printed.

Usage: scripts/run-suite.py [--binary PATH] [--jobs N] [--only REGEX] [--logs DIR] [--timeout SECONDS]
"""

import argparse
import queue
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Measured seconds of each end-to-end suite alone on the 2-core machine (scripts/run-suite.py writes the newest to
# LOGDIR/durations.json; copy it here when suites change a lot). Unknown suites count as 30 s.
DURATIONS = ROOT / "scripts" / "suite-durations.json"
E2E = re.compile(r"^(ShareKitTests\.EndToEnd(?:Agents)?/[^/]+)/")


def list_tests(binary):
    out = subprocess.run(
        [binary, "--testing-library", "swift-testing", "--list-tests"],
        capture_output=True, text=True, timeout=120, check=True,
    ).stdout
    return [line.strip() for line in out.splitlines() if "/" in line]


def plan(tests, only, known, split):
    """Jobs: (name, arguments, expected seconds). One per end-to-end suite (one per test for a suite that takes longer than
    `split` seconds: its tests are independent, each with devices of its own), and one per test module for the rest:
    a test process runs its tests on a pool as wide as the machine, and a few tests waiting on processes they started
    would hold every other module's tests back."""
    suites = {}
    modules = {}
    for test in tests:
        if only and not re.search(only, test):
            continue
        match = E2E.match(test)
        if match:
            suites.setdefault(match.group(1), []).append(test)
        else:
            modules.setdefault(test.split(".")[0], []).append(test)
    jobs = []
    for suite, members in suites.items():
        name = suite.split("/")[-1]
        weight = known.get(name, 30)
        if weight > split and len(members) > 1:
            for test in members:
                job = name + "/" + test.split("/")[-1]
                jobs.append((job, ["--filter", re.escape(test)], known.get(job, weight / len(members))))
        else:
            jobs.append((name, ["--filter", re.escape(suite) + "/"], weight))
    for module, members in sorted(modules.items()):
        # Filters are alternatives: a selection names its tests.
        selected = [re.escape(test) for test in members] if only else ["^" + re.escape(module) + r"\."]
        args = ["--skip", "EndToEnd"] + [part for test in selected for part in ("--filter", test)]
        jobs.append((module, args, known.get(module, 20)))
    if only and not jobs:
        sys.exit(f"run-suite: no test matches {only!r}")
    return jobs


# Each running job holds a slot, and its test process takes the ports it picks for agents from that slot's share of
# the range (Tests/ShareKitTests/Support/Tools.swift's freePort): two jobs at once never pick the same port.
SLOTS = queue.Queue()


def run_job(binary, name, args, logs, timeout, slots):
    slot = SLOTS.get()
    try:
        return run_slotted(binary, name, args, logs, timeout, slot, slots)
    finally:
        SLOTS.put(slot)


def run_slotted(binary, name, args, logs, timeout, slot, slots):
    log = logs / (re.sub(r"[^A-Za-z0-9_.-]", "_", name) + ".log")
    # What the job's agents and watches logged (Tests/ShareKitTests/Support/ShareBinary.swift keeps it there).
    processes = log.with_suffix(".processes")
    shutil.rmtree(processes, ignore_errors=True)
    start = time.monotonic()
    with open(log, "wb") as out:
        # A session of its own, so a job that passes its bound is killed with every process it started.
        process = subprocess.Popen(
            [binary, "--testing-library", "swift-testing"] + args,
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
            env=dict(
                os.environ, SHARE_TEST_PROCESS_LOGS=str(processes), SHARE_TEST_PORT_SLOT=str(slot),
                SHARE_TEST_PORT_SLOTS=str(slots),
            ),
        )
        # Waited for with wait4, for the CPU time the job took (the test process and every process it waited for).
        status, cpu, deadline = None, 0.0, start + timeout
        while True:
            pid, code, usage = os.wait4(process.pid, os.WNOHANG)
            if pid:
                status, cpu = os.waitstatus_to_exitcode(code), usage.ru_utime + usage.ru_stime
                process.returncode = status
                break
            if time.monotonic() > deadline:
                os.killpg(process.pid, signal.SIGKILL)
                _, _, usage = os.wait4(process.pid, 0)
                process.returncode, cpu = -9, usage.ru_utime + usage.ru_stime
                break
            time.sleep(0.1)
        # A test process that crashed never ran its clean-up: whatever it started and left running goes too.
        try:
            os.killpg(process.pid, signal.SIGKILL)
            out.write(b"\nrun-suite: processes this job left running were stopped\n")
        except ProcessLookupError:
            pass
    seconds = time.monotonic() - start
    text = log.read_text(errors="replace")
    summary = re.findall(r"Test run with (\d+) tests?", text)
    passed = status == 0 and "✘" not in text
    return name, passed, status, seconds, cpu, (summary[-1] if summary else "?"), log, text


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", default=str(ROOT / ".build/debug/sharePackageTests.xctest"))
    parser.add_argument("--jobs", type=int, default=int(os.environ.get("SHARE_TEST_JOBS", "4")))
    parser.add_argument("--only", help="run only the tests whose ID matches this regular expression")
    parser.add_argument("--logs", default=str(ROOT / ".build/test-logs"))
    parser.add_argument("--split", type=float, default=60, help="suites longer than this run one job per test")
    parser.add_argument("--timeout", type=float, default=900, help="seconds one job may take")
    options = parser.parse_args()

    logs = Path(options.logs)
    logs.mkdir(parents=True, exist_ok=True)
    known = json.loads(DURATIONS.read_text()) if DURATIONS.exists() else {}
    jobs = plan(list_tests(options.binary), options.only, known, options.split)
    jobs.sort(key=lambda job: -job[2])
    started = time.monotonic()
    print(f"== {len(jobs)} jobs in {options.jobs} processes at a time; logs in {logs}", flush=True)

    for slot in range(options.jobs):
        SLOTS.put(slot)
    failed = []
    durations = {}
    cpus = {}
    with ThreadPoolExecutor(max_workers=options.jobs) as pool:
        futures = [pool.submit(run_job, options.binary, name, args, logs, options.timeout, options.jobs) for name, args, _ in jobs]
        for future in as_completed(futures):
            name, passed, status, seconds, cpu, count, log, text = future.result()
            durations[name] = round(seconds, 1)
            cpus[name] = round(cpu, 1)
            mark = "✔" if passed else "✘"
            why = "" if passed else (" (killed after its time bound)" if status is None else f" (exit {status})")
            print(f"{mark} {name}: {count} tests in {seconds:.1f} s ({cpu:.0f} s of CPU){why}", flush=True)
            if not passed:
                failed.append((name, log, text))

    (logs / "durations.json").write_text(json.dumps(durations, indent=1, sort_keys=True) + "\n")
    (logs / "cpu.json").write_text(json.dumps(cpus, indent=1, sort_keys=True) + "\n")
    for name, log, text in failed:
        print(f"\n== {name} failed; its log is {log}")
        lines = text.splitlines()
        marks = [line for line in lines if "✘" in line or "Expectation failed" in line or "error:" in line]
        print("\n".join(marks[:40]))
        print("-- last lines:")
        print("\n".join(lines[-25:]))
        kept = sorted(log.with_suffix(".processes").glob("*.log"))
        for path in kept[:6]:
            said = path.read_text(errors="replace").splitlines()
            print(f"-- {said[0] if said else path.name} ({path}), its last lines:")
            print("\n".join(said[-15:]))
    total = time.monotonic() - started
    print(f"== {len(jobs) - len(failed)} of {len(jobs)} jobs passed in {total:.0f} s ({sum(cpus.values()):.0f} s of CPU)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
