# Shared by the benchmark scripts (sourced): baseline tools, two share devices, a throwaway sshd on loopback.
# Expects WORK (a scratch folder) and BIN (the release share binary) to be set.

# Installs what the baselines need.
bench_install() {
  export DEBIAN_FRONTEND=noninteractive
  local need=()
  for p in openssh-server openssh-client rsync time gcc libarchive-tools zstd; do
    dpkg-query -W -f='${Status}' $p 2>/dev/null | grep -q "ok installed" || need+=($p)
  done
  if [ ${#need[@]} -gt 0 ]; then apt-get update -qq; apt-get install -y -qq "${need[@]}" >/dev/null; fi
}

# Two share devices, $S (sender) and $R (receiver), trusting each other.
bench_devices() {
  S=$WORK/sender; R=$WORK/receiver
  $BIN id --config "$S" --name bench-sender >/dev/null; $BIN id --config "$R" --name bench-receiver >/dev/null
  $BIN trust add --config "$S" "$($BIN id --config "$R" | tail -1)" --name receiver --team >/dev/null
  $BIN trust add --config "$R" "$($BIN id --config "$S" | tail -1)" --name sender --team >/dev/null
}

# Temporary keys (once per WORK) and an sshd config for ADDRESS:PORT, root by key only, with EXTRA config lines.
bench_ssh_config() { # address port extra
  mkdir -p /run/sshd "$WORK/ssh"
  [ -f "$WORK/ssh/host" ] || { ssh-keygen -q -t ed25519 -N '' -f "$WORK/ssh/host" && ssh-keygen -q -t ed25519 -N '' -f "$WORK/ssh/id"; }
  cp "$WORK/ssh/id.pub" "$WORK/ssh/authorized_keys"
  cat > "$WORK/ssh/config" <<CFG
Port $2
ListenAddress $1
HostKey $WORK/ssh/host
PidFile $WORK/sshd.pid
AuthorizedKeysFile $WORK/ssh/authorized_keys
PermitRootLogin yes
PasswordAuthentication no
KbdInteractiveAuthentication no
StrictModes no
UsePAM no
$3
CFG
}

# sshd on a free loopback port with temporary keys; sets SSHPORT, SSH (the ssh command) and SSHOPTS (for scp).
bench_sshd() {
  SSHPORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  bench_ssh_config 127.0.0.1 "$SSHPORT" "Subsystem sftp internal-sftp"
  /usr/sbin/sshd -f "$WORK/ssh/config"
  SSHOPTS="-i $WORK/ssh/id -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o BatchMode=yes -o LogLevel=ERROR"
  SSH="ssh $SSHOPTS -p $SSHPORT"
  for _ in $(seq 100); do $SSH root@127.0.0.1 true 2>/dev/null && break; sleep 0.1; done
}

# Holds the balloon's free page reporting off (see bench-transfer.sh): memory freed by dropping the page cache would
# otherwise go back to the host after a second or two, and the next writer into the page cache pays the host's page
# faults at random. Restored by page_reporting_restore (bench_cleanup calls it). KEEP_PAGE_REPORTING=1 leaves it on.
PAGE_REPORTING_ORDER=/sys/module/page_reporting/parameters/page_reporting_order
PAGE_REPORTING_WAS=
page_reporting_hold() {
  if [ -n "${KEEP_PAGE_REPORTING:-}" ] || [ ! -w "$PAGE_REPORTING_ORDER" ]; then
    echo "memory: free page reporting to the host as the machine has it"
    return
  fi
  PAGE_REPORTING_WAS=$(cat "$PAGE_REPORTING_ORDER")
  echo 11 > "$PAGE_REPORTING_ORDER" 2>/dev/null || { PAGE_REPORTING_WAS=; return; }
  echo "memory: the balloon's free page reporting held off for the run (order $PAGE_REPORTING_WAS -> 11, restored after)"
}
page_reporting_restore() {
  [ -n "$PAGE_REPORTING_WAS" ] && echo "$PAGE_REPORTING_WAS" > "$PAGE_REPORTING_ORDER" 2>/dev/null || true
  PAGE_REPORTING_WAS=
}

# Stops background jobs and sshd, removes WORK.
bench_cleanup() {
  page_reporting_restore
  kill $(jobs -p) 2>/dev/null || true
  [ -f "$WORK/sshd.pid" ] && kill "$(cat "$WORK/sshd.pid")" 2>/dev/null || true
  rm -rf "$WORK"
}

# Waits until LOG has a line matching PATTERN (grep -E): up to SHARE_BENCH_START_SECONDS (120), as a loaded machine can
# take seconds to start a process; with PID, fails at once if that process exits first. On failure prints the log's
# end and returns 1.
await_line() { # LOG PATTERN [PID]
  local log=$1 pattern=$2 pid=${3:-} waited=0 pause=0.01
  while ! grep -Eq -- "$pattern" "$log" 2>/dev/null; do
    if [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null; then
      echo "$(basename "$log"): the process exited before it said '$pattern'; the log ends:" >&2
      tail -5 "$log" >&2 2>/dev/null; return 1
    fi
    if [ "$(echo "$waited >= ${SHARE_BENCH_START_SECONDS:-120}" | bc)" = 1 ]; then
      echo "$(basename "$log"): no '$pattern' within $waited s; the log ends:" >&2; tail -5 "$log" >&2 2>/dev/null
      return 1
    fi
    sleep $pause; waited=$(echo "$waited + $pause" | bc)
    if [ "$(echo "$pause < 0.2" | bc)" = 1 ]; then pause=$(echo "$pause * 2" | bc); fi
  done
  return 0
}

# The port a `share receive` (process PID, writing to LOG) listens on, once it says so.
# The caller empties LOG before starting the receiver (`: > LOG`): a line left by an earlier run is not this one's.
receiver_port() { # LOG PID
  await_line "$1" "waiting on port [0-9]+" "$2" || return 1
  local port; port=$(grep -o 'waiting on port [0-9]*' "$1" | head -1 | awk '{print $4}')
  [ -n "$port" ] || { echo "$(basename "$1"): no port in the receiver's line; the log ends:" >&2; tail -5 "$1" >&2; return 1; }
  echo "$port"
}

# Starts `share receive` for $R into DIR; sets RPID and PORT.
bench_receive() {
  : > "$WORK/recv.out"
  $BIN receive --config "$R" --port 0 --listen 127.0.0.1 --into "$1" > "$WORK/recv.out" 2>&1 &
  RPID=$!
  PORT=$(receiver_port "$WORK/recv.out" $RPID)
}

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# Chunks the single partial in DIR/.share-partial has recorded: its ledger's plus those its journal added since.
ledger_chunks() {
  python3 - "$1" <<'PY'
import glob, json, os, sys
held = set()
for ledger in glob.glob(os.path.join(sys.argv[1], ".share-partial", "*.json"))[:1]:
    try:
        held |= set(json.load(open(ledger))["chunks"])
    except (OSError, ValueError, KeyError):
        pass
    try:
        for line in open(ledger[:-4] + "log"):
            held.add(str(json.loads(line)["c"]))
    except (OSError, ValueError, KeyError):
        pass
print(len(held))
PY
}
