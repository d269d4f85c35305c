#!/bin/sh
# The guide's custom training loop on 1, 3 and 4 emulated GPUs, global batch 10.
set -eu
for n in 1 3 4; do
    "$EXAMPLES_BIN/custom_training_loop/custom_training_loop" --num_gpus=$n --global_batch_size=10 --print_every=25
done
