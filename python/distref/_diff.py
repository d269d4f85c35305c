"""A NumPy port of `distref diff` (core/traj_diff.c): the same report as
`distref diff --json`, tested equal to it (python/tests)."""
import json
import os

import numpy as np

_BUCKETS = 34   # [0] 1 ulp, [k] 2^k .. 2^(k+1)-1, last: nan
_NAN_ULP = np.uint64(2**64 - 1)


def _resolve(path):
    for sub in ("", "trajectory", "weights"):
        p = os.path.join(str(path), sub) if sub else str(path)
        if os.path.exists(os.path.join(p, "index.json")):
            return p
    raise ValueError("%s: no index.json there, nor in %s/trajectory or %s/weights" % (path, path, path))


def ulp_distance(a_bits, b_bits):
    """Ulp distance of two uint32 bit arrays (ordered representation); 2^64-1 where a NaN differs."""
    a = np.asarray(a_bits, dtype=np.uint32)
    b = np.asarray(b_bits, dtype=np.uint32)
    ka = np.where(a & 0x80000000, ~a, a | 0x80000000).astype(np.int64)
    kb = np.where(b & 0x80000000, ~b, b | 0x80000000).astype(np.int64)
    d = np.abs(ka - kb).astype(np.uint64)
    nan = (((a & 0x7fffffff) > 0x7f800000) | ((b & 0x7fffffff) > 0x7f800000)) & (a != b)
    return np.where(nan, _NAN_ULP, d)


def _label(k):
    if k == _BUCKETS - 1:
        return "nan"
    return "1" if k == 0 else "%d-%d" % (1 << k, (1 << (k + 1)) - 1)


def _bucket(u):
    out = np.full(u.shape, _BUCKETS - 1, dtype=np.int64)
    fin = u != _NAN_ULP
    out[fin] = np.minimum(np.floor(np.log2(u[fin].astype(np.float64))).astype(np.int64), _BUCKETS - 2)
    return out


def _tolerance(tolerance):
    if not tolerance:
        return ("exact", 0), "exact (ulp=0)"
    kind, _, val = tolerance.partition("=")
    if kind == "ulp":
        return ("ulp", int(val)), "ulp=%d" % int(val)
    if kind in ("rtol", "atol"):
        return (kind, float(val)), "%s=%g" % (kind, float(val))
    raise ValueError("--tolerance=%s: expected ulp=N or rtol=X" % tolerance)


def _elem(step, name, shape, flat, a, b, u):
    return {"step": step, "tensor": name, "flat_index": int(flat),
            "index": [int(i) for i in np.unravel_index(flat, shape)] if shape else [],
            "a": float(a.view(np.float32)), "b": float(b.view(np.float32)),
            "a_hex": "0x%08x" % int(a), "b_hex": "0x%08x" % int(b),
            "ulp": "nan" if u == _NAN_ULP else int(u)}


def _compare(x, y, tol):
    """Bits, ulps, relative errors and the beyond-tolerance mask of the differing elements."""
    xb, yb = x.view(np.uint32).ravel(), y.view(np.uint32).ravel()
    idx = np.nonzero(xb != yb)[0]
    u = ulp_distance(xb[idx], yb[idx])
    xa, ya = x.ravel()[idx].astype(np.float64), y.ravel()[idx].astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        d = np.abs(xa - ya)
        m = np.maximum(np.abs(xa), np.abs(ya))
        rel = np.where(m == 0, 0.0, d / np.where(m == 0, 1, m))
    rel = np.where(np.isnan(xa) | np.isnan(ya) | np.isinf(d), np.inf, rel)
    if tol[0] == "rtol":
        bad = ~(rel <= tol[1])
    elif tol[0] == "atol":
        bad = ~(d <= tol[1])
    else:
        bad = (u == _NAN_ULP) | (u > np.uint64(tol[1]))
    return idx, xb, yb, u, rel, bad


def _row(step, name, n, u, rel, bad):
    hist = np.bincount(_bucket(u), minlength=_BUCKETS)
    mx = u.max()
    return {"step": step, "tensor": name, "elements": int(n), "differing": int(u.size), "beyond_tolerance": int(bad.sum()),
            "max_ulp": "nan" if mx == _NAN_ULP else int(mx),
            "max_rel": "inf" if np.isinf(rel.max()) else float(rel.max()),
            "ulp_histogram": {_label(k): int(c) for k, c in enumerate(hist) if c}}


def diff_numpy(a, b, tolerance=None):
    """`distref diff A B --json`'s report, computed with NumPy."""
    tol, tol_text = _tolerance(tolerance)
    da, db = _resolve(a), _resolve(b)
    with open(os.path.join(da, "index.json"), encoding="utf-8") as f:
        ia = json.load(f)
    with open(os.path.join(db, "index.json"), encoding="utf-8") as f:
        ib = json.load(f)
    ea, eb = ia.get("settings", {}).get("experiment"), ib.get("settings", {}).get("experiment")
    if ea and eb and ea != eb:
        raise ValueError("settings.experiment: A is %s, B is %s" % (ea, eb))
    sa, sb = [s["step"] for s in ia["steps"]], [s["step"] for s in ib["steps"]]
    if sa != sb:
        missing = sorted(set(sa) ^ set(sb))[0]
        raise ValueError("step %d: in %s only" % (missing, "A" if missing in sa else "B"))
    shapes_b = {t["name"]: t["shape"] for t in ib["tensors"]}
    rep = {"a": da, "b": db, "steps": len(sa), "tensors_compared": 0, "elements": 0, "differing": 0,
           "tolerance": tol_text, "beyond_tolerance": 0, "first_divergence": None, "first_beyond_tolerance": None,
           "rows": []}
    for st_a, st_b in zip(ia["steps"], ib["steps"]):
        for name in st_a["tensors"]:
            if name not in st_b["tensors"]:
                continue
            x = np.load(os.path.join(da, st_a["dir"], name + ".npy"))
            y = np.load(os.path.join(db, st_b["dir"], name + ".npy"))
            if list(x.shape) != list(shapes_b[name]) or x.shape != y.shape:
                raise ValueError("tensor '%s': shape %s in A, %s in B" % (name, list(x.shape), list(y.shape)))
            rep["tensors_compared"] += 1
            rep["elements"] += x.size
            idx, xb, yb, u, rel, bad = _compare(x.astype("<f4"), y.astype("<f4"), tol)
            if not idx.size:
                continue
            step = st_a["step"]
            if rep["first_divergence"] is None:
                rep["first_divergence"] = _elem(step, name, x.shape, idx[0], xb[idx[0]], yb[idx[0]], u[0])
            if bad.any() and rep["first_beyond_tolerance"] is None:
                k = np.nonzero(bad)[0][0]
                rep["first_beyond_tolerance"] = _elem(step, name, x.shape, idx[k], xb[idx[k]], yb[idx[k]], u[k])
            rep["rows"].append(_row(step, name, x.size, u, rel, bad))
            rep["differing"] += int(u.size)
            rep["beyond_tolerance"] += int(bad.sum())
    rep["identical"] = rep["first_divergence"] is None
    rep["pass"] = rep["beyond_tolerance"] == 0
    return rep
