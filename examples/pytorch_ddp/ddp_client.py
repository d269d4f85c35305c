"""PyTorch DDP (gloo, CPU) judged by distref (docs/JUDGING.md).

Trains distref's mlp_synthetic MLP (784 -> 128 relu -> 10, sparse softmax
cross-entropy from logits, Keras SGD momentum 0.9, lr 0.01) with
DistributedDataParallel on WORLD CPU processes, initialized from
`distref export` (init, data, per-replica ids per step), and writes its
trajectory in distref's format (python/distref) for `distref diff`.

    bin/distref export --what=all --model_dir=EXP --distribution_strategy=mirrored --num_gpus=W ...
    python ddp_client.py --export EXP --world W --steps N --out TRAJ [--bug per_rank_mean]
    bin/distref diff REF_RUN TRAJ

Loss scaling: DDP averages gradients over the W ranks, so each rank's loss
is its examples' sum x W / G (G: the global batch), and the mean DDP
takes is the global batch's sum / G, as distref (and TensorFlow's
compute_average_loss) defines it, also for a short final batch.
--bug per_rank_mean plants the classic mistake: each rank takes the mean
over its own examples (F.cross_entropy's default), which is the same
only while every rank's share is G / W.
"""
import argparse
import json
import os
import sys

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import distref  # noqa: E402

LR, MOMENTUM = np.float32(0.01), np.float32(0.9)


class MLP(torch.nn.Module):
    def __init__(self, init):
        super().__init__()
        self.dense_0 = torch.nn.Linear(784, 128)
        self.dense_1 = torch.nn.Linear(128, 10)
        with torch.no_grad():   # Keras kernels are in x out; torch's weights out x in
            for l, layer in enumerate((self.dense_0, self.dense_1)):
                layer.weight.copy_(torch.from_numpy(init["dense_%d/kernel" % l].T.copy()))
                layer.bias.copy_(torch.from_numpy(init["dense_%d/bias" % l]))

    def forward(self, x):
        return self.dense_1(torch.relu(self.dense_0(x)))


def keras_tensors(model, velocity, grads):
    """The trajectory's tensors, Keras names and layouts."""
    out = {}
    layers = (model.module.dense_0, model.module.dense_1)
    for prefix, pick in (("", lambda p: p.detach()), ("optimizer/momentum/", lambda p: velocity[p]),
                         ("gradient/", lambda p: grads[p])):
        if grads is None and prefix == "gradient/":
            continue
        for l, layer in enumerate(layers):
            out[prefix + "dense_%d/kernel" % l] = pick(layer.weight).numpy().T.copy()
            out[prefix + "dense_%d/bias" % l] = pick(layer.bias).numpy().copy()
    return out


def worker(rank, args):
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(args.port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=args.world)
    exp = distref.load_export(args.export)
    x, y = torch.from_numpy(exp["x"]), torch.from_numpy(exp["y"].astype(np.int64))
    steps = exp["batches"]["steps"][:args.steps]
    G = exp["batches"]["global_batch_size"]
    if exp["batches"]["num_replicas"] != args.world:
        raise SystemExit("export has %d replicas, --world=%d" % (exp["batches"]["num_replicas"], args.world))
    model = torch.nn.parallel.DistributedDataParallel(MLP(exp["init"]))
    params = list(model.parameters())
    velocity = {p: torch.zeros_like(p) for p in params}
    traj = None
    if rank == 0:
        traj = distref.Trajectory(args.out, settings={"experiment": "mlp_synthetic", "producer": "pytorch ddp gloo",
                                                      "world_size": args.world, "bug": args.bug or ""})
        traj.record(0, keras_tensors(model, velocity, None))
    for s in steps:
        ids = torch.tensor(s["ids"][rank], dtype=torch.int64)
        logits = model(x[ids])
        loss_sum = F.cross_entropy(logits, y[ids], reduction="sum")
        if args.bug == "per_rank_mean":
            loss = loss_sum / max(len(ids), 1)
        else:
            loss = loss_sum * (args.world / G)
        model.zero_grad(set_to_none=False)
        loss.backward()   # DDP: all-reduce, then / world
        with torch.no_grad():
            for p in params:   # Keras SGD momentum: v = m v - lr g; w = w + v
                velocity[p].mul_(float(MOMENTUM)).sub_(p.grad * float(LR))
                p.add_(velocity[p])
            total = loss_sum.detach().clone()
            dist.all_reduce(total)
        if rank == 0:
            grads = {p: p.grad.detach() for p in params}
            traj.record(s["step"], keras_tensors(model, velocity, grads), loss=float(total / G))
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--export", required=True, help="distref export --what=all folder")
    ap.add_argument("--world", type=int, default=1)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--out", required=True, help="the trajectory folder to write")
    ap.add_argument("--bug", choices=["per_rank_mean"], default=None)
    ap.add_argument("--port", type=int, default=29512)
    args = ap.parse_args()
    if os.path.exists(os.path.join(args.out, "index.json")):
        raise SystemExit("%s already holds a trajectory" % args.out)
    mp.spawn(worker, args=(args,), nprocs=args.world, join=True)
    print(json.dumps({"trajectory": args.out, "world": args.world, "steps": args.steps, "bug": args.bug}))


if __name__ == "__main__":
    main()
