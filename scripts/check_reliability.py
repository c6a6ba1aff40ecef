#!/usr/bin/env python3
"""Checks that docs/RELIABILITY.md's fault table matches the tests, so it cannot drift from what they do.

Every `Suite` or `Suite.test` the table names must exist in Tests/, and every test of the fault suites below must be
named by a row (by its suite alone, or by suite and test). Every fuzz target must appear in the fuzzing row.
Exit 1 with one line per mismatch."""
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
FAULT_SUITES = [
    "FaultInjectionTests", "ResumeEndToEndTests", "HostilePeerTests", "HostileConnectionTests",
    "HostileNameEndToEndTests", "DiskFullTests", "HostileArchiveTests", "FuzzRegressionTests", "ReviewAttackTests",
    "UpgradeTests", "DriverTests", "ReachEndToEndTests",
]

# suite name -> set of test function names, from the Swift sources.
suites = {}
for folder, _, files in os.walk(os.path.join(ROOT, "Tests")):
    for name in files:
        if not name.endswith(".swift"):
            continue
        text = open(os.path.join(folder, name), encoding="utf-8").read()
        current = None
        for line in text.splitlines():
            suite = re.search(r"\bstruct (\w+Tests)\b", line)
            if suite:
                current = suite.group(1)
                suites.setdefault(current, set())
            test = re.search(r"@Test\b.*?func (\w+)|^\s*func (\w+)\(", line)
            if current and "@Test" in line:
                pending = re.search(r"func (\w+)", line)
                if pending:
                    suites[current].add(pending.group(1))
                else:
                    suites[current].add(None)  # the name follows on the next line
            elif current and None in suites[current]:
                named = re.search(r"func (\w+)", line)
                if named:
                    suites[current].discard(None)
                    suites[current].add(named.group(1))

table = open(os.path.join(ROOT, "docs", "RELIABILITY.md"), encoding="utf-8").read()
rows = [line for line in table.splitlines() if line.startswith("| ") and not line.startswith("| ---")]
named_suites, named_tests = set(), set()
problems = []
for row in rows:
    for ref in re.findall(r"`([A-Z]\w+)(?:\.(\w+))?`", row):
        suite, test = ref
        if suite not in suites:
            continue  # a type or a file name in prose, not a suite
        if test:
            if test not in suites[suite]:
                problems.append(f"RELIABILITY.md names {suite}.{test}, which is not a test")
            named_tests.add((suite, test))
        else:
            named_suites.add(suite)
for suite in FAULT_SUITES:
    if suite not in suites:
        problems.append(f"fault suite {suite} is missing from Tests/")
        continue
    for test in sorted(t for t in suites[suite] if t):
        if suite not in named_suites and (suite, test) not in named_tests:
            problems.append(f"{suite}.{test} is not in RELIABILITY.md's table")

targets = re.findall(r'case (\w+)(?: = "([\w-]+)")?$',
                     open(os.path.join(ROOT, "Sources", "ShareFuzzTargets", "FuzzTargets.swift")).read(), re.M)
fuzz_rows = [row for row in rows if "scripts/fuzz.sh" in row]
for case, raw in targets:
    name = raw or case
    if not any(f"`{name}`" in row for row in fuzz_rows):
        problems.append(f"fuzz target {name} is not in RELIABILITY.md's fuzzing row")

for problem in problems:
    print(f"check_reliability: {problem}", file=sys.stderr)
if problems:
    sys.exit(1)
print(f"RELIABILITY.md: {len(rows) - 1} rows match the tests ({len(FAULT_SUITES)} fault suites, {len(targets)} fuzz targets)")
