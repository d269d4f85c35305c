#!/bin/sh
# mpirun across the namespace hosts of scripts/netns_cluster.sh, from dr-h0:
#   sh scripts/netns_mpirun.sh MPIRUN-ARGS...
# runs `mpirun` inside dr-h0 (with its own host name) with the rsh agent
# scripts/netns_rsh.sh for the others, and TCP only: the byte transfer layer
# tcp,self (no shared memory between ranks of one host either) and both the
# BTL and the runtime's out-of-band channel on eth0, the namespace link.
# Pass --hostfile (netns_cluster.sh hostfile F SLOTS) and -np as usual.
# The runtime's channel sends TCP keepalives after 3 s idle, 1 s apart, 4
# unanswered ending it (Open MPI's default: 300 s, 20 s, 9): mpirun learns
# within about 7 s that a host's link was cut and ends the job, instead of
# waiting for that host's daemon for about 8 minutes (docs/MPI.md).
set -u
here=$(cd "$(dirname "$0")" && pwd)
ip netns list | awk '{ print $1 }' | grep -qx dr-h0 ||
    { echo "netns_mpirun: no namespace dr-h0 (sh scripts/netns_cluster.sh up N)" >&2; exit 2; }
exec ip netns exec dr-h0 unshare --uts sh -c 'hostname dr-h0 && exec "$@"' sh \
    mpirun --mca plm_rsh_agent "$here/netns_rsh.sh" --mca btl tcp,self \
    --mca btl_tcp_if_include eth0 --mca oob_tcp_if_include eth0 --mca pml ob1 \
    --mca oob_tcp_keepalive_time 3 --mca oob_tcp_keepalive_intvl 1 --mca oob_tcp_keepalive_probes 4 "$@"
