#!/usr/bin/env bash
# A shaped link for remote MPI-IO tests and benchmarks (issue 13): two
# network namespaces, the client side and the storage side, joined by a
# veth pair whose both ends are shaped with tbf.
#
#   rfs-link.sh up NAME INDEX RATE    e.g. up t1 7 32mbit
#   rfs-link.sh down NAME
#
# Namespaces: wrfs-NAME-c (client, 10.213.INDEX.1) and wrfs-NAME-s
# (gateway and servers, 10.213.INDEX.2); loopback is up in both (MPI needs
# it). Every process talking to 10.213.INDEX.* must run inside one of them
# (`ip netns exec wrfs-NAME-c ...`): these addresses exist nowhere else.
# Exits non-zero with a message when namespaces cannot be made (not root,
# no CONFIG_NET_NS, no tbf).
set -euo pipefail
die() { echo "rfs-link.sh: $*" >&2; exit 1; }
[ $# -ge 2 ] || die "usage: rfs-link.sh up NAME INDEX RATE | down NAME"
action=$1 name=$2
client=wrfs-$name-c server=wrfs-$name-s
case $action in
  up)
    [ $# -eq 4 ] || die "usage: rfs-link.sh up NAME INDEX RATE"
    index=$3 rate=$4
    [[ $index =~ ^[0-9]+$ ]] && [ "$index" -ge 1 ] && [ "$index" -le 254 ] || die "INDEX must be 1..254"
    command -v ip >/dev/null || die "the ip command (iproute2) is missing"
    ip netns add "$client" || die "cannot create network namespace $client (root and CONFIG_NET_NS needed)"
    ip netns add "$server" || { ip netns del "$client"; die "cannot create network namespace $server"; }
    ip link add "wrfs${index}c" type veth peer name "wrfs${index}s" || die "cannot create a veth pair"
    ip link set "wrfs${index}c" netns "$client"
    ip link set "wrfs${index}s" netns "$server"
    ip -n "$client" addr add "10.213.$index.1/24" dev "wrfs${index}c"
    ip -n "$server" addr add "10.213.$index.2/24" dev "wrfs${index}s"
    for ns in "$client" "$server"; do ip -n "$ns" link set lo up; done
    ip -n "$client" link set "wrfs${index}c" up
    ip -n "$server" link set "wrfs${index}s" up
    # burst >= MTU, or large packets are dropped (MACHINE-NOTES).
    ip netns exec "$client" tc qdisc add dev "wrfs${index}c" root tbf rate "$rate" burst 64kb latency 50ms \
      || die "tc tbf failed on the client side"
    ip netns exec "$server" tc qdisc add dev "wrfs${index}s" root tbf rate "$rate" burst 64kb latency 50ms \
      || die "tc tbf failed on the storage side"
    echo "client=$client server=$server client_ip=10.213.$index.1 server_ip=10.213.$index.2 rate=$rate"
    ;;
  down)
    # Deleting a namespace deletes its veth end, and with it the pair.
    ip netns del "$client" 2>/dev/null || true
    ip netns del "$server" 2>/dev/null || true
    ;;
  *) die "unknown action $action" ;;
esac
