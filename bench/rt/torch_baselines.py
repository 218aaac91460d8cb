#!/usr/bin/env python3
"""PyTorch baselines for the libtessera-rt benchmark (bench/rt): the same
workloads rt_bench runs, in eager PyTorch, as one CUDA graph, and (for
mixed) under torch.compile, in the same run on the same GPU.

    torch_baselines.py [--only adds,chain,mixed,reduce] [--reps N] [--dry]

Output, one line per measurement, `key=value` pairs separated by spaces.
The first line is
    device=<name, spaces as _> torch=<version> cuda=<version|none> reps=<N>
then, for example,
    workload=adds size=1024 impl=eager ops=10000 total_ms_median=71.200 total_ms_min=69.900 per_op_us=7.120
    workload=adds size=1024 impl=graph ops=10000 ... capture_s=0.812
    workload=adds size=1024 impl=compile ops=10000 total_ms_median=- total_ms_min=- per_op_us=- reason=not_meaningful
    workload=mixed size=2048 impl=compile iters=1000 ops=5000 ... per_iter_us=.. compile_s=..
    workload=reduce shape=8x256 dim=-1 op=sum impl=eager ops=1000 ...
Times are CUDA events around the whole timed region (all ops of one
repetition), synchronized before and after; median and min of --reps
repetitions (default 5) after warm-up runs. per_op_us (and per_iter_us) are
from the median. A graph's capture_s and mixed's compile_s are host seconds
spent capturing and instantiating, or compiling, and are not in the totals.

The workloads (rt_bench must do exactly the same; float32, every input from
torch.randn on the device, seed 0):
  adds    10,000 independent adds out[i] = x[i] + y[i], i = 0..9999, every
          x[i], y[i], out[i] a distinct preallocated tensor of N elements
          (rows of three [10000, N] tensors), N in 256, 1024, 4096, 16384;
          and as workload=adds_group, the same adds by torch._foreach_add
          over the lists of rows (eager and a graph of it; outputs
          allocated by the call), beside rt_bench's tsr_rt_submit_group.
  chain   one dependent chain of 10,000 ops on one 1024-element buffer x,
          in place, cycling (2,000 times) through
              x = x + y; x = x * h; x = relu(x); x = sigmoid(x); x = x - y
          y from randn, h = torch.full(0.5). x is reset from x0 (randn)
          before each repetition, outside the timed region.
  mixed   the seed's section 5.3 loop, 1,000 iterations on 2048 elements:
              x = a + b; y = x * c; z = relu(y); w = sigmoid(z); out = w / d
          5 ops (5 kernels in eager) an iteration, each allocating its
          result as the seed's code does; a, b, c from randn and
          d = 1 + |randn| so the divide stays well-conditioned. torch.compile
          (default mode) compiles one iteration, called 1,000 times.
  reduce  the seed's section 5.6 table: torch.sum over dim -1 (keepdim
          false) of shapes 8x256, 32x128, 64x512, 128x1024; 1,000 sums of
          one randn input per shape into 1,000 distinct preallocated
          outputs.
Every result is checked outside the timed region: eager (and compile)
against a CPU reference written apart from the timed code (float64 for
mixed and reduce), graph against eager or the reference; a mismatch is an
error.

--dry runs on the CPU with 10 ops per workload (mixed: 2 iterations), the
same sizes and shapes, no graph or compile, and prints impl=eager-cpu: it
proves the code paths and the checks run, not speed. Without --dry and
without a CUDA device it prints `SKIP: <reason>` and exits 77, as it does
without torch. Errors: one line on stderr, exit 1."""
import argparse
import functools
import gc
import statistics
import sys
import time

WORKLOADS = ("adds", "chain", "mixed", "reduce")

ADDS_OPS = 10000
ADDS_SIZES = (256, 1024, 4096, 16384)
CHAIN_OPS = 10000
CHAIN_SIZE = 1024
CHAIN_HALF = 0.5
MIXED_ITERS = 1000
MIXED_SIZE = 2048
MIXED_OPS_PER_ITER = 5
REDUCE_OPS = 1000
REDUCE_SHAPES = ((8, 256), (32, 128), (64, 512), (128, 1024))
REDUCE_DIM = -1

DRY_OPS = 10
DRY_MIXED_ITERS = 2
MAX_REPS = 1000
# Enough for cuBLAS/allocator/lazy-module set-up and clocks; a run is ~10^4 ops.
WARMUP_RUNS = 2
SEED = 0

torch = None  # imported in main(), after the arguments are known to be good


class UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    # argparse prints usage and exits 2; the bench scripts' contract is one line, exit 1.
    def error(self, message):
        raise UsageError(message)


def parse_args(argv):
    """Returns (workloads in canonical order, reps, dry); raises UsageError."""
    ap = _Parser(prog="torch_baselines.py", add_help=True)
    ap.add_argument("--only", default=",".join(WORKLOADS))
    ap.add_argument("--reps", default="5")
    ap.add_argument("--dry", action="store_true")
    a = ap.parse_args(argv)
    names = a.only.split(",")
    for n in names:
        if n not in WORKLOADS:
            raise UsageError(f"--only: unknown workload '{n}' (choose from {','.join(WORKLOADS)})")
    try:
        reps = int(a.reps, 10)
    except ValueError:
        raise UsageError(f"--reps: '{a.reps}' is not an integer") from None
    if reps < 1 or reps > MAX_REPS:
        raise UsageError(f"--reps: {reps} is out of range 1..{MAX_REPS}")
    return [w for w in WORKLOADS if w in names], reps, a.dry


# ---- output -----------------------------------------------------------------


def _fmt(v):
    if isinstance(v, float):
        return f"{v:.3f}"
    s = str(v)
    # A value with a space or '=' would break the key=value parse downstream.
    return s.replace(" ", "_").replace("=", "_")


def format_line(pairs):
    return " ".join(f"{k}={_fmt(v)}" for k, v in pairs)


def emit(pairs):
    print(format_line(pairs), flush=True)


def timing_pairs(times_ms, ops, iters=None):
    """The total/per-op part of a measurement line from per-repetition totals."""
    med = statistics.median(times_ms)
    pairs = []
    if iters is not None:
        pairs.append(("iters", iters))
    pairs += [("ops", ops), ("total_ms_median", med), ("total_ms_min", min(times_ms)),
              ("per_op_us", med * 1000.0 / ops)]
    if iters is not None:
        pairs.append(("per_iter_us", med * 1000.0 / iters))
    return pairs


def absent_pairs(ops, reason, iters=None, extra=()):
    pairs = []
    if iters is not None:
        pairs.append(("iters", iters))
    pairs += [("ops", ops), ("total_ms_median", "-"), ("total_ms_min", "-"), ("per_op_us", "-")]
    if iters is not None:
        pairs.append(("per_iter_us", "-"))
    return pairs + list(extra) + [("reason", reason)]


# ---- timing -----------------------------------------------------------------


class Bench:
    """Device, timer and impl name for one mode (CUDA, or --dry on the CPU)."""

    def __init__(self, reps, dry):
        self.reps = reps
        self.dry = dry
        self.device = "cpu" if dry else "cuda"
        self.eager = "eager-cpu" if dry else "eager"
        self.gen = torch.Generator(device=self.device)
        self.gen.manual_seed(SEED)

    def randn(self, *shape):
        return torch.randn(*shape, device=self.device, dtype=torch.float32, generator=self.gen)

    def sync(self):
        if not self.dry:
            torch.cuda.synchronize()

    def measure(self, run, reset=None, warmup=WARMUP_RUNS):
        """Total ms of run() for each repetition; reset() goes before each
        run, warm-up included, outside the timed region."""
        for _ in range(warmup):
            if reset is not None:
                reset()
            run()
        self.sync()
        times = []
        # A collection in the middle of 10^4 launches is noise, not PyTorch's cost.
        gc.collect()
        gc.disable()
        try:
            for _ in range(self.reps):
                if reset is not None:
                    reset()
                times.append(self._time_once(run))
        finally:
            gc.enable()
        return times

    def _time_once(self, run):
        if self.dry:
            t0 = time.perf_counter()
            run()
            return (time.perf_counter() - t0) * 1000.0
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        run()
        end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end)

    def capture(self, run):
        """run() captured into a CUDA graph: (graph, capture_s, what run returned
        during capture, whose storage the graph's replays write)."""
        # Lazy initialisation (kernel modules, workspaces) must not happen
        # inside the capture; PyTorch's recipe warms up on a side stream.
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            run()
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        t0 = time.perf_counter()
        with torch.cuda.graph(g):
            static = run()
        torch.cuda.synchronize()
        return g, time.perf_counter() - t0, static


def check(ok, what):
    if not ok:
        raise RuntimeError(f"check failed: {what}")


def _free():
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


# ---- workloads --------------------------------------------------------------


def bench_adds(b):
    for n in ADDS_SIZES:
        _adds_one(b, n, DRY_OPS if b.dry else ADDS_OPS)
        _free()  # 2 GB at 16384: give it back before the next size


def _adds_one(b, n, ops):
    head = [("workload", "adds"), ("size", n)]
    x = b.randn(ops, n)
    y = b.randn(ops, n)
    out = torch.empty(ops, n, device=b.device)
    # Views made once: indexing inside the loop would add host time per op.
    triples = list(zip(x.unbind(0), y.unbind(0), out.unbind(0)))
    ref = x + y

    def run():
        for xi, yi, oi in triples:
            torch.add(xi, yi, out=oi)

    times = b.measure(run)
    check(torch.equal(out, ref), f"adds size={n} eager != x + y")
    emit(head + [("impl", b.eager)] + timing_pairs(times, ops))
    if b.dry:
        _adds_foreach(b, n, ops, x, y, ref)
        return
    g, capture_s, _ = b.capture(run)
    out.fill_(float("nan"))
    times = b.measure(g.replay)
    check(torch.equal(out, ref), f"adds size={n} graph != x + y")
    emit(head + [("impl", "graph")] + timing_pairs(times, ops) + [("capture_s", capture_s)])
    # The ops are already one kernel each: compile has nothing to fuse.
    emit(head + [("impl", "compile")] + absent_pairs(ops, "not_meaningful"))
    _adds_foreach(b, n, ops, x, y, ref)


def _adds_foreach(b, n, ops, x, y, ref):
    """The same adds as PyTorch's own batched form, torch._foreach_add over
    the lists of rows (what rt_bench's adds_group submits as one group):
    eager, and a CUDA graph of it. Its outputs are allocated by the call,
    as foreach does."""
    head = [("workload", "adds_group"), ("size", n)]
    xs, ys = list(x.unbind(0)), list(y.unbind(0))

    def run():
        return torch._foreach_add(xs, ys)

    times = b.measure(run)
    check(all(torch.equal(o, r) for o, r in zip(run(), ref.unbind(0))), f"adds_group size={n} foreach != x + y")
    emit(head + [("impl", b.eager)] + timing_pairs(times, ops) + [("api", "torch._foreach_add")])
    if b.dry:
        return
    g, capture_s, static = b.capture(run)
    for o in static:
        o.fill_(float("nan"))
    times = b.measure(g.replay)
    check(all(torch.equal(o, r) for o, r in zip(static, ref.unbind(0))), f"adds_group size={n} graph != x + y")
    emit(head + [("impl", "graph")] + timing_pairs(times, ops) + [("capture_s", capture_s), ("api", "torch._foreach_add")])


def chain_reference(x0, y, h, ops):
    """The chain in its plain form, on the CPU: what the in-place loop must equal."""
    x, y, h = x0.cpu(), y.cpu(), h.cpu()
    for i in range(ops):
        k = i % 5
        if k == 0:
            x = x + y
        elif k == 1:
            x = x * h
        elif k == 2:
            x = torch.relu(x)
        elif k == 3:
            x = torch.sigmoid(x)
        else:
            x = x - y
    return x


def bench_chain(b):
    ops = DRY_OPS if b.dry else CHAIN_OPS
    n = CHAIN_SIZE
    head = [("workload", "chain"), ("size", n)]
    x0 = b.randn(n)
    y = b.randn(n)
    h = torch.full((n,), CHAIN_HALF, device=b.device, dtype=torch.float32)
    x = x0.clone()
    # In place on one buffer: each op still waits on the one before, and no
    # allocator call is charged to PyTorch. Bound methods keep the loop to
    # one C call per op.
    cycle = (functools.partial(x.add_, y), functools.partial(x.mul_, h), x.relu_, x.sigmoid_,
             functools.partial(x.sub_, y))
    seq = [cycle[i % len(cycle)] for i in range(ops)]

    def run():
        for f in seq:
            f()

    def reset():
        x.copy_(x0)

    ref = chain_reference(x0, y, h, ops)
    times = b.measure(run, reset)
    got = x.cpu()
    check(bool(torch.isfinite(got).all()), "chain eager result not finite")
    check(torch.allclose(got, ref, rtol=1e-4, atol=1e-5), "chain eager != CPU reference")
    emit(head + [("impl", b.eager)] + timing_pairs(times, ops))
    if not b.dry:
        eager = x.clone()
        reset()
        g, capture_s, _ = b.capture(run)
        times = b.measure(g.replay, reset)
        check(torch.allclose(x, eager, rtol=1e-6, atol=1e-6), "chain graph != eager")
        emit(head + [("impl", "graph")] + timing_pairs(times, ops) + [("capture_s", capture_s)])
        # Compiling a 10,000-op chain fuses it into one kernel: another workload.
        emit(head + [("impl", "compile")] + absent_pairs(ops, "not_meaningful"))


def mixed_step(a, b_, c, d):
    """One iteration of the seed's section 5.3 loop."""
    x = a + b_
    y = x * c
    z = torch.relu(y)
    w = torch.sigmoid(z)
    return w / d


def mixed_reference(a, b_, c, d):
    """One iteration in float64 on the CPU, written apart from mixed_step so
    that a wrong step cannot agree with itself."""
    a, b_, c, d = (t.cpu().double() for t in (a, b_, c, d))
    y = (a + b_) * c
    w = 1.0 / (1.0 + torch.exp(-y.clamp(min=0.0)))
    return (w / d).float()


def bench_mixed(b):
    iters = DRY_MIXED_ITERS if b.dry else MIXED_ITERS
    ops = iters * MIXED_OPS_PER_ITER
    n = MIXED_SIZE
    head = [("workload", "mixed"), ("size", n)]
    a, bb, c = b.randn(n), b.randn(n), b.randn(n)
    d = b.randn(n).abs_().add_(1.0)
    ref = mixed_reference(a, bb, c, d)

    def loop(step):
        def run():
            out = None
            for _ in range(iters):
                out = step(a, bb, c, d)
            return out
        return run

    run = loop(mixed_step)
    times = b.measure(run)
    eager = run()
    check(torch.allclose(eager.cpu(), ref, rtol=1e-5, atol=1e-6),
          "mixed eager != float64 reference")
    emit(head + [("impl", b.eager)] + timing_pairs(times, ops, iters))
    if b.dry:
        return
    if not hasattr(torch, "compile"):
        emit(head + [("impl", "compile")]
             + absent_pairs(ops, "no_torch_compile", iters, [("compile_s", "-")]))
    else:
        compiled = torch.compile(mixed_step)
        t0 = time.perf_counter()
        first = compiled(a, bb, c, d)
        b.sync()
        compile_s = time.perf_counter() - t0
        crun = loop(compiled)
        times = b.measure(crun)
        # Triton's sigmoid and divide may differ from ATen's by an ulp or two.
        check(torch.allclose(first, eager, rtol=1e-4, atol=1e-6), "mixed compile != eager")
        check(torch.allclose(crun(), eager, rtol=1e-4, atol=1e-6), "mixed compile != eager")
        emit(head + [("impl", "compile")] + timing_pairs(times, ops, iters)
             + [("compile_s", compile_s)])
        del compiled, first
    g, capture_s, static = b.capture(run)
    static.fill_(float("nan"))
    times = b.measure(g.replay)
    check(torch.allclose(static, eager, rtol=1e-6, atol=1e-6), "mixed graph != eager")
    emit(head + [("impl", "graph")] + timing_pairs(times, ops, iters) + [("capture_s", capture_s)])


def bench_reduce(b):
    for rows, cols in REDUCE_SHAPES:
        _reduce_one(b, rows, cols, DRY_OPS if b.dry else REDUCE_OPS)
        _free()


def _reduce_one(b, rows, cols, ops):
    head = [("workload", "reduce"), ("shape", f"{rows}x{cols}"), ("dim", REDUCE_DIM),
            ("op", "sum")]
    x = b.randn(rows, cols)
    out = torch.empty(ops, rows, device=b.device)
    outs = out.unbind(0)
    want = x.cpu().double().sum(dim=REDUCE_DIM).float().expand(ops, rows)

    def run():
        for o in outs:
            torch.sum(x, dim=REDUCE_DIM, out=o)

    times = b.measure(run)
    check(torch.allclose(out.cpu(), want, rtol=1e-5, atol=1e-4),
          f"reduce {rows}x{cols} eager != float64 reference")
    emit(head + [("impl", b.eager)] + timing_pairs(times, ops))
    if b.dry:
        _adds_foreach(b, n, ops, x, y, ref)
        return
    g, capture_s, _ = b.capture(run)
    out.fill_(float("nan"))
    times = b.measure(g.replay)
    check(torch.allclose(out.cpu(), want, rtol=1e-5, atol=1e-4),
          f"reduce {rows}x{cols} graph != float64 reference")
    emit(head + [("impl", "graph")] + timing_pairs(times, ops) + [("capture_s", capture_s)])
    emit(head + [("impl", "compile")] + absent_pairs(ops, "not_meaningful"))


BENCHES = {"adds": bench_adds, "chain": bench_chain, "mixed": bench_mixed, "reduce": bench_reduce}


def header_pairs(dry, reps):
    name = "cpu" if dry else torch.cuda.get_device_name(0)
    return [("device", name), ("torch", torch.__version__), ("cuda", torch.version.cuda or "none"),
            ("reps", reps)]


def _one_line(e):
    lines = str(e).strip().splitlines()
    return f"{type(e).__name__}: {lines[0] if lines else ''}"


def main(argv):
    global torch
    try:
        workloads, reps, dry = parse_args(argv)
    except UsageError as e:
        print(f"torch_baselines: {e}", file=sys.stderr)
        return 1
    try:
        import torch as _torch
    except ImportError as e:
        print(f"SKIP: torch is not importable ({_one_line(e)})", flush=True)
        return 77
    torch = _torch
    if not dry and not torch.cuda.is_available():
        print("SKIP: torch.cuda.is_available() is false (no CUDA device); --dry runs on the CPU",
              flush=True)
        return 77
    try:
        b = Bench(reps, dry)
        emit(header_pairs(dry, reps))
        for w in workloads:
            BENCHES[w](b)
            _free()
    except Exception as e:  # noqa: BLE001 - the contract is one line and exit 1
        print(f"torch_baselines: {_one_line(e)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
