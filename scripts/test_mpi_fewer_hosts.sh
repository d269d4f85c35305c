#!/bin/sh
# `make test`'s host fault and resume on fewer hosts (issue 32 item 5):
# tests/mpi_fewer_hosts.sh against bin/distref (3 namespace hosts, dr-h2
# frozen mid-run, the chief's checkpoint resumed on 2 hosts with the
# uninterrupted run's bits), then against bin/distref built with each
# planted fault of tests/faults.tsv whose catcher is mpi_fewer_hosts
# (seek_skip_batch, a patch of harness/train_loop.c: a resume under another
# topology starts a batch past the checkpoint),
# each of which must fail it for its own reason: the resumed bits, not a
# launcher error. "not supported: why" (exit 0) without mpirun, root,
# iproute2 or network namespaces; exit 2 when another dr-h* cluster is up.
#
#   sh scripts/test_mpi_fewer_hosts.sh DISTREF
#
# Environment (from the Makefile): CC, CFLAGS, LDLIBS, BUILD (for the mutants).
set -u
: "${CC:?}" "${BUILD:?}"
bin=${1:?usage: test_mpi_fewer_hosts.sh DISTREF}
mkdir -p "$BUILD"
sh tests/mpi_fewer_hosts.sh "$bin" > "$BUILD/mpi_fewer_hosts.txt" 2>&1; rc=$?
tail -1 "$BUILD/mpi_fewer_hosts.txt"
case $(tail -1 "$BUILD/mpi_fewer_hosts.txt") in *"not supported"*) exit $rc ;; esac
[ $rc = 0 ] || exit $rc
sh scripts/script_mutants.sh mpi_fewer_hosts tests/mpi_fewer_hosts.sh 'FAILED: resumed at step .* differ' || rc=1
exit $rc
