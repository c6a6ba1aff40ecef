#!/usr/bin/env bash
# The checks CI runs after the test command, on its debug build: a short fuzz pass over every decoder a peer can
# reach, a short AddressSanitizer pass (the unit suites and a few end-to-end suites, every share process
# instrumented, leaks checked), the memory budgets (scripts/budgets.sh: the watch as installed, send and receive at
# 1 GiB, the agent under load), and every script of the repository in its smoke mode (scripts/smoke.sh). Each needs
# builds of its own (the fuzzer, the sanitizer, the release watch: several minutes on two cores), which is why they
# are not part of the ten-minute test command; .ci/run runs this between the test command and the package check.
# The long runs live in their own scripts: scripts/fuzz.sh 300, scripts/sanitizers.sh address thread,
# scripts/faults.sh, the benchmarks.
# Usage: scripts/ci-checks.sh      (after scripts/test.sh, in the same clone)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
started=$SECONDS
[ -x .build/debug/share ] || { echo "ci-checks: no debug build here; run scripts/test.sh first" >&2; exit 64; }
# The library product (ShareKit) links no other protocol unless a program asks for one (ShareKitLocalSend):
# neither LocalSend nor magic-wormhole's libsodium among its targets (docs/ARCHITECTURE.md).
swift package describe --type json 2> /dev/null | python3 -c '
import json, sys
targets = {t["name"]: t for t in json.load(sys.stdin)["targets"]}
def closure(name, seen):
    for dep in targets.get(name, {}).get("target_dependencies", []):
        if dep not in seen:
            seen.add(dep)
            closure(dep, seen)
    return seen
linked = closure("ShareKit", set())
extra = sorted(linked & {"ShareLocalSend", "ShareLocalSendRoute", "ShareWormhole", "CShareSodium"})
if extra:
    sys.exit("ci-checks: the ShareKit product links " + ", ".join(extra) + "; move the glue into an opt-in module")
print("== ShareKit links " + str(len(linked)) + " targets, no other protocol")
'
# The smoke pass needs only the debug build: it starts at once, beside the builds.
scripts_log=${TMPDIR:-/tmp}/share-scripts-pass.log
bash scripts/smoke.sh > "$scripts_log" 2>&1 &
scripts=$!
bash scripts/fuzz.sh --build-only && bash scripts/sanitizers.sh --build-only address && bash scripts/budgets.sh --build-only
echo "== fuzzer, sanitizer and release watch builds done after $((SECONDS - started)) s"
fuzz_log=${TMPDIR:-/tmp}/share-fuzz-pass.log
bash scripts/fuzz.sh --skip-build "${SHARE_FUZZ_SECONDS:-6}" > "$fuzz_log" 2>&1 &
fuzz=$!
asan=0
bash scripts/sanitizers.sh --short --skip-build address || asan=$?
fuzzed=0
wait "$fuzz" || fuzzed=$?
cat "$fuzz_log"
smoked=0
wait "$scripts" || smoked=$?
cat "$scripts_log"
# The budgets last, alone: a memory figure taken beside the sanitizer's run would measure the machine.
measured=0
bash scripts/budgets.sh --skip-build || measured=$?
[ "$asan" -eq 0 ] && [ "$fuzzed" -eq 0 ] && [ "$measured" -eq 0 ] && [ "$smoked" -eq 0 ] || exit 1
echo "== CI checks done after $((SECONDS - started)) s"
