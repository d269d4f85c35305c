"""The PyTorch CPU peer of distref's conv engine (issue 31's speed row):
cnn_synthetic at G=64 (or resnet_synthetic, --model resnet) in PyTorch and
in `bin/distref train --variant=openmp` (fast and exact numerics), timed in
one run, interleaved, as bench/peer_torch.py does for the MLP.

The model is cnn_synthetic's (core/experiment.c), float32, NCHW in PyTorch:
  28x28x1 -> Conv2D(4, 3, stride 2, "same": TensorFlow pads one row and
  column after) -> BatchNorm (momentum 0.01 in PyTorch's convention = Keras'
  0.99, eps 1e-3) + ReLU -> Conv2D(4, 3, "same", ReLU) -> Add(the BN's
  output) -> MaxPool 2x2 -> Conv2D(8, 1, ReLU) -> Conv2D(8, 3, stride 2,
  valid) -> Flatten -> Dropout(0.25) -> Dense(10); cross-entropy from
  logits (mean), SGD lr 0.01 momentum 0.9.

resnet_synthetic's (core/experiment_resnet.c, widths 4, 8, 16): a stem
  Conv2D(4, 3, same) + BN + ReLU; 3 stages of 2 basic blocks (Conv 3x3 +
  BN + ReLU, Conv 3x3 + BN, Add + ReLU; the first block of stages 2 and 3
  has stride 2 and a 1x1 stride-2 projection + BN on the shortcut; "same"
  padding as TensorFlow: the odd row and column after); global average
  pooling; Dense(10); Adam 0.001, epsilon 1e-7 (the experiment's optimizer).

  torch    a training loop over pre-made random batches, after a warm-up;
           the best of 3 loops;
  distref  one_device at 30 steps and at 30 + --distref-steps (exact: a
           third of them), the fastest of 3 runs each, differenced (the
           start-up removed), "too noisy" when the difference is not
           clearly positive.

  python bench/peer_torch_conv.py [--model cnn|resnet] [--distref bin/distref] [--steps 300]
                                  [--distref-steps 600] [--no-exact] [--json FILE]
"""
import argparse
import json
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import peer_torch   # bench/ is on sys.path when this file runs as a script


class Cnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.c0 = nn.Conv2d(1, 4, 3, stride=2)
        self.bn = nn.BatchNorm2d(4, eps=1e-3, momentum=0.01)
        self.c2 = nn.Conv2d(4, 4, 3, padding=1)
        self.c5 = nn.Conv2d(4, 8, 1)
        self.c6 = nn.Conv2d(8, 8, 3, stride=2)
        self.drop = nn.Dropout(0.25)
        self.dense = nn.Linear(72, 10)

    def forward(self, x):
        b = F.relu(self.bn(self.c0(F.pad(x, (0, 1, 0, 1)))))
        h = F.max_pool2d(F.relu(self.c2(b)) + b, 2)
        h = self.c6(F.relu(self.c5(h)))
        return self.dense(self.drop(torch.flatten(h, 1)))


def same(x, k, stride):
    """TensorFlow's "same" padding: the total split with the odd one after."""
    n = x.shape[-1]
    total = max((-(-n // stride) - 1) * stride + k - n, 0)
    return F.pad(x, (total // 2, total - total // 2, total // 2, total - total // 2))


class Block(nn.Module):
    def __init__(self, cin, f, stride):
        super().__init__()
        self.stride = stride
        self.c1, self.b1 = nn.Conv2d(cin, f, 3, stride=stride), nn.BatchNorm2d(f, eps=1e-3, momentum=0.01)
        self.c2, self.b2 = nn.Conv2d(f, f, 3), nn.BatchNorm2d(f, eps=1e-3, momentum=0.01)
        self.proj = None
        if stride != 1:
            self.proj = nn.Sequential(nn.Conv2d(cin, f, 1, stride=stride), nn.BatchNorm2d(f, eps=1e-3, momentum=0.01))

    def forward(self, x):
        h = F.relu(self.b1(self.c1(same(x, 3, self.stride))))
        h = self.b2(self.c2(same(h, 3, 1)))
        return F.relu(h + (self.proj(x) if self.proj is not None else x))


class Resnet(nn.Module):
    def __init__(self, w=4):
        super().__init__()
        self.stem, self.bn = nn.Conv2d(1, w, 3), nn.BatchNorm2d(w, eps=1e-3, momentum=0.01)
        blocks, cin = [], w
        for stage in range(3):
            for b in range(2):
                blocks.append(Block(cin, w << stage, 2 if stage > 0 and b == 0 else 1))
                cin = w << stage
        self.blocks = nn.Sequential(*blocks)
        self.dense = nn.Linear(cin, 10)

    def forward(self, x):
        h = self.blocks(F.relu(self.bn(self.stem(same(x, 3, 1)))))
        return self.dense(h.mean(dim=(2, 3)))


MODELS = {  # name: (distref experiment, module, optimizer, G)
    "cnn": ("cnn_synthetic", Cnn, lambda p: torch.optim.SGD(p, lr=0.01, momentum=0.9), 64),
    "resnet": ("resnet_synthetic", Resnet, lambda p: torch.optim.Adam(p, lr=0.001, eps=1e-7), 32),
}


def torch_rate(model_name, G, threads, steps, warmup=20, reps=3):
    return max(torch_rate_once(model_name, G, threads, steps, warmup) for _ in range(reps))


def torch_rate_once(model_name, G, threads, steps, warmup):
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    _, make, optimizer, _ = MODELS[model_name]
    model = make()
    opt = optimizer(model.parameters())
    xs = [torch.rand(G, 1, 28, 28) for _ in range(8)]
    ys = [torch.randint(0, 10, (G,)) for _ in range(8)]

    def step(i):
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(xs[i % 8]), ys[i % 8])
        loss.backward()
        opt.step()

    for i in range(warmup):
        step(i)
    t0 = time.perf_counter()
    for i in range(steps):
        step(i)
    return steps * G / (time.perf_counter() - t0)


def distref_rate(binary, experiment, numerics, G, threads, steps, reps=3):
    """peer_torch.py's differenced rate (30 and 30 + steps) on the experiment."""
    return peer_torch.distref_rate(binary, numerics, G, threads, steps, reps, base=30, experiment=experiment)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", choices=sorted(MODELS), default="cnn")
    ap.add_argument("--distref", default="bin/distref")
    ap.add_argument("--steps", type=int, default=300, help="torch's timed steps")
    ap.add_argument("--distref-steps", type=int, default=600, help="distref fast's steps (exact: a third)")
    ap.add_argument("--no-exact", action="store_true", help="skip distref exact (its columns '-'): a shorter run")
    ap.add_argument("--json")
    a = ap.parse_args()
    rows = []
    experiment, _, _, G = MODELS[a.model]
    print(f"# PyTorch {torch.__version__} CPU peer, {experiment} G={G}, {a.steps} steps; distref "
          f"one_device fast {a.distref_steps} steps, exact {a.distref_steps // 3}")
    print(f"  {'G':>4} {'threads':>7} {'torch ex/s':>12} {'fast ex/s':>12} {'fast/torch':>11} "
          f"{'exact ex/s':>12} {'exact/torch':>12}")
    cell = lambda v, f: f"{'(too noisy)':>12}" if v is None else format(v, f)
    for threads in (1, 2):
        t = torch_rate(a.model, G, threads, a.steps)
        d = distref_rate(a.distref, experiment, "fast", G, threads, a.distref_steps)
        e = None if a.no_exact else distref_rate(a.distref, experiment, "exact", G, threads, a.distref_steps // 3)
        rows.append({"G": G, "threads": threads, "torch": t, "distref_fast": d, "ratio": d / t if d else None,
                     "distref_exact": e, "ratio_exact": e / t if e else None})
        ex = f"{'-':>12} {'-':>12}" if a.no_exact else f"{cell(e, '>12.0f')} {cell(e and e / t, '>12.3f')}"
        print(f"  {G:>4} {threads:>7} {t:>12.0f} {cell(d, '>12.0f')} {cell(d and d / t, '>11.3f')} {ex}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"torch": torch.__version__, "model": experiment, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
