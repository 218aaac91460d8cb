"""tessera.torch's python engine over CPU tensors and libtessera-rt's CPU backend (the test
double without a GPU): unchanged PyTorch code gives eager's results, every
kind of dependency flushes, what the front cannot reproduce runs eagerly.
Skipped without PyTorch (say so with TESSERA_TORCH_REQUIRED=1 to fail)."""
import os
import random
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

try:
    import torch
    import torch.nn.functional as F
except ImportError:  # pragma: no cover - the skip below says why
    torch = None

if torch is not None:
    import tessera.torch as tt
    from tessera import rt

BACKEND = os.environ.get("TESSERA_TORCH_BACKEND", "cpu")
DEVICE = "cuda" if BACKEND == "cuda" else "cpu"


def setUpModule():
    if torch is None:
        if os.environ.get("TESSERA_TORCH_REQUIRED"):
            raise RuntimeError("PyTorch is required (TESSERA_TORCH_REQUIRED) and not importable")
        raise unittest.SkipTest("PyTorch is not importable by %s" % sys.executable)
    if BACKEND == "cuda" and not torch.cuda.is_available():
        raise unittest.SkipTest("no CUDA device for TESSERA_TORCH_BACKEND=cuda")
    try:
        tt.runtime(BACKEND)
    except rt.TesseraError as e:
        if os.environ.get("TESSERA_RT_REQUIRED"):
            raise
        raise unittest.SkipTest("libtessera-rt not available: %s" % e)


def ctx(**kw):
    """A scheduler of the python engine (test_torch_native.py tests the
    native one); no auto flush unless asked (the tests that count tasks
    must not depend on how fast the machine is)."""
    kw.setdefault("backend", BACKEND)
    kw.setdefault("engine", "python")
    kw.setdefault("auto_flush_ms", 1e6)
    return tt.scheduler_context(**kw)


def tol(dtype):
    return {torch.float32: (2e-5, 2e-5), torch.float16: (2e-2, 2e-2), torch.bfloat16: (5e-2, 5e-2)}[dtype]


def close(test, got, want, msg=""):
    test.assertEqual(got.shape, want.shape, msg)
    test.assertEqual(got.dtype, want.dtype, msg)
    rtol, atol = tol(want.dtype)
    g, w = got.double(), want.double()
    same_nan = torch.isnan(g) == torch.isnan(w)
    test.assertTrue(bool(same_nan.all()), "%s: NaN where eager has none (or none where it has)" % msg)
    ok = torch.isclose(g, w, rtol=rtol, atol=atol, equal_nan=True)
    if not bool(ok.all()):
        i = int((~ok).nonzero()[0][0]) if ok.dim() == 1 else None
        test.fail("%s: max diff %g (%s)" % (msg, float((g - w).abs().nan_to_num().max()), i))


def mixed(a, b, c, d):
    x = a + b
    y = x * c
    z = torch.relu(y)
    w = torch.sigmoid(z)
    return w / d


class Seed(unittest.TestCase):
    def setUp(self):
        torch.manual_seed(1)

    def test_the_mixed_workload_fuses_and_equals_eager(self):
        a, b, c = (torch.randn(2048, device=DEVICE) for _ in range(3))
        d = torch.randn(2048, device=DEVICE).abs() + 1
        want = [mixed(a, b, c, d) for _ in range(3)]
        with ctx() as s:
            got = [mixed(a, b, c, d) for _ in range(3)]
        for g, w in zip(got, want):
            close(self, g, w, "mixed")
        self.assertEqual(s.stats["scheduled"], 15)
        self.assertEqual(s.stats["tasks"], 3)
        self.assertEqual(s.stats["fused_tasks"], 3)

    def test_the_seeds_example_a2(self):
        a, b, c = (torch.randn(1024, device=DEVICE) for _ in range(3))
        with torch.no_grad():
            with ctx(size_threshold=16384, auto_flush_ms=2.0) as s:
                for _ in range(1000):
                    x = a + b
                    y = x * c
                    z = torch.relu(y)
                    out = torch.sigmoid(z)
        self.assertEqual(tuple(out.shape), (1024,))
        close(self, out, torch.sigmoid(torch.relu((a + b) * c)), "out")
        close(self, z, torch.relu((a + b) * c), "z")
        self.assertEqual(s.stats["scheduled"], 4000)
        self.assertEqual(s.stats["eager"], 0)

    def test_a_held_intermediate_is_written_too(self):
        a, b = torch.randn(64, device=DEVICE), torch.randn(64, device=DEVICE)
        with ctx() as s:
            x = a * b
            y = torch.tanh(x) + 1
        close(self, x, a * b, "x")
        close(self, y, torch.tanh(a * b) + 1, "y")
        self.assertEqual(s.stats["tasks"], 2)

    def test_a_half_chain_rounds_after_every_operation_as_eager(self):
        """float16 and bfloat16 operations are not fused: each rounds its
        result where PyTorch's operator does, so a chain that rounding
        once at its end would change equals eager's exactly."""
        def chain(x, y, z):
            for _ in range(12):
                x = x * y + z  # tensors only: PyTorch's CPU kernels round a Python scalar to the half type first
            return x
        for dtype in (torch.bfloat16, torch.float16):
            x = torch.randn(512, device=DEVICE).to(dtype)
            y = (1 + 0.05 * torch.randn(512, device=DEVICE)).to(dtype)
            z = (0.01 * torch.randn(512, device=DEVICE)).to(dtype)
            want = chain(x, y, z)
            once = chain(x.float(), y.float(), z.float()).to(dtype)  # what one fused expression would give
            self.assertFalse(torch.equal(once, want), "the chain must tell the two roundings apart")
            with ctx() as s:
                got = chain(x, y, z)
            self.assertTrue(torch.equal(got, want), "%s: max diff %g" % (dtype, float((got.float() - want.float()).abs().max())))
            self.assertEqual(s.stats["fused_tasks"], 0)
            self.assertEqual(s.stats["tasks"], 24)

    def test_reductions_over_axis_sets(self):
        x = torch.randn(3, 4, 5, device=DEVICE)
        for dims in ([0], [1], [2], [0, 2], [-1], [0, 1, 2]):
            for keep in (False, True):
                for fn in (torch.sum, torch.mean):
                    with ctx() as s:
                        got = fn(x * 2, dim=dims, keepdim=keep)
                    close(self, got, fn(x * 2, dim=dims, keepdim=keep), "%s %s %s" % (fn.__name__, dims, keep))
                    self.assertEqual(s.stats["eager"], 0)
        o = torch.empty(3, 5, device=DEVICE)
        m = torch.empty(3, 1, 5, device=DEVICE)
        with ctx() as s:
            torch.sum(x * 2, dim=1, out=o)
            torch.mean(x, dim=[1], keepdim=True, out=m)
        close(self, o, (x * 2).sum(1), "sum into out=")
        close(self, m, x.mean(1, keepdim=True), "mean into out=")
        self.assertEqual(s.stats["eager"], 0)
        with ctx():
            total, avg = x.sum(), x.mean()
        close(self, total, x.sum(), "sum of all")
        close(self, avg, x.mean(), "mean of all")

    def test_in_place_and_out(self):
        x0, y = torch.randn(1024, device=DEVICE), torch.randn(1024, device=DEVICE)
        h = torch.full((1024,), 0.5, device=DEVICE)
        want = x0.clone()
        for _ in range(40):
            want.add_(y).mul_(h).relu_()
            want = torch.sigmoid(want) - y
        x = x0.clone()
        with ctx() as s:
            for _ in range(40):
                x.add_(y)
                x.mul_(h)
                x.relu_()
                torch.sigmoid(x, out=x)
                torch.sub(x, y, out=x)
        close(self, x, want, "chain")
        self.assertEqual(s.stats["eager"], 0)
        self.assertEqual(s.stats["scheduled"], 200)


class JitOperators(unittest.TestCase):
    def test_past_the_kept_operators_the_least_recent_is_replaced(self):
        r = tt.runtime(BACKEND)
        a, b = torch.randn(32, device=DEVICE), torch.randn(32, device=DEVICE)
        n = tt._JIT_PER_ARITY + 5
        with ctx() as s:
            ys = [torch.sigmoid(a * (k + 2.0)) + b for k in range(n)]  # n expressions of arity 2
        for k, y in enumerate(ys):
            close(self, y, torch.sigmoid(a * (k + 2.0)) + b, "expression %d" % k)
        self.assertEqual(s.stats["fused_tasks"], n)
        self.assertLessEqual(len(r.jit_lru[2]), tt._JIT_PER_ARITY)
        codes = set(r.jit_lru[2])
        self.assertEqual(len(codes), len(r.jit_lru[2]))
        # the latest are the ones kept
        self.assertIn("add(sigmoid(mul(A, %s)), B)" % fusion_const(n + 1.0), r.jit)


def fusion_const(c):
    from tessera import fusion
    return fusion.const_text(c)


class Inflight(unittest.TestCase):
    def test_a_batch_is_forgotten_only_when_every_task_finished(self):
        class Done:  # tickets finish out of order across lanes
            finished = {3}

            def done(self, t):
                return t in self.finished
        s = ctx()
        s.rt = Done()
        s._inflight = [[1, 3, ["x"]], [4, 4, ["y"]]]
        s._prune()
        self.assertEqual(len(s._inflight), 2)  # ticket 3 done, 1 and 2 not
        Done.finished = {1, 3, 4}
        s._prune()
        self.assertEqual(s._inflight[0][:2], [2, 3])
        Done.finished = {1, 2, 3, 4}
        s._prune()
        self.assertEqual(s._inflight, [])


class Dependencies(unittest.TestCase):
    """An operation outside the scheduler that touches pending work sees it
    finished; each of these fails if the front does not flush."""

    def setUp(self):
        torch.manual_seed(2)
        self.a = torch.randn(256, device=DEVICE)
        self.b = torch.randn(256, device=DEVICE)

    def test_item(self):
        with ctx(auto_flush_ms=1e6) as s:
            v = (self.a * self.b).sum().item()
            self.assertEqual(s.stats["waits"], 1)
        self.assertAlmostEqual(v, float((self.a * self.b).sum()), places=3)

    def test_a_torch_op_reading_a_result(self):
        with ctx(auto_flush_ms=1e6):
            x = torch.exp(self.a)
            m = torch.matmul(x.view(16, 16), x.view(16, 16))
        e = torch.exp(self.a).view(16, 16)
        close(self, m, e @ e, "matmul")

    def test_printing(self):
        with ctx(auto_flush_ms=1e6):
            x = self.a + 100
            text = str(x)
        self.assertIn("%.4f" % float(self.a[0] + 100), text)

    def test_printing_with_dispatch_modes_off(self):
        # PyTorch 2 prints below the dispatch modes: the mode sees nothing
        from torch.utils._mode_utils import no_dispatch
        with ctx(auto_flush_ms=1e6) as s:
            x = self.a - 100
            with no_dispatch():
                text = repr(x)
            self.assertEqual(s.stats["waits"], 1)
        self.assertIn("%.4f" % float(self.a[0] - 100), text)

    def test_a_view_then_an_in_place_write_through_it(self):
        with ctx(auto_flush_ms=1e6):
            x = self.a * 2
            v = x[:10]
            v.add_(1)           # scheduled, through a view of a result
            total = x.sum()
            first = x[0].item()
        want = self.a * 2
        want[:10] += 1
        close(self, total, want.sum(), "sum")
        self.assertAlmostEqual(first, float(want[0]), places=5)

    def test_an_eager_write_after_a_pending_read(self):
        a = self.a.clone()
        with ctx(auto_flush_ms=1e6):
            x = torch.sigmoid(a)
            a.copy_(self.b)     # outside: must wait until x has read a
            y = a + 0
        close(self, x, torch.sigmoid(self.a), "x read a before the copy")
        close(self, y, self.b, "y reads a after")

    def test_a_scheduled_write_after_a_fused_read(self):
        a = self.a.clone()
        with ctx(auto_flush_ms=1e6):
            t = a * 3           # dropped below: would be fused into y
            a.add_(1)           # scheduled write of what t reads
            y = t + 0
            del t
        close(self, y, self.a * 3, "t read a before the write")
        close(self, a, self.a + 1, "a")

    def test_autograd(self):
        a = self.a.clone().requires_grad_(True)
        with ctx(auto_flush_ms=1e6):
            y = (torch.sigmoid(a * self.b) * 2).sum()
            y.backward()
        ref = self.a.clone().requires_grad_(True)
        (torch.sigmoid(ref * self.b) * 2).sum().backward()
        close(self, a.grad, ref.grad, "grad")
        close(self, y.detach(), (torch.sigmoid(self.a * self.b) * 2).sum(), "y")

    def test_leaving_the_context_finishes_everything(self):
        with ctx(auto_flush_ms=1e6) as s:
            x = torch.relu(self.a - 0.1)
            self.assertEqual(s.stats["tasks"], 0)  # still pending in the context
        self.assertEqual(s.stats["waits"], 1)
        close(self, x, torch.relu(self.a - 0.1), "x")

    def test_auto_flush_submits_old_work(self):
        with ctx(auto_flush_ms=0) as s:
            x = self.a + 1
            y = x * 2
            self.assertGreaterEqual(s.stats["submits"], 1)
            self.assertEqual(s.stats["waits"], 0)
        close(self, y, (self.a + 1) * 2, "y")


class Eager(unittest.TestCase):
    """What the front does not reproduce exactly runs eagerly, right."""

    def test_fallbacks(self):
        a = torch.randn(64, device=DEVICE)
        b = torch.randn(64, device=DEVICE)
        i = torch.arange(64, device=DEVICE)
        big = torch.randn(5000, device=DEVICE)
        cases = [
            ("alpha", lambda: torch.add(a, b, alpha=2)),
            ("int tensors", lambda: i + i),
            ("int and float", lambda: i * a),
            ("gelu tanh", lambda: F.gelu(a, approximate="tanh")),
            ("softplus beta", lambda: F.softplus(a, beta=2)),
            ("over the threshold", lambda: big * 2),
            ("div rounding", lambda: torch.div(a, b, rounding_mode="floor")),
            ("float64", lambda: a.double() * 2),
            ("inf constant", lambda: torch.clamp(a, max=float("inf"))),
        ]
        for name, f in cases:
            want = f()
            with ctx(size_threshold=4096) as s:
                got = f()
            self.assertEqual(got.dtype, want.dtype, name)
            self.assertTrue(bool(torch.equal(got, want)) or bool(torch.allclose(got.double(), want.double())), name)
            self.assertEqual(s.stats["tasks"], 0, name)

    def test_an_operator_that_does_not_compile_is_computed_by_pytorch(self):
        a, b, c = (torch.randn(128, device=DEVICE) for _ in range(3))
        r = tt.runtime(BACKEND)
        saved = dict(r.jit)

        def fail(text):
            raise rt.TesseraError("invalid_argument", "refused for the test: " + text)
        saved_lru = {k: v.copy() for k, v in r.jit_lru.items()}
        r.jit.clear()
        r.jit_lru.clear()
        r.register = fail
        try:
            with ctx() as s:
                y = (a - b) * 2 + torch.sigmoid(c)
                z = torch.relu(y)   # a builtin after it, reading it
        finally:
            del r.register
            r.jit.clear()
            r.jit.update(saved)
            r.jit_lru.clear()
            r.jit_lru.update(saved_lru)
        close(self, y, (a - b) * 2 + torch.sigmoid(c), "y")
        close(self, z, torch.relu((a - b) * 2 + torch.sigmoid(c)), "z")
        self.assertEqual(s.stats["eager_steps"], 1)
        self.assertEqual(s.stats["tasks"], 1)

    def test_bad_arguments(self):
        for kw in (dict(backend="tpu"), dict(size_threshold=0), dict(auto_flush_ms=-1)):
            with self.assertRaises(ValueError):
                tt.scheduler_context(**kw)


# ---- the differential test: random programs against eager ----------------------

if torch is not None:
    UNARY = [torch.relu, torch.sigmoid, torch.tanh, torch.exp, torch.abs, torch.sin, torch.cos, torch.neg,
             F.gelu, F.hardsigmoid, F.hardswish, F.softplus, lambda x: F.leaky_relu(x, 0.1),
             lambda x: F.hardtanh(x, -0.5, 0.7), lambda x: F.elu(x, 0.8), lambda x: torch.clamp(x, -1.5, 1.0),
             lambda x: torch.clamp_min(x, -0.2), lambda x: torch.clamp_max(x, 0.3),
             lambda x: torch.sqrt(x.abs() + 0.5), lambda x: torch.log(x.abs() + 1.0), lambda x: x ** 2]
    BINARY = [torch.add, torch.sub, torch.mul, lambda x, y: x / (y.abs() + 0.5), torch.maximum, torch.minimum,
              lambda x, y: torch.pow(x.abs() + 0.1, y.clamp(-2, 2))]

SHAPES = [(7,), (4, 5), (3, 1, 6), (2, 3, 4)]


def operand(rng, shape, dtype):
    """A random tensor of `shape` (or broadcastable to it), sometimes
    non-contiguous (transposed or sliced)."""
    kind = rng.randrange(4)
    if kind == 0 and len(shape) >= 2:
        t = torch.randn(tuple(reversed(shape)), device=DEVICE).to(dtype).transpose(0, len(shape) - 1)
        if tuple(t.shape) != tuple(shape):
            t = torch.randn(shape, device=DEVICE).to(dtype)
        return t
    if kind == 1:
        b = list(shape)
        b[rng.randrange(len(b))] = 1
        return torch.randn(b, device=DEVICE).to(dtype)
    if kind == 2:
        big = torch.randn((shape[0] * 2,) + tuple(shape[1:]), device=DEVICE).to(dtype)
        return big[::2]
    return torch.randn(shape, device=DEVICE).to(dtype)


def program(seed, ops=8):
    """A random program: returns f(inputs) -> list of tensors it keeps."""
    rng = random.Random(seed)
    shape = rng.choice(SHAPES)
    dtype = rng.choice([torch.float32, torch.float32, torch.float16, torch.bfloat16])
    g = torch.Generator(device="cpu").manual_seed(seed)
    torch.manual_seed(seed)
    inputs = [operand(rng, shape, dtype) for _ in range(4)]
    plan = []
    for k in range(ops):
        r = rng.random()
        if r < 0.4:
            plan.append(("u", rng.randrange(len(UNARY)), rng.randrange(4 + k)))
        elif r < 0.75:
            plan.append(("b", rng.randrange(len(BINARY)), rng.randrange(4 + k), rng.randrange(4 + k)))
        elif r < 0.85:
            plan.append(("s", rng.choice([0.5, -2.0, 3.0]), rng.randrange(4 + k)))
        elif r < 0.93:
            plan.append(("inplace", rng.randrange(4 + k), rng.randrange(4 + k)))
        else:
            plan.append(("reduce", rng.randrange(4 + k), rng.random() < 0.5))
    keep = set(rng.sample(range(4, 4 + ops), k=min(2, ops)))
    del g

    def run(xs):
        vals = [x.clone() for x in xs]
        kept = []
        for k, step in enumerate(plan):
            if step[0] == "u":
                v = UNARY[step[1]](vals[step[2]])
            elif step[0] == "b":
                v = BINARY[step[1]](vals[step[2]], vals[step[3]])
            elif step[0] == "s":
                v = vals[step[2]] * step[1] + step[1]
            elif step[0] == "inplace":
                dst, src = vals[step[1]], vals[step[2]]
                if torch.broadcast_shapes(dst.shape, src.shape) == dst.shape and dst.dtype == torch.result_type(dst, src) \
                        and (dst.is_contiguous() or dst.data_ptr() != src.data_ptr()):
                    dst.mul_(0.5).add_(src)
                v = dst
            else:
                v = vals[step[1]].sum(-1, keepdim=step[2])
            vals.append(v)
            if 4 + k in keep or k == len(plan) - 1:
                kept.append(v)
        return kept + vals[:4]
    return inputs, run


class Differential(unittest.TestCase):
    def test_random_programs_equal_eager(self):
        n = int(os.environ.get("TESSERA_TORCH_PROGRAMS", "400"))
        fused = ran = 0
        for seed in range(n):
            inputs, run = program(seed)
            try:
                want = run(inputs)
            except RuntimeError:
                continue  # eager has no kernel for it (PyTorch 1.13's CPU halves): nothing to compare
            ran += 1
            with ctx(auto_flush_ms=1e6) as s:
                got = run(inputs)
            fused += s.stats["fused_tasks"]
            self.assertEqual(len(got), len(want))
            for k, (g, w) in enumerate(zip(got, want)):
                close(self, g, w, "program %d, result %d" % (seed, k))
        self.assertGreater(ran, n // 2)
        self.assertGreater(fused, ran // 4)  # the programs exercise fusion


if __name__ == "__main__":
    unittest.main()
