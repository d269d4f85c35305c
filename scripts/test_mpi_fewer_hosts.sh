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
for name in $(sh scripts/faults.sh rows script | awk -F'\t' '$6 == "mpi_fewer_hosts" { print $1 }'); do
    if sh scripts/mutant_cli.sh "$name" > /dev/null; then
        out="$BUILD/mutants/cli_$name/out.txt"
        if sh tests/mpi_fewer_hosts.sh "$BUILD/mutants/cli_$name/distref" > "$out" 2>&1; then
            printf 'mutant %-26s must fail mpi_fewer_hosts  MISSED (the test passed)\n' "$name"
            rc=1
        elif grep -q 'FAILED: resumed at step .* differ' "$out"; then
            printf 'mutant %-26s must fail mpi_fewer_hosts  caught (%s)\n' "$name" \
                "$(grep -m1 -o 'resumed at step [0-9]* on 2 hosts: [a-z_ ]*' "$out")"
        else
            printf 'mutant %-26s must fail mpi_fewer_hosts  MISSED (it failed, but not on the bits: %s)\n' \
                "$name" "$(tail -1 "$out" | cut -c1-120)"
            rc=1
        fi
    else
        echo "mutant $name: build failed" >&2
        rc=1
    fi
done
exit $rc
