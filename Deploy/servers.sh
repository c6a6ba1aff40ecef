#!/usr/bin/env bash
# Runs share's two private servers on this host from Debian's packages, under systemd: a discovery server
# (stdiscosrv) and a relay (strelaysrv), each as its own dynamic user with its state in /var/lib. Prints the two
# `share servers add` lines to run on each of your devices. Run as root on a host your devices can reach.
# Usage: Deploy/servers.sh [--host NAME_OR_ADDRESS] | --remove
set -euo pipefail
cd "$(dirname "$0")"
host=$(hostname -f 2>/dev/null || hostname)
case "${1:-}" in
  --host) host=$2 ;;
  --remove)
    systemctl disable --now share-discovery share-relay 2>/dev/null || true
    rm -f /etc/systemd/system/share-discovery.service /etc/systemd/system/share-relay.service
    systemctl daemon-reload
    echo "removed the units; keys stay in /var/lib/private/share-discovery and share-relay"
    exit 0 ;;
  "") ;;
  *) echo "usage: Deploy/servers.sh [--host NAME_OR_ADDRESS] | --remove" >&2; exit 64 ;;
esac
[ "$(id -u)" -eq 0 ] || { echo "servers.sh: run as root (it installs packages and system units)" >&2; exit 77; }
command -v systemctl >/dev/null || { echo "servers.sh: systemd is needed to run the servers" >&2; exit 69; }
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq syncthing-discosrv syncthing-relaysrv >/dev/null
install -m 0644 share-discovery.service share-relay.service /etc/systemd/system/
for unit in discovery relay; do
  [ -e /etc/default/share-$unit ] || install -m 0644 share-servers.defaults /etc/default/share-$unit
done
systemctl daemon-reload
systemctl enable --now share-discovery share-relay
# The keys are made on the first start.
for _ in $(seq 1 100); do
  [ -s /var/lib/share-discovery/cert.pem ] && [ -s /var/lib/share-relay/cert.pem ] && break
  sleep 0.1
done
source /etc/default/share-discovery
share_bin=$(command -v share || echo ~/.local/bin/share)
if [ -x "$share_bin" ]; then
  disco=$("$share_bin" id --certificate /var/lib/share-discovery/cert.pem)
  relay=$("$share_bin" id --certificate /var/lib/share-relay/cert.pem)
else
  disco="(share id --certificate /var/lib/share-discovery/cert.pem)"
  relay="(share id --certificate /var/lib/share-relay/cert.pem)"
fi
echo "share's servers run on $host (TCP $DISCOVERY_PORT and $RELAY_PORT must be reachable from your devices)."
echo "On each device, run:"
echo "  share servers add https://$host:$DISCOVERY_PORT/?id=$disco"
echo "  share servers add relay://$host:$RELAY_PORT/?id=$relay"
echo "then restart its agent."
