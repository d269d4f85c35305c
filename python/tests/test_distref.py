"""Tests of the distref Python package against bin/distref ($DISTREF):
a trajectory written from Python is read by `distref diff`; diff_numpy
gives the CLI's report; runs and exports read as arrays."""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import distref  # noqa: E402

BIN = os.environ.get("DISTREF", os.path.join(os.path.dirname(__file__), "..", "..", "bin", "distref"))
COMMON = ["--experiment=mlp_synthetic", "--train_steps=4", "--synthetic_examples=256", "--distribution_strategy=one_device"]


def train(model_dir, *extra):
    subprocess.run([BIN, "train", "--model_dir=" + model_dir] + COMMON + list(extra), check=True,
                   stdout=subprocess.DEVNULL)


KEYS_ELEM = ("step", "tensor", "flat_index", "index", "a_hex", "b_hex", "ulp")
KEYS_ROW = ("step", "tensor", "elements", "differing", "beyond_tolerance", "max_ulp", "ulp_histogram")


class TestDistref(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="distref_py_")
        cls.run_dir = os.path.join(cls.tmp, "run")
        train(cls.run_dir, "--trajectory=every:2")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp)

    def copy_through_python(self, name, change=None):
        """distref's trajectory re-recorded from Python (change(step, tensors) may plant a difference)."""
        src = distref.Run(self.run_dir).trajectory
        out = distref.Trajectory(os.path.join(self.tmp, name), settings={"experiment": "mlp_synthetic"})
        for s in src.steps:
            t = src.load(s)
            loss = t.pop("loss", None)
            if change:
                change(s, t)
            out.record(s, t, loss=None if loss is None else float(loss))
        return out.path

    def assert_same_report(self, a, b, tolerance=None):
        cli = distref.diff(a, b, tolerance=tolerance, distref=BIN)
        py = distref.diff_numpy(a, b, tolerance=tolerance)
        for k in ("identical", "differing", "elements", "tensors_compared", "beyond_tolerance", "pass", "tolerance"):
            self.assertEqual(cli[k], py[k], k)
        for which in ("first_divergence", "first_beyond_tolerance"):
            if cli[which] is None:
                self.assertIsNone(py[which])
            else:
                self.assertEqual({k: cli[which][k] for k in KEYS_ELEM}, {k: py[which][k] for k in KEYS_ELEM}, which)
        self.assertEqual([{k: r[k] for k in KEYS_ROW} for r in cli["rows"]],
                         [{k: r[k] for k in KEYS_ROW} for r in py["rows"]])
        return cli

    def test_python_written_trajectory_is_identical(self):
        p = self.copy_through_python("same")
        rep = self.assert_same_report(self.run_dir, p)
        self.assertTrue(rep["identical"])
        self.assertEqual(rep["exit"], 0)

    def test_planted_difference_named(self):
        def plant(step, t):
            if step == 2:
                k = t["dense_1/kernel"]
                bits = k.view(np.uint32)
                bits[3, 4] += 5   # 5 ulps at [3, 4]
                k[0, 1] = np.float32(np.nan)
        p = self.copy_through_python("planted", plant)
        rep = self.assert_same_report(self.run_dir, p)
        fd = rep["first_divergence"]
        self.assertEqual((fd["step"], fd["tensor"], fd["index"]), (2, "dense_1/kernel", [0, 1]))
        self.assertEqual(fd["ulp"], "nan")
        self.assertEqual(rep["exit"], 1)
        self.assert_same_report(self.run_dir, p, tolerance="ulp=5")
        self.assert_same_report(self.run_dir, p, tolerance="rtol=1e-3")
        self.assert_same_report(self.run_dir, p, tolerance="atol=1e-6")
        # --plot's data file: the JSON rows, number for number (a NaN's max ulp as -1)
        d = os.path.join(self.tmp, "plot")
        rep = distref.diff(self.run_dir, p, plot=d)
        with open(os.path.join(d, "divergence.dat")) as f:
            dat = [line.rstrip("\n").split("\t") for line in f if line.strip() and not line.startswith("#")]
        self.assertEqual(sorted((int(r[0]), r[2], int(r[3]), int(r[4]), float(r[5]), float(r[7])) for r in dat),
                         sorted((r["step"], r["tensor"], r["differing"], r["elements"],
                                 -1.0 if r["max_ulp"] == "nan" else float(r["max_ulp"]), float(r["max_rel"]))
                                for r in rep["rows"]))

    def test_nan_payload_differs(self):
        def plant(step, t):
            if step == 4:
                t["dense_0/bias"][0] = np.array([0x7fc00001], dtype=np.uint32).view(np.float32)[0]
        a = self.copy_through_python("nan_a", lambda s, t: t["dense_0/bias"].__setitem__(0, np.float32(np.nan)) if s == 4 else None)
        b = self.copy_through_python("nan_b", plant)
        rep = self.assert_same_report(a, b, tolerance="rtol=1")
        self.assertFalse(rep["pass"])

    def test_run_reading(self):
        run = distref.Run(self.run_dir)
        self.assertEqual(run.summary["steps"], 4)
        losses = run.losses
        t = run.trajectory
        self.assertEqual(t.steps, [0, 2, 4])
        self.assertEqual(np.float32(losses[4]), t.loss(4))
        self.assertEqual(t.tensors["dense_0/kernel"], (784, 128))

    def test_export(self):
        d = os.path.join(self.tmp, "export")
        subprocess.run([BIN, "export", "--what=all", "--model_dir=" + d] + COMMON, check=True, stdout=subprocess.DEVNULL)
        e = distref.load_export(d)
        self.assertEqual(e["x"].shape, (256, 784))
        t = distref.Run(self.run_dir).trajectory
        np.testing.assert_array_equal(e["init"]["dense_0/kernel"], t.load(0, "dense_0/kernel"))
        subprocess.run([BIN, "export", "--what=weights", "--model_dir=" + self.run_dir] + COMMON, check=True,
                       stdout=subprocess.DEVNULL)
        w = distref.Run(self.run_dir).weights
        np.testing.assert_array_equal(w["dense_1/bias"], t.load(4, "dense_1/bias"))

    def test_record_refusals(self):
        t = distref.Trajectory(os.path.join(self.tmp, "bad"))
        t.record(1, {"a": np.zeros(3)})
        with self.assertRaises(ValueError):
            t.record(1, {"a": np.zeros(3)})
        with self.assertRaises(ValueError):
            t.record(2, {"a": np.zeros(4)})
        with self.assertRaises(ValueError):
            t.record(3, {"../x": np.zeros(3)})

    def test_format_error_raises(self):
        p = self.copy_through_python("short")
        other = distref.Trajectory(os.path.join(self.tmp, "one_step"), settings={"experiment": "mlp_synthetic"})
        other.record(0, {"dense_0/bias": np.zeros(128, np.float32)})
        with self.assertRaises(ValueError) as cm:
            distref.diff(p, other.path, distref=BIN)
        self.assertIn("step 2", str(cm.exception))


if __name__ == "__main__":
    unittest.main()
