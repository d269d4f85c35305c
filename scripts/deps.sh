#!/bin/sh
# Checks every Debian package distref uses and installs only the missing ones.
# Called by `make deps` (and so by make, make test, make conformance, make bench).
# The list is complete for a bare Debian 12 (mmdebstrap --variant=minbase,
# plus `make` itself): scripts/fresh_machine.sh proves it.
#   gcc libc6-dev     the compiler (CC defaults to gcc: libgomp is gcc's own;
#                     clang's OpenMP would need libomp-dev) and the C headers
#                     (gcc only recommends libc6-dev; recommends are not installed)
#   clang libclang-rt-dev  libFuzzer for make fuzz (core/ only, no OpenMP); the
#                     fuzzer and sanitizer runtimes are only recommended by clang
#   make python3 git  the build; nightly, the examples' checks and test_nightly;
#   python3-numpy     the Python package's tests (python/, scripts/test_python.sh)
#                     revisions in the nightly history and the fault matrix
#   strace            the durability suite and tests/mpi_ckpt_kill.sh stop a run
#                     at its writes
#   procps            pgrep: the MPI kill tests find a rank among mpirun's children
#   iproute2 nftables the namespace hosts (issue 32): `ip netns`, veth and a
#                     bridge for the hosts suite (make conformance) and
#                     tests/mpi_fewer_hosts.sh (make test); `tc` (tbf) and `nft`
#                     for scripts/netns_netem.sh's rate limit and packet loss
#                     (make test). Without them those print "not supported"
#                     even where the machine (root, CAP_NET_ADMIN) could run them.
set -u
PKGS="gcc libc6-dev make python3 python3-numpy git clang libclang-rt-dev libopenblas-dev libjson-c-dev libcmocka-dev gnuplot-nox
ocl-icd-opencl-dev opencl-headers pocl-opencl-icd libopenmpi-dev openmpi-bin zlib1g-dev libgmp-dev libmpfr-dev
dataset-fashion-mnist pkg-config strace procps iproute2 nftables"

if ! command -v dpkg-query >/dev/null 2>&1; then
    echo "deps: dpkg-query not found; this is not a Debian system." >&2
    echo "deps: install these packages (or their equivalents) by hand: $PKGS" >&2
    exit 1
fi
missing=""
for p in $PKGS; do
    status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)
    case "$status" in *"install ok installed"*) ;; *) missing="$missing $p" ;; esac
done
[ -z "$missing" ] && exit 0

echo "deps: installing missing packages:$missing"
if [ "$(id -u)" = 0 ]; then SUDO=""
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then SUDO="sudo -n"
else
    echo "deps: missing packages:$missing" >&2
    echo "deps: not root and no password-less sudo; run as root: apt-get install$missing" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq || { echo "deps: apt-get update failed" >&2; exit 1; }
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing || {
    echo "deps: apt-get install failed for:$missing" >&2; exit 1; }
