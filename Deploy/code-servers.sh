#!/usr/bin/env bash
# Runs your own servers for sends by code on this host, under systemd: magic-wormhole's mailbox (rendezvous) server
# (PyPI's magic-wormhole-mailbox-server, in a virtual environment in /opt/share-mailbox) and its transit relay
# (Debian's magic-wormhole-transit-relay), each as its own dynamic user. Prints the agent.json setting and the flags
# that make share (and the wormhole command) use them instead of magic-wormhole's public servers.
# Usage: Deploy/code-servers.sh [--host NAME_OR_ADDRESS] | --remove
set -euo pipefail
cd "$(dirname "$0")"
host=$(hostname -f 2>/dev/null || hostname)
case "${1:-}" in
  --host) host=$2 ;;
  --remove)
    systemctl disable --now share-mailbox share-transit 2>/dev/null || true
    rm -f /etc/systemd/system/share-mailbox.service /etc/systemd/system/share-transit.service
    systemctl daemon-reload
    echo "removed the units; the mailbox's database stays in /var/lib/private/share-mailbox"
    exit 0 ;;
  "") ;;
  *) echo "usage: Deploy/code-servers.sh [--host NAME_OR_ADDRESS] | --remove" >&2; exit 64 ;;
esac
[ "$(id -u)" -eq 0 ] || { echo "code-servers.sh: run as root (it installs packages and system units)" >&2; exit 77; }
command -v systemctl >/dev/null || { echo "code-servers.sh: systemd is needed to run the servers" >&2; exit 69; }
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq magic-wormhole-transit-relay python3-venv >/dev/null
if [ ! -x /opt/share-mailbox/bin/twistd ]; then
  python3 -m venv /opt/share-mailbox
  /opt/share-mailbox/bin/pip install -q --disable-pip-version-check 'magic-wormhole-mailbox-server==0.8.0'
fi
install -m 0644 share-mailbox.service share-transit.service /etc/systemd/system/
systemctl daemon-reload
systemctl enable --now share-mailbox share-transit
echo "share's code servers run on $host (TCP 4000 and 4001 must be reachable from both machines of a send)."
echo "On each device, add to CONFIG/agent.json (share send --code and share receive CODE read it):"
echo "  \"wormhole\": {\"server\": \"ws://$host:4000/v1\", \"relay\": \"tcp:$host:4001\"}"
echo "or give them each time: --server ws://$host:4000/v1 --relay tcp:$host:4001"
echo "(the wormhole command: --relay-url ws://$host:4000/v1 --transit-helper tcp:$host:4001)"
