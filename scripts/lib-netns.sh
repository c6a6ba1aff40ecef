# Shared by benchmark scripts (sourced): the simulated internet of ReachEndToEndTests in network namespaces —
# two homes behind NAT (nftables masquerade) and an "internet" namespace between them that hosts the servers, on
# documentation addresses only, with no veth end in the root namespace. Needs root, iproute2 and nftables.
#
#   laptop 10.1.0.2 ── [NET_HOME1 NAT] 198.51.100.2 ──┐
#                                                     [NET_INTERNET] 203.0.113.10
#   desk   10.2.0.2 ── [NET_HOME2 NAT] 192.0.2.2    ──┘

# Builds the namespaces (names end in $1); sets NET_INTERNET NET_HOME1 NET_LAPTOP NET_HOME2 NET_DESK.
netns_internet() {
  local t=$1
  NET_INTERNET=bi-$t NET_HOME1=br1-$t NET_LAPTOP=bl-$t NET_HOME2=br2-$t NET_DESK=bd-$t
  local ns
  for ns in $NET_INTERNET $NET_HOME1 $NET_LAPTOP $NET_HOME2 $NET_DESK; do
    ip netns add "$ns"; ip -n "$ns" link set lo up
  done
  netns_link "$NET_LAPTOP" l1-$t 10.1.0.2/24 "$NET_HOME1" h1l-$t 10.1.0.1/24
  netns_link "$NET_HOME1" h1w-$t 198.51.100.2/24 "$NET_INTERNET" i1-$t 198.51.100.1/24
  netns_link "$NET_DESK" d2-$t 10.2.0.2/24 "$NET_HOME2" h2l-$t 10.2.0.1/24
  netns_link "$NET_HOME2" h2w-$t 192.0.2.2/24 "$NET_INTERNET" i2-$t 192.0.2.1/24
  ip -n "$NET_INTERNET" addr add 203.0.113.10/32 dev lo
  ip -n "$NET_LAPTOP" route add default via 10.1.0.1
  ip -n "$NET_DESK" route add default via 10.2.0.1
  ip -n "$NET_HOME1" route add default via 198.51.100.1
  ip -n "$NET_HOME2" route add default via 192.0.2.1
  for ns in $NET_HOME1 $NET_HOME2 $NET_INTERNET; do ip netns exec "$ns" sysctl -qw net.ipv4.ip_forward=1; done
  ip netns exec "$NET_HOME1" nft -f - <<NFT
table ip nat { chain post { type nat hook postrouting priority 100; oifname "h1w-$t" masquerade; }; }
NFT
  ip netns exec "$NET_HOME2" nft -f - <<NFT
table ip nat {
  chain post { type nat hook postrouting priority 100; oifname "h2w-$t" masquerade; }
  chain pre { type nat hook prerouting priority -100; }
}
NFT
  NET_TAG=$t
}

# A veth pair: namespace, name, address, namespace, name, address.
netns_link() {
  ip link add "$2" type veth peer name "$5"
  ip link set "$2" netns "$1"; ip link set "$5" netns "$4"
  ip -n "$1" addr add "$3" dev "$2"; ip -n "$4" addr add "$6" dev "$5"
  ip -n "$1" link set "$2" up; ip -n "$4" link set "$5" up
}

# Opens TCP port $1 of the desk on its router (192.0.2.2:$1 -> 10.2.0.2:$1); netns_close_forwards undoes it.
netns_forward() { ip netns exec "$NET_HOME2" nft add rule ip nat pre iifname "h2w-$NET_TAG" tcp dport "$1" dnat to "10.2.0.2:$1"; }
netns_close_forwards() { ip netns exec "$NET_HOME2" nft flush chain ip nat pre; }

netns_remove() {
  local ns
  for ns in ${NET_DESK:-} ${NET_HOME2:-} ${NET_LAPTOP:-} ${NET_HOME1:-} ${NET_INTERNET:-}; do
    ip netns pids "$ns" 2>/dev/null | xargs -r kill 2>/dev/null || true
    ip netns del "$ns" 2>/dev/null || true
  done
}

# Starts stdiscosrv and strelaysrv on 203.0.113.10 in the internet namespace (state in $1); sets DISCO_URL RELAY_URL.
netns_servers() {
  local dir=$1
  mkdir -p "$dir/disco" "$dir/relay"
  ip netns exec "$NET_INTERNET" stdiscosrv -listen=203.0.113.10:8443 -replication-listen= -metrics-listen= \
    -db-dir="$dir/disco/db" -cert="$dir/disco/cert.pem" -key="$dir/disco/key.pem" > "$dir/disco.log" 2>&1 &
  ip netns exec "$NET_INTERNET" strelaysrv -keys="$dir/relay" -listen=203.0.113.10:22067 -pools= -nat=false \
    -status-srv= > "$dir/relay.log" 2>&1 &
  local _
  for _ in $(seq 300); do
    grep -q "Server device ID is" "$dir/disco.log" 2>/dev/null && grep -q "URI: relay://" "$dir/relay.log" 2>/dev/null && break
    sleep 0.1
  done
  DISCO_URL="https://203.0.113.10:8443/?id=$(grep -o 'Server device ID is [A-Z0-9-]*' "$dir/disco.log" | awk '{print $5}')"
  RELAY_URL="relay://203.0.113.10:22067/?id=$(grep -o 'id=[A-Z0-9-]*' "$dir/relay.log" | head -1 | cut -d= -f2)"
}
