"""distref: read distref runs, write and diff trajectories (docs/JUDGING.md).

Pure Python + NumPy. A *trajectory* is a folder: index.json plus one
float32 .npy per recorded step and tensor, at <step dir>/<tensor name>.npy
(a name's '/' are folders). distref writes it (`train --trajectory=every:N`,
`export --what=weights`); Trajectory.record writes it from any framework;
`distref diff` (or diff_numpy) compares two.
"""
import json
import os
import re
import shutil
import subprocess
import tempfile

import numpy as np

from ._diff import diff_numpy, ulp_distance  # noqa: F401

__all__ = ["Trajectory", "Run", "load_export", "diff", "diff_numpy", "ulp_distance", "FORMAT", "VERSION"]

FORMAT = "distref-trajectory"
VERSION = 1
_COMPONENT = re.compile(r"^[A-Za-z0-9_.\-]+$")


def _name_ok(name):
    if not name or len(name) >= 96:
        return False
    return all(_COMPONENT.match(c) and c not in (".", "..") for c in name.split("/"))


def _write_atomic(path, data):
    d = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(prefix=os.path.basename(path) + ".tmp.", dir=d)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _as_f32(name, value):
    a = np.asarray(value)
    if a.dtype != np.float32:
        if not np.issubdtype(a.dtype, np.floating) and not np.issubdtype(a.dtype, np.integer):
            raise TypeError("%s: dtype %s; a trajectory holds float32" % (name, a.dtype))
        a = a.astype(np.float32)   # rounded once, to nearest even (NumPy's cast)
    return np.require(a, dtype="<f4", requirements="C")   # (ascontiguousarray would make a scalar 1-d)


class Trajectory:
    """A trajectory folder: opened if index.json exists, else created on the first record()."""

    def __init__(self, path, settings=None):
        self.path = str(path)
        index = os.path.join(self.path, "index.json")
        if os.path.exists(index):
            with open(index, "r", encoding="utf-8") as f:
                ix = json.load(f)
            if ix.get("format") != FORMAT or ix.get("version") != VERSION:
                raise ValueError("%s: not a %s version %d index" % (index, FORMAT, VERSION))
            self._ix = ix
            if settings:
                self._ix.setdefault("settings", {}).update(settings)
        else:
            self._ix = {"format": FORMAT, "version": VERSION, "settings": dict(settings or {}),
                        "tensors": [], "steps": []}

    # ---- reading
    @property
    def settings(self):
        return self._ix.get("settings", {})

    @property
    def steps(self):
        """The recorded steps, ascending."""
        return [s["step"] for s in self._ix["steps"]]

    @property
    def tensors(self):
        """{name: shape} in the index's order."""
        return {t["name"]: tuple(t["shape"]) for t in self._ix["tensors"]}

    def _step(self, step):
        for s in self._ix["steps"]:
            if s["step"] == step:
                return s
        raise KeyError("step %d is not in %s (steps: %s)" % (step, self.path, self.steps[:10]))

    def load(self, step, name=None):
        """One tensor of a step (name), or {name: array} of every tensor it holds."""
        s = self._step(step)
        names = [name] if name is not None else s["tensors"]
        out = {n: np.load(os.path.join(self.path, s["dir"], n + ".npy")) for n in names}
        return out[name] if name is not None else out

    def loss(self, step):
        return float(self.load(step, "loss")) if "loss" in self._step(step)["tensors"] else None

    # ---- writing
    def record(self, step, tensors, loss=None):
        """Writes step's tensors ({name: array}; Keras names dense_0/kernel, ...) and loss (a scalar)."""
        step = int(step)
        if step < 0:
            raise ValueError("step %d: steps are >= 0" % step)
        if self._ix["steps"] and step <= self._ix["steps"][-1]["step"]:
            raise ValueError("step %d: record steps in ascending order (last: %d)" % (step, self._ix["steps"][-1]["step"]))
        items = list(tensors.items())
        if loss is not None:
            items.append(("loss", np.float32(loss)))
        known = {t["name"]: t for t in self._ix["tensors"]}
        sdir = "step_%08d" % step
        names = []
        for name, value in items:
            if not _name_ok(name):
                raise ValueError("%r: a tensor name is [A-Za-z0-9_.-] components joined by '/'" % (name,))
            a = _as_f32(name, value)
            if name in known and tuple(known[name]["shape"]) != a.shape:
                raise ValueError("%s: shape %s, earlier steps had %s" % (name, a.shape, tuple(known[name]["shape"])))
            if name not in known:
                known[name] = {"name": name, "shape": list(a.shape), "dtype": "float32"}
                self._ix["tensors"].append(known[name])
            path = os.path.join(self.path, sdir, name + ".npy")
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with tempfile.TemporaryFile() as f:
                np.save(f, a, allow_pickle=False)
                f.seek(0)
                _write_atomic(path, f.read())
            names.append(name)
        self._ix["steps"].append({"step": step, "dir": sdir, "tensors": names})
        self.flush()

    def flush(self):
        os.makedirs(self.path, exist_ok=True)
        _write_atomic(os.path.join(self.path, "index.json"), (json.dumps(self._ix, indent=1) + "\n").encode())


class Run:
    """A distref run directory (--model_dir): metrics, summary, trajectory, exported weights."""

    def __init__(self, path):
        self.path = str(path)

    @property
    def metrics(self):
        """metrics.jsonl as a list of dicts (segment markers included as they are)."""
        with open(os.path.join(self.path, "metrics.jsonl"), "r", encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]

    @property
    def losses(self):
        """{step: loss} from metrics.jsonl, the loss taken from its exact bits."""
        out = {}
        for m in self.metrics:
            if "step" in m and "loss_bits" in m:
                out[m["step"]] = float(np.array([int(m["loss_bits"], 16)], dtype="<u4").view("<f4")[0])
        return out

    @property
    def summary(self):
        with open(os.path.join(self.path, "summary.json"), "r", encoding="utf-8") as f:
            return json.load(f)

    @property
    def trajectory(self):
        return Trajectory(os.path.join(self.path, "trajectory"))

    @property
    def weights(self):
        """`distref export --what=weights`'s final variables and slots: {name: array}."""
        t = Trajectory(os.path.join(self.path, "weights"))
        return t.load(t.steps[-1])


def load_export(path):
    """`distref export --format=npy` output as arrays: init ({dense_0/kernel: ...}), x, y, order, batches."""
    out = {"init": {}}
    for f in sorted(os.listdir(path)):
        full = os.path.join(path, f)
        m = re.match(r"^(dense_\d+)_(kernel|bias)\.npy$", f)
        if m:
            out["init"][m.group(1) + "/" + m.group(2)] = np.load(full)
        elif f in ("x.npy", "y.npy", "order.npy"):
            out[f[:-4]] = np.load(full)
        elif f == "batches.json":
            with open(full, "r", encoding="utf-8") as h:
                out["batches"] = json.load(h)
    return out


def _distref_bin(distref=None):
    for cand in (distref, os.environ.get("DISTREF"), shutil.which("distref")):
        if cand:
            return cand
    here = os.path.dirname(os.path.abspath(__file__))
    for up in (os.path.join(here, "..", "..", "bin", "distref"), os.path.join(os.getcwd(), "bin", "distref")):
        if os.path.exists(up):
            return up
    raise FileNotFoundError("distref: give distref=PATH, set $DISTREF, or put bin/distref on PATH")


def diff(a, b, tolerance=None, distref=None, plot=None):
    """`distref diff A B --json` (tolerance: "ulp=N", "rtol=X" or "atol=X"): the report as a dict, with "exit"
    (0 pass, 1 fail). plot: a folder for `--plot` (divergence.dat, .gp, index.html, .svg with gnuplot).

    A usage or format error (exit 2) raises ValueError with the CLI's message."""
    cmd = [_distref_bin(distref), "diff", str(a), str(b), "--json"]
    if tolerance:
        cmd.append("--tolerance=" + tolerance)
    if plot:
        cmd.append("--plot=" + str(plot))
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode not in (0, 1):
        raise ValueError(p.stderr.strip() or "distref diff exited %d" % p.returncode)
    report = json.loads(p.stdout)
    report["exit"] = p.returncode
    return report
