#!/bin/sh
# `make test`'s killed host (issue 32 item 5): tests/mpi_fewer_hosts.sh
# with FAULT=kill against bin/distref: every process of namespace host
# dr-h2 SIGKILLed under a plain mpirun, which then ends the survivors
# itself; each survivor (ranks 0, 1) must first say its last words
# (devices/mpi/mpi_last_words.c): a "distref: error:" line naming the step
# under way (the resumed checkpoint's + 1), rank 2 and host dr-h2 among the
# ranks it awaited, and be gone within --collective_timeout + 5 s; the
# chief's checkpoint must resume on 2 hosts bit-exact. Then against
# bin/distref built with each planted fault of tests/faults.tsv whose
# catcher is test_mpi_kill_host (lw_stale_step: the last words name the
# first step, not the one under way), each of which must fail it for its
# own reason. "not supported: why" (exit 0) without mpirun, root, iproute2
# or network namespaces; exit 2 when another dr-h* cluster is up.
#
#   sh scripts/test_mpi_kill_host.sh DISTREF
#
# Environment (from the Makefile): CC, CFLAGS, LDLIBS, BUILD (for the mutants).
set -u
: "${CC:?}" "${BUILD:?}"
bin=${1:?usage: test_mpi_kill_host.sh DISTREF}
mkdir -p "$BUILD"
FAULT=kill
export FAULT
sh tests/mpi_fewer_hosts.sh "$bin" > "$BUILD/mpi_kill_host.txt" 2>&1; rc=$?
sed -n '/^fault/,/^    distref: error: MPI rank 1/p' "$BUILD/mpi_kill_host.txt" | cut -c1-200
tail -1 "$BUILD/mpi_kill_host.txt"
case $(tail -1 "$BUILD/mpi_kill_host.txt") in *"not supported"*) exit $rc ;; esac
[ $rc = 0 ] || exit $rc
sh scripts/script_mutants.sh test_mpi_kill_host tests/mpi_fewer_hosts.sh 'FAILED: .*a survivor named step' || rc=1
exit $rc
