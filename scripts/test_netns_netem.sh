#!/bin/sh
# `make test`'s lossy and slow links (issue 32, network faults):
# scripts/netns_netem.sh against bin/distref (3 namespace hosts over TCP;
# 1% and 5% TCP packet loss by nftables, a 100 Mbit/s tbf limit, both; every
# run must end with the reference's bits), then against bin/distref built
# with each planted fault of tests/faults.tsv whose catcher is netns_netem
# (netem_pack_off_by_one: the mpi wire fault), each of which must fail it
# for its own reason (a condition's bits differ), not a launcher error.
# "not supported: why" (exit 0) without mpirun, root, iproute2's tc,
# nftables or network namespaces.
#
#   sh scripts/test_netns_netem.sh DISTREF
#
# Environment (from the Makefile): CC, CFLAGS, LDLIBS, BUILD (for the mutants).
set -u
: "${CC:?}" "${BUILD:?}"
bin=${1:?usage: test_netns_netem.sh DISTREF}
mkdir -p "$BUILD"
sh scripts/netns_netem.sh "$bin" > "$BUILD/netns_netem.txt" 2>&1; rc=$?
tail -1 "$BUILD/netns_netem.txt"
case $(tail -1 "$BUILD/netns_netem.txt") in *"not supported"*) exit $rc ;; esac
[ $rc = 0 ] || { cat "$BUILD/netns_netem.txt"; exit $rc; }
sh scripts/script_mutants.sh netns_netem scripts/netns_netem.sh 'FAILED \(mpirun exit' || rc=1
exit $rc
