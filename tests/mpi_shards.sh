#!/bin/sh
# Ranks read only their shard (issue 32 item 3; docs/MPI.md, "Ranks that
# read only their shard"). The synthetic training set (230 examples, seed 7)
# is exported as 4 shard files of unequal sizes (57, 58, 57, 58 examples),
# then trained under `mpirun -np W bin/distref train --variant=mpi
# --distribution_strategy=multi_worker_mirrored --dataset_shards=DIR`:
#
#   bytes  every rank's "shards: worker w of W read B bytes from K of N shard
#          files (LIST)" line: under FILE exactly the files i with i mod W = w
#          and the sum of their sizes (stat); under DATA all of them;
#   bits   the chief's weights_sha256 and every step's loss_bits equal the
#          oracle's: FILE, the reference's in-process emulation of the same W
#          workers on the same shards (ref reads every file); DATA (and FILE
#          with one worker), the reference on the whole dataset without
#          shards (the files concatenate to it, so the semantics coincide);
#   usage  FILE with more workers than files, a missing shard file, an index
#          that disagrees with its file's size: exit 2 naming it (under
#          mpirun every rank exits, the ranks having agreed before
#          training); a file of the right size whose content disagrees
#          (SHA-256): exit 1 (DR_EFORMAT, found while reading), under mpirun
#          the rank names itself and the file and ends the job.
# Every mpirun is bounded by `timeout 120` (a rank left waiting fails it).
#
#   sh tests/mpi_shards.sh [DISTREF]
#
# Prints a line per check and "mpi_shards: N/T"; exits 1 when one fails.
# Skipped without mpirun.
set -u
if ! command -v mpirun >/dev/null 2>&1; then echo "mpi_shards: skipped (no mpirun on PATH)"; exit 0; fi
bin=${1:-bin/distref}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
unset TF_CONFIG
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
ok=0 total=0
COMMON="--synthetic_examples=230 --seed=7 --global_batch_size=37 --epochs=2 --l2=0.001"
check() {   # NAME OK(0/1) DETAIL
    total=$((total + 1))
    if [ "$2" = 1 ]; then ok=$((ok + 1)); echo "ok      $1: $3"; else echo "FAILED  $1: $3"; fi
}
sig() {   # RUN_DIR -> weights hash and every step's loss bits
    if [ -f "$1/summary.json" ]; then
        grep -o '"weights_sha256":"[0-9a-f]*"' "$1/summary.json"
        grep -o '"loss_bits":"[0-9a-fx]*"' "$1/metrics.jsonl" | tr '\n' ' '
    else echo "no summary in $1"; fi
}
tfc() {   # W: a TF_CONFIG of W workers, this task worker 0 (the reference emulates them all)
    _s='{"cluster": {"worker": ['; _i=0
    while [ "$_i" -lt "$1" ]; do _s="$_s$([ "$_i" -gt 0 ] && echo ', ')\"w$_i:2222\""; _i=$((_i + 1)); done
    echo "$_s]}, \"task\": {\"type\": \"worker\", \"index\": 0}}"
}
expected_files() {   # W w NFILES -> "i,j,..." of the files i mod W = w
    awk -v W="$1" -v w="$2" -v n="$3" 'BEGIN { s = ""; for (i = 0; i < n; i++) if (i % W == w) s = s (s == "" ? "" : ",") i; print s }'
}
expected_bytes() {   # W w NFILES -> the sum of those files' sizes on disk
    _t=0
    for _i in $(expected_files "$1" "$2" "$3" | tr ',' ' '); do
        _t=$((_t + $(stat -c %s "$d/shards/$(printf 'shard-%05d-of-%05d.bin' "$_i" "$3")")))
    done
    echo "$_t"
}

"$bin" export --what=shards --num_shards=4 --model_dir="$d/shards" $COMMON --experiment=mlp_synthetic > "$d/export.txt" 2>&1 ||
    { echo "mpi_shards: export failed: $(cat "$d/export.txt")"; exit 1; }
all=$(expected_bytes 1 0 4)

# one mpirun cell: POLICY W ORACLE_DIR -> the bytes and bits checks
cell() {
    pol=$1 W=$2 oracle=$3
    m="$d/m_${pol}_$W"
    # shellcheck disable=SC2086
    timeout 120 mpirun --oversubscribe -np "$W" "$bin" train --variant=mpi --distribution_strategy=multi_worker_mirrored \
        --auto_shard_policy="$pol" --dataset_shards="$d/shards" $COMMON --model_dir="$m" > "$m.out" 2> "$m.err"
    st=$?
    check "$pol np=$W runs" "$([ $st = 0 ] && echo 1 || echo 0)" "mpirun exit $st$([ $st = 0 ] || echo "; $(grep 'distref' "$m.err" | head -2)")"
    w=0
    while [ "$w" -lt "$W" ]; do
        line=$(grep "^shards: worker $w of $W " "$m.err")
        got_b=$(echo "$line" | sed -n 's/.* read \([0-9]*\) bytes from .*/\1/p')
        got_f=$(echo "$line" | sed -n 's/.* shard files (\([0-9,.]*\)).*/\1/p')
        if [ "$pol" = data ]; then want_f=0,1,2,3 want_b=$all
        else want_f=$(expected_files "$W" "$w" 4) want_b=$(expected_bytes "$W" "$w" 4); fi
        check "$pol np=$W rank $w bytes" "$([ "$got_b" = "$want_b" ] && [ "$got_f" = "$want_f" ] && echo 1 || echo 0)" \
            "read $got_b bytes of files ($got_f); expected $want_b of ($want_f) of the $all bytes in 4 files"
        w=$((w + 1))
    done
    a=$(sig "$m") b=$(sig "$oracle")
    check "$pol np=$W bits" "$([ "$a" = "$b" ] && echo 1 || echo 0)" \
        "$(echo "$a" | head -1 | cut -c1-60)... $([ "$a" = "$b" ] && echo '=' || echo '!=') $(basename "$oracle")"
}

# oracles, in this process under --variant=ref
# shellcheck disable=SC2086
"$bin" train --distribution_strategy=one_device $COMMON --model_dir="$d/one_device" > /dev/null 2>&1
for W in 2 3; do
    # shellcheck disable=SC2086
    TF_CONFIG=$(tfc $W) "$bin" train --distribution_strategy=multi_worker_mirrored --auto_shard_policy=file \
        --dataset_shards="$d/shards" $COMMON --model_dir="$d/ref_file_$W" > /dev/null 2> "$d/ref_file_$W.err"
done
# shellcheck disable=SC2086
"$bin" train --distribution_strategy=multi_worker_mirrored --auto_shard_policy=file $COMMON --model_dir="$d/whole_file_1" > /dev/null 2>&1

cell file 2 "$d/ref_file_2"
cell file 3 "$d/ref_file_3"
cell auto 2 "$d/ref_file_2"          # 4 files >= 2 workers: AUTO is FILE
cell data 2 "$d/one_device"          # every worker reads every file: the whole dataset, DATA's bits
cell data 3 "$d/one_device"
cell file 1 "$d/whole_file_1"        # one worker reads every file: the whole-file run's bits
line=$(grep '^shards: ' "$d/ref_file_2.err")
check "ref emulation reads all" "$(echo "$line" | grep -q "every worker) read $all bytes from 4 of 4" && echo 1 || echo 0)" "$line"

# bad input: exit 2, naming the file or the field
bad() {   # NAME EXIT EXPECTED_TEXT CMD...
    name=$1 code=$2 want=$3; shift 3
    "$@" > "$d/bad.out" 2> "$d/bad.err"; st=$?
    check "$name" "$([ $st = "$code" ] && grep -q "$want" "$d/bad.err" && echo 1 || echo 0)" \
        "exit $st: $(grep -m1 'distref' "$d/bad.err" | cut -c1-200)"
}
# shellcheck disable=SC2086
bad "file np=5 > 4 files" 2 "5 workers but the input has 4 files" \
    timeout 120 mpirun --oversubscribe -np 5 "$bin" train --variant=mpi --distribution_strategy=multi_worker_mirrored \
    --auto_shard_policy=file --dataset_shards="$d/shards" $COMMON --model_dir="$d/m5"
cp -r "$d/shards" "$d/missing" && rm "$d/missing/shard-00002-of-00004.bin"
# shellcheck disable=SC2086
bad "missing shard file" 2 "shard-00002-of-00004.bin" \
    timeout 120 mpirun --oversubscribe -np 2 "$bin" train --variant=mpi --distribution_strategy=multi_worker_mirrored \
    --auto_shard_policy=file --dataset_shards="$d/missing" $COMMON --model_dir="$d/m6"
cp -r "$d/shards" "$d/lying" && sed -i 's/"examples": 58, "bytes": 45562/"examples": 58, "bytes": 45563/' "$d/lying/shards.json"
# shellcheck disable=SC2086
bad "index inconsistent" 2 'files\[1\]: field "bytes": 45563' \
    "$bin" train --distribution_strategy=one_device --dataset_shards="$d/lying" $COMMON --model_dir="$d/m7"
# one example moved from file 1 to file 0 in the index alone: consistent, but not what the files hold
cp -r "$d/shards" "$d/moved" && sed -i -e 's/"first": 0, "examples": 57, "bytes": 44777/"first": 0, "examples": 58, "bytes": 45562/' \
    -e 's/"first": 57, "examples": 58, "bytes": 45562/"first": 58, "examples": 57, "bytes": 44777/' "$d/moved/shards.json"
# shellcheck disable=SC2086
bad "index disagrees with its files" 2 'shard-00000-of-00004.bin: 44777 bytes, the index (shards.json) says files\[0\].bytes = 45562' \
    timeout 120 mpirun --oversubscribe -np 2 "$bin" train --variant=mpi --distribution_strategy=multi_worker_mirrored \
    --auto_shard_policy=data --dataset_shards="$d/moved" $COMMON --model_dir="$d/m10"
cp -r "$d/shards" "$d/flipped" && printf 'X' | dd of="$d/flipped/shard-00003-of-00004.bin" bs=1 seek=100 conv=notrunc 2> /dev/null
# shellcheck disable=SC2086
bad "corrupted shard file" 1 "shard-00003-of-00004.bin: SHA-256" \
    "$bin" train --distribution_strategy=one_device --dataset_shards="$d/flipped" $COMMON --model_dir="$d/m8"
# shellcheck disable=SC2086
bad "corrupted shard file, mpirun" 1 "MPI rank 1 of 2.*shard-00003-of-00004.bin: SHA-256" \
    timeout 120 mpirun --oversubscribe -np 2 "$bin" train --variant=mpi --distribution_strategy=multi_worker_mirrored \
    --auto_shard_policy=file --dataset_shards="$d/flipped" $COMMON --model_dir="$d/m9"

echo "mpi_shards: $ok/$total"
[ "$ok" = "$total" ]
