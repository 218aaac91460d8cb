"""tessera.rt against libtessera-rt's CPU backend (no GPU, no PyTorch):
the plain API end to end, and its errors."""
import array
import math
import os
import struct
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from tessera import rt  # noqa: E402


def floats(r, values):
    """A host buffer holding `values` (float32), by the runtime's alloc."""
    p = r.alloc(4 * max(len(values), 1))
    r.upload(p, array.array("f", values).tobytes())
    return p


def read(r, p, n):
    return list(struct.unpack("%df" % n, r.download(p, 4 * n)))


class PlainApi(unittest.TestCase):
    def setUp(self):
        try:
            self.r = rt.Runtime(backend="cpu", lanes=3)
        except rt.TesseraError as e:
            if os.environ.get("TESSERA_RT_REQUIRED"):
                raise
            self.skipTest("libtessera-rt not available: %s" % e)

    def tearDown(self):
        self.r.close()

    def test_library_and_operators(self):
        self.assertTrue(rt.library_path().endswith("libtessera-rt.so"))
        ops = rt.operators()
        for name in ("add", "sub", "mul", "div", "maximum", "minimum", "pow", "relu", "sigmoid", "gelu",
                     "hardswish", "clamp", "sum", "mean", "copy"):
            self.assertIn(name, ops)
        self.assertEqual(ops["add"], 1)
        self.assertEqual(rt.Runtime.descriptor_bytes(), 128)

    def test_add_and_tickets(self):
        n = 1000
        a = [float(i) for i in range(n)]
        b = [0.5 * i for i in range(n)]
        pa, pb, pc = floats(self.r, a), floats(self.r, b), floats(self.r, [0.0] * n)
        t = self.r.submit([rt.task("add", rt.tensor(pc, "float32", [n]), rt.tensor(pa, "float32", [n]),
                                   rt.tensor(pb, "float32", [n]))])
        self.assertEqual(t, 1)
        self.r.wait(t)
        self.assertTrue(self.r.done(t))
        self.assertEqual(read(self.r, pc, n), [x + y for x, y in zip(a, b)])
        s = self.r.stats()
        self.assertEqual(s["submitted"], 1)
        self.assertEqual(s["lanes"], 3)

    def test_a_group_of_adds(self):
        n, e = 100, 8
        pa = floats(self.r, [float(i) for i in range(n * e)])
        pb = floats(self.r, [0.25 * i for i in range(n * e)])
        pc = floats(self.r, [0.0] * (n * e))
        template = rt.task("add", rt.tensor(0, "float32", [e]), rt.tensor(0, "float32", [e]),
                           rt.tensor(0, "float32", [e]))
        outs = [pc + 4 * e * i for i in range(n)]
        xs = [pa + 4 * e * i for i in range(n)]
        ys = [pb + 4 * e * i for i in range(n)]
        first, last = self.r.submit_group(template, outs, xs, ys)
        self.assertEqual((first, last), (1, 4))  # 32 items a descriptor
        for t in range(first, last + 1):
            self.r.wait(t)
        self.assertEqual(read(self.r, pc, n * e), [1.25 * i for i in range(n * e)])
        # items that depend on each other: x = x + y, ten times, one group
        first, last = self.r.submit_group(template, [pc] * 10, [pc] * 10, [pb] * 10)
        self.assertEqual(last - first + 1, 10)
        self.r.flush()
        self.assertEqual(read(self.r, pc, e), [1.25 * i + 2.5 * i for i in range(e)])
        # an empty group, and a bad item
        first, last = self.r.submit_group(template, [], [], [])
        self.assertGreater(first, last)
        before = self.r.stats()["submitted"]
        with self.assertRaises(rt.TesseraError) as cm:
            self.r.submit_group(template, outs[:5], xs[:3] + [0] + xs[4:5], ys[:5])
        self.assertIn("item 3 of the group", str(cm.exception))
        self.assertEqual(self.r.stats()["submitted"], before)
        with self.assertRaises(rt.TesseraError):
            self.r.submit_group(template, outs[:5], xs[:4], ys[:5])

    def test_a_chain_in_order_and_broadcast(self):
        # x (4x3) += row (1x3, broadcast) twenty times, then sigmoid
        x0 = [0.1 * i for i in range(12)]
        row = [1.0, -2.0, 0.25]
        px, prow = floats(self.r, x0), floats(self.r, row)
        X = rt.tensor(px, "float32", [4, 3])
        R = rt.tensor(prow, "float32", [1, 3])
        tasks = [rt.task("add", X, X, R) for _ in range(20)] + [rt.task("sigmoid", X, X)]
        self.r.submit(tasks)
        self.r.flush()
        got = read(self.r, px, 12)
        for i in range(12):
            want = 1 / (1 + math.exp(-(x0[i] + 20 * row[i % 3])))
            self.assertAlmostEqual(got[i], want, places=6)

    def test_reduction_and_scalars(self):
        x = [float(i) - 5 for i in range(12)]
        px, po = floats(self.r, x), floats(self.r, [0.0] * 4)
        self.r.submit([rt.task("mean", rt.tensor(po, "float32", [4]), rt.tensor(px, "float32", [4, 3]), dims=[-1])])
        self.r.flush()
        self.assertEqual(read(self.r, po, 4), [sum(x[3 * i:3 * i + 3]) / 3 for i in range(4)])
        pc = floats(self.r, [0.0] * 12)
        self.r.submit([rt.task("clamp", rt.tensor(pc, "float32", [12]), rt.tensor(px, "float32", [12]),
                               scalars=(-2, 3))])
        self.r.flush()
        self.assertEqual(read(self.r, pc, 12), [min(max(v, -2), 3) for v in x])

    def test_half_types(self):
        n = 8
        ph = self.r.alloc(2 * n)
        px = floats(self.r, [1.5 * i for i in range(n)])
        self.r.submit([rt.task("copy", rt.tensor(ph, "bfloat16", [n]), rt.tensor(px, "float32", [n]))])
        self.r.flush()
        raw = struct.unpack("%dH" % n, self.r.download(ph, 2 * n))
        back = [struct.unpack("f", struct.pack("I", h << 16))[0] for h in raw]
        self.assertEqual(back, [1.5 * i for i in range(n)])

    def test_errors_are_raised_and_change_nothing(self):
        pa = floats(self.r, [1.0] * 4)
        good = rt.task("relu", rt.tensor(pa, "float32", [4]), rt.tensor(pa, "float32", [4]))
        bad = rt.task("add", rt.tensor(pa, "float32", [4]), rt.tensor(pa, "float32", [4]),
                      rt.tensor(pa, "float32", [8]))
        with self.assertRaises(rt.TesseraError) as cm:
            self.r.submit([good, bad])
        self.assertEqual(cm.exception.code, "invalid_argument")
        self.assertIn("task 1 of the batch", str(cm.exception))
        self.assertEqual(self.r.stats()["submitted"], 0)
        with self.assertRaises(rt.TesseraError):
            self.r.wait(99)
        with self.assertRaises(rt.TesseraError):
            rt.task("no_such_op", rt.tensor(pa, "float32", [4]), rt.tensor(pa, "float32", [4]))
        with self.assertRaises(rt.TesseraError):
            rt.tensor(pa, "float64", [4])
        with self.assertRaises(rt.TesseraError):
            rt.tensor(pa, "float32", [1] * 9)
        with self.assertRaises(rt.TesseraError):
            rt.task("sum", rt.tensor(pa, "float32", [1]), rt.tensor(pa, "float32", [4]), dims=[3])
        with self.assertRaises(rt.TesseraError):
            rt.Runtime(backend="opencl")

    def test_jit_operator_and_hot_swap(self):
        n = 16
        a = [0.25 * i for i in range(n)]
        b = [1.0 - 0.5 * i for i in range(n)]
        pa, pb, pc = floats(self.r, a), floats(self.r, b), floats(self.r, [0.0] * n)
        op = self.r.register("A * B + 1")
        A, B, C = (rt.tensor(p, "float32", [n]) for p in (pa, pb, pc))
        self.r.submit([rt.task(op, C, A, B)])
        self.r.flush()
        self.assertEqual(read(self.r, pc, n), [x * y + 1 for x, y in zip(a, b)])
        self.r.replace(op, "A - B")
        self.r.submit([rt.task(op, C, A, B)])
        self.r.flush()
        self.assertEqual(read(self.r, pc, n), [x - y for x, y in zip(a, b)])
        with self.assertRaises(rt.TesseraError) as cm:
            self.r.register("A +* B")
        self.assertIn("column", str(cm.exception))

    def test_closed_runtime(self):
        self.r.close()
        with self.assertRaises(rt.TesseraError) as cm:
            self.r.flush()
        self.assertEqual(cm.exception.code, "failed_precondition")
        self.r.close()  # twice is fine


if __name__ == "__main__":
    unittest.main()
