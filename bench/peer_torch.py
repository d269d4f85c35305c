"""The PyTorch CPU peer of distref's fast and exact paths (issue 12's speed
targets: fast >= 1.0x PyTorch, exact >= 0.25x, at G=64 on one thread).

Same model, batch, optimizer and threads as `mlp_synthetic` in distref's
fast numerics: Dense 784-128 ReLU, Dense 128-10, softmax cross-entropy from
logits (mean over the batch), SGD lr 0.01 momentum 0.9, float32. Both are
timed in this run, interleaved, so the ratio is taken on the same noisy
machine at the same moment:

  torch    a training loop over pre-made random batches (data values do not
           change the speed), after a warm-up; the best of 3 loops;
  distref  `bin/distref train --variant=openmp --numerics=fast` (and
           `exact`) at 50 steps and at 50 + --distref-steps (exact: a third
           of them), the fastest of 3 runs of each; the difference removes
           the start-up (synthetic data, initialization), leaving the steps'
           own time ("too noisy" when it is not clearly positive). The
           difference spans about a second, so the start-up's jitter
           (tens of ms) moves a ratio by a few percent at most.

  python bench/peer_torch.py [--distref bin/distref] [--steps 300] [--distref-steps 1500] [--json FILE]

Prints one line per (G, threads) and exits 0; a missing torch is the
caller's business (scripts/run_bench.sh prints a one-line note instead).
"""
import argparse
import json
import os
import subprocess
import tempfile
import time

import torch


def torch_rate(G, threads, steps, warmup=20, reps=3):
    return max(torch_rate_once(G, threads, steps, warmup) for _ in range(reps))


def torch_rate_once(G, threads, steps, warmup):
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(784, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    xs = [torch.rand(G, 784) for _ in range(8)]
    ys = [torch.randint(0, 10, (G,)) for _ in range(8)]

    def step(i):
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(xs[i % 8]), ys[i % 8])
        loss.backward()
        opt.step()

    for i in range(warmup):
        step(i)
    t0 = time.perf_counter()
    for i in range(steps):
        step(i)
    return steps * G / (time.perf_counter() - t0)


def distref_seconds(binary, numerics, G, threads, steps, experiment="mlp_synthetic"):
    with tempfile.TemporaryDirectory() as d:
        cmd = [binary, "train", "--variant=openmp", f"--numerics={numerics}", "--distribution_strategy=one_device",
               f"--experiment={experiment}", f"--global_batch_size={G}", f"--threads={threads}",
               f"--train_steps={steps}", f"--synthetic_examples={max(20000, G * 8)}", f"--model_dir={d}/run",
               f"--checkpoint_every={steps}"]
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        return time.perf_counter() - t0


def distref_rate(binary, numerics, G, threads, steps, reps=3, base=50, experiment="mlp_synthetic"):
    """Examples/s of the steps alone: the fastest of reps runs at base steps
    and at base + steps, differenced. None when the difference is not
    clearly positive (a loaded machine: the start-up's own noise is then
    larger than the steps' time, and the quotient would be meaningless).
    bench/peer_torch_conv.py uses it too."""
    short = min(distref_seconds(binary, numerics, G, threads, base, experiment) for _ in range(reps))
    long = min(distref_seconds(binary, numerics, G, threads, base + steps, experiment) for _ in range(reps))
    if long - short < 0.2 * long:
        return None
    return steps * G / (long - short)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--distref", default="bin/distref")
    ap.add_argument("--steps", type=int, default=300, help="torch's timed steps")
    ap.add_argument("--distref-steps", type=int, default=1500, help="distref fast's steps (exact: a third)")
    ap.add_argument("--json")
    a = ap.parse_args()
    rows = []
    core = os.environ.get("OPENBLAS_CORETYPE", "(OpenBLAS's own choice)")
    print(f"# PyTorch {torch.__version__} CPU peer, mlp_synthetic, SGD momentum, {a.steps} steps; distref "
          f"one_device fast {a.distref_steps} steps, exact {a.distref_steps // 3}; OPENBLAS_CORETYPE={core}")
    print(f"  {'G':>4} {'threads':>7} {'torch ex/s':>12} {'fast ex/s':>12} {'fast/torch':>11} "
          f"{'exact ex/s':>12} {'exact/torch':>12}")
    cell = lambda v, f: f"{'(too noisy)':>12}" if v is None else format(v, f)
    for G in (64, 256):
        for threads in (1, 2):
            t = torch_rate(G, threads, a.steps)
            d = distref_rate(a.distref, "fast", G, threads, a.distref_steps)
            e = distref_rate(a.distref, "exact", G, threads, a.distref_steps // 3)
            rows.append({"G": G, "threads": threads, "torch": t, "distref_fast": d, "ratio": d / t if d else None,
                         "distref_exact": e, "ratio_exact": e / t if e else None})
            print(f"  {G:>4} {threads:>7} {t:>12.0f} {cell(d, '>12.0f')} {cell(d and d / t, '>11.3f')} "
                  f"{cell(e, '>12.0f')} {cell(e and e / t, '>12.3f')}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"torch": torch.__version__, "openblas_coretype": core, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
