#!/bin/sh
# Builds the libFuzzer targets in fuzz/ and runs each for SECONDS (default 30).
#
#   sh scripts/fuzz.sh [SECONDS]
#
# The library sources the targets need (core/*.c, which holds core/ps_partition.c for
# fuzz_flag_values) are compiled here with clang and the sanitizers into
# build/fuzz/lib.a, not taken from the gcc-built archives; the linker takes
# only the objects a target uses. Binaries: build/fuzz/fuzz_<name>. Each
# target runs one at a time (the machine is shared) on a scratch copy of
# its seed corpus, build/fuzz/corpus/<name>, so new inputs never dirty the
# repository; crash, leak, timeout and oom reproducers go to
# build/fuzz/artifacts/<name>/, the full output to build/fuzz/logs/<name>.log.
# Prints one line per target and a total; exits 1 if any target crashed.
#
# Environment: CC (default clang), FUZZ_TARGETS (default: every
# fuzz/fuzz_*.c), FUZZ_ARGS (extra libFuzzer options), FUZZ_CPU_SECONDS
# (repeat SECONDS-long rounds on the kept corpus until a target has used
# this many CPU seconds: `FUZZ_CPU_SECONDS=600 sh scripts/fuzz.sh 300` is
# the ten CPU-minutes per target of issue 11 on a shared machine).
set -eu
cd "$(dirname "$0")/.."

secs=${1:-30}
case $secs in
    ''|*[!0-9]*) echo "usage: sh scripts/fuzz.sh [SECONDS]" >&2; exit 2 ;;
esac
CC=${CC:-clang}
if ! command -v "$CC" >/dev/null 2>&1; then
    echo "fuzz: $CC not found; libFuzzer needs clang (apt-get install clang)" >&2
    exit 2
fi

out=build/fuzz
cflags="-std=c11 -g -O1 -ffp-contract=off -fno-sanitize-recover=all -fno-omit-frame-pointer
        -D_POSIX_C_SOURCE=200809L -Iinclude -I. -I/usr/include/json-c"
libs="-ljson-c -lz -lm -lpthread"
lib=$out/lib.a
mkdir -p "$out/obj/core" "$out/obj/ref" "$out/logs" "$out/artifacts" "$out/corpus"

# ---- the library, instrumented (rebuilt when any source or header changed)
lib_src="core/*.c"
stale=1
if [ -f "$lib" ] && [ -z "$(find core include -newer "$lib" \( -name '*.c' -o -name '*.h' \) | head -n 1)" ]; then
    stale=0
fi
if [ $stale = 1 ]; then
    echo "fuzz: compiling $lib_src with $CC and the sanitizers"
    rm -f "$lib"
    i=0
    for src in $lib_src; do
        case $src in
            core/*) layer=-DDR_LAYER_CORE ;;
            *)      layer=-DDR_LAYER_REF ;;
        esac
        obj=$out/obj/${src%.c}.o
        rm -f "$obj"
        i=$((i + 1))
        # two compilers at a time (the machine is shared): odd ones in the
        # background, even ones in the foreground, then wait for both
        if [ $((i % 2)) = 1 ]; then
            # shellcheck disable=SC2086
            $CC $cflags $layer -fsanitize=address,undefined -fsanitize=fuzzer-no-link -c "$src" -o "$obj" &
        else
            # shellcheck disable=SC2086
            $CC $cflags $layer -fsanitize=address,undefined -fsanitize=fuzzer-no-link -c "$src" -o "$obj" || true
            wait
        fi
    done
    wait
    for src in $lib_src; do
        [ -f "$out/obj/${src%.c}.o" ] || { echo "fuzz: failed to compile $src" >&2; exit 1; }
    done
    # shellcheck disable=SC2046
    ar rcs "$lib" $(for src in $lib_src; do printf '%s ' "$out/obj/${src%.c}.o"; done)
fi

# ---- the targets
targets=${FUZZ_TARGETS:-$(for f in fuzz/fuzz_*.c; do n=${f#fuzz/fuzz_}; printf '%s ' "${n%.c}"; done)}
for t in $targets; do
    case $t in
        flag_values) layer=-DDR_LAYER_REF ;;   # includes ref's distref/ps.h
        *)           layer=-DDR_LAYER_CORE ;;
    esac
    # shellcheck disable=SC2086
    $CC $cflags $layer -fsanitize=fuzzer,address,undefined "fuzz/fuzz_$t.c" "$lib" $libs -o "$out/fuzz_$t"
done
echo "fuzz: built $(echo "$targets" | wc -w | tr -d ' ') targets in $out/"

# ---- run them, one at a time
# The targets write each input to a scratch folder under $TMPDIR: on tmpfs
# the loaders' fsyncs are free, so a target spends its time fuzzing.
if [ -z "${TMPDIR:-}" ] && [ -d /dev/shm ] && [ -w /dev/shm ]; then export TMPDIR=/dev/shm; fi
ntargets=0
ncrashed=0
for t in $targets; do
    ntargets=$((ntargets + 1))
    corpus=$out/corpus/$t
    artifacts=$out/artifacts/$t/
    log=$out/logs/$t.log
    rm -rf "$corpus" "$artifacts"
    mkdir -p "$corpus" "$artifacts"
    if [ -d "fuzz/corpus/$t" ]; then cp fuzz/corpus/"$t"/* "$corpus"/ 2>/dev/null || true; fi
    dict=
    if [ -f "fuzz/$t.dict" ]; then dict=-dict=fuzz/$t.dict; fi
    start=$(date +%s)
    timer=
    if [ -x /usr/bin/time ]; then timer="/usr/bin/time -o $out/logs/$t.cpu -f %U+%S"; fi
    # Rounds of SECONDS on the same corpus until the CPU seconds reach
    # FUZZ_CPU_SECONDS (one round when it is unset or /usr/bin/time is
    # missing): on a shared machine wall time says little about the work done.
    cpu_total=0
    execs_total=0
    rounds=0
    rc=0
    while :; do
        rounds=$((rounds + 1))
        rm -f "$out/logs/$t.cpu"
        # shellcheck disable=SC2086
        if $timer "./$out/fuzz_$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
            -artifact_prefix="$artifacts" $dict ${FUZZ_ARGS:-} "$corpus" >"$log" 2>&1; then
            rc=0
        else
            rc=$?
        fi
        execs=$(sed -n 's/^stat::number_of_executed_units: *\([0-9]*\).*/\1/p' "$log" | tail -n 1)
        if [ -z "$execs" ]; then
            execs=$(sed -n 's/^#\([0-9][0-9]*\).*/\1/p' "$log" | tail -n 1)
        fi
        execs_total=$((execs_total + ${execs:-0}))
        if [ -s "$out/logs/$t.cpu" ]; then
            cpu_total=$(tail -n 1 "$out/logs/$t.cpu" | awk -F+ -v c="$cpu_total" '{ printf "%.0f", c + $1 + $2 }')
        fi
        [ "$rc" = 0 ] || break
        [ -n "${FUZZ_CPU_SECONDS:-}" ] && [ -n "$timer" ] && [ "$cpu_total" -lt "$FUZZ_CPU_SECONDS" ] || break
    done
    execs=$execs_total
    elapsed=$(( $(date +%s) - start ))
    crashes=$(find "$artifacts" -type f | wc -l | tr -d ' ')
    if [ "$rc" != 0 ] && [ "$crashes" = 0 ]; then crashes=1; fi
    cpu=
    if [ -n "$timer" ]; then cpu=", $cpu_total CPU s"; fi
    [ "$rounds" = 1 ] || cpu="$cpu in $rounds rounds"
    echo "fuzz $t: ${execs:-0} execs in $elapsed s$cpu, $crashes crashes"
    if [ "$crashes" != 0 ]; then
        ncrashed=$((ncrashed + 1))
        echo "  exit status $rc; log: $log"
        find "$artifacts" -type f | sed 's/^/  reproducer: /'
        grep -m 3 -E '^(==[0-9]+==ERROR|SUMMARY|.*runtime error)' "$log" | sed 's/^/  /' || true
    fi
done
echo "fuzz: $ntargets targets, $ncrashed crashed"
[ "$ncrashed" = 0 ]
