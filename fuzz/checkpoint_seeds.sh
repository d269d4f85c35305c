#!/bin/sh
# Regenerates fuzz/corpus/checkpoint/ from real runs of bin/distref (run it
# when the checkpoint format changes; `make` first). The bad_* seeds are real
# checkpoints with one field changed: bad_digest keeps the old SHA-256,
# bad_nparams and bad_position have it recomputed (fuzz_checkpoint recomputes
# it anyway, so they reach the checks behind the checksum).
set -eu
cd "$(dirname "$0")/.."
bin=${1:-bin/distref}
out=fuzz/corpus/checkpoint
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
run() { name=$1; shift; "$bin" train --model_dir="$tmp/$name" "$@" > /dev/null; cp "$tmp/$name/ckpt.bin" "$out/$name"; }
rm -f "$out"/*
run linear_sgd --experiment=linear_ones --distribution_strategy=one_device --train_steps=3
run linear_adam_G7 --experiment=linear_ones --distribution_strategy=one_device --optimizer=adam --global_batch_size=7 --train_steps=2
run linear_momentum_epoch1 --experiment=linear_ones --distribution_strategy=one_device --momentum=0.9 --nesterov --epochs=1
run mirrored2_drop --experiment=linear_ones --distribution_strategy=mirrored --num_gpus=2 --drop_remainder --global_batch_size=6 --train_steps=3
TF_CONFIG='{"cluster":{"worker":["a:1","b:1"]},"task":{"type":"worker","index":0}}' \
    run mwms_unsharded --experiment=linear_ones --distribution_strategy=multi_worker_mirrored --auto_shard_policy=off --global_batch_size=8 --train_steps=2
TF_CONFIG='{"cluster":{"chief":["c:1"],"worker":["w:1"],"ps":["p:1"]},"task":{"type":"chief","index":0}}' \
    run ps --experiment=linear_ones --distribution_strategy=parameter_server --train_steps=2
head -c 40 "$out/linear_sgd" > "$out/short"
# patch LEN bytes at OFFSET with HEX, then (unless "keep") recompute the trailing SHA-256
patch() {
    src=$1 dst=$2 off=$3 hex=$4 digest=${5:-new}
    cp "$out/$src" "$tmp/p"
    printf "$hex" | dd of="$tmp/p" bs=1 seek="$off" conv=notrunc 2>/dev/null
    n=$(($(wc -c < "$tmp/p") - 32))
    if [ "$digest" = new ]; then
        head -c "$n" "$tmp/p" > "$tmp/body"
        sha256sum "$tmp/body" | cut -c1-64 | xxd -r -p > "$tmp/sum"
        cat "$tmp/body" "$tmp/sum" > "$tmp/p"
    fi
    cp "$tmp/p" "$out/$dst"
}
size=$(wc -c < "$out/linear_sgd")
patch linear_sgd bad_digest $((size - 1)) '\377' keep
patch linear_sgd bad_nparams 132 '\377\377\377\177'        # nparams (offset 132) = 2^31 - 1
patch linear_momentum_epoch1 bad_position 76 '\003\000\000\000'   # position (offset 76) = 3
ls -l "$out"
