#!/bin/sh
# Open MPI's rsh agent for the namespace hosts of scripts/netns_cluster.sh:
# `--mca plm_rsh_agent scripts/netns_rsh.sh` makes mpirun start its remote
# daemon (orted) on "host" dr-hK as
#     ip netns exec dr-hK unshare --uts sh -c 'hostname dr-hK; COMMAND'
# instead of over ssh: the daemon and its ranks see only dr-hK's network
# stack and their own host name. Open MPI calls it as `AGENT [opts] HOST CMD...`.
set -u
while [ $# -gt 0 ]; do case $1 in -*) shift ;; *) break ;; esac; done
host=${1:?netns_rsh: no host}
shift
case $host in
    dr-h[0-9]*) ;;
    *) echo "netns_rsh: '$host' is not a namespace host (dr-hK from scripts/netns_cluster.sh)" >&2; exit 255 ;;
esac
ip netns list | awk '{ print $1 }' | grep -qx "$host" ||
    { echo "netns_rsh: host $host does not answer: no namespace $host (scripts/netns_cluster.sh up N)" >&2; exit 255; }
# A host whose link is down does not answer, as ssh would say after its
# ConnectTimeout (without this, the daemon would start in the namespace
# and never reach mpirun, which then waits for it indefinitely).
ip -n "$host" -o link show eth0 2>/dev/null | grep -q 'state UP' ||
    { echo "netns_rsh: host $host does not answer: its link (eth0 in namespace $host) is down" >&2; exit 255; }
exec ip netns exec "$host" unshare --uts sh -c "hostname $host && $*"
