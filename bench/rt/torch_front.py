#!/usr/bin/env python3
"""The PyTorch front of libtessera-rt (tessera.torch) beside
eager PyTorch, in the same process on the same GPU: the workloads of
torch_baselines.py (same sizes, same PyTorch code), run plainly and inside
tessera.torch.scheduler_context.

    torch_front.py [--reps N] [--only adds,chain,mixed,reduce] [--backend cuda|cpu] [--engines native,python]

One line per measurement, `key=value` pairs, e.g.
    workload=adds size=1024 impl=eager ops=10000 total_ms_median=.. total_ms_min=.. per_op_us=..
    workload=adds size=1024 impl=front-native ops=10000 ... scheduled=.. tasks=.. eager=.. waits=..
(impl=front-ENGINE for each engine of --engines; the native one needs
libtessera-torch.so: python/csrc).
Time is host wall time from the first op to the end of the work: eager
synchronizes the device at the end; the front leaves its context (which
submits what is pending and waits). Median and min of --reps repetitions
after 2 warm-ups (the front's first warm-up compiles its JIT operators;
the times are with them compiled, as in a program's steady state). Every
result of the front is checked against eager's.

Workloads (float32, inputs from torch.randn, seed 0):
  adds        torch.add(x[i], y[i], out=out[i]) for 10,000 rows of N
              (256, 1024, 4096, 16384), as torch_baselines.py;
  chain       10,000 in-place ops on one 1024 buffer, cycling add_, mul_,
              relu_, sigmoid_, sub_, as torch_baselines.py;
  mixed       the seed's loop x = a + b; y = x * c; z = relu(y);
              w = sigmoid(z); out = w / d on 2048, 1,000 iterations, every
              iteration's `out` kept in a list (so the front computes all
              of them: its fusion drops only the unread intermediates);
  mixed_last  the same loop as torch_baselines.py writes it, keeping only
              the last `out`: the front computes only that one (the other
              iterations' results are never read), eager all of them;
  reduce      torch.sum(x, dim=-1, out=out[i]), 1,000 times, the seed's
              shapes 8x256, 32x128, 64x512, 128x1024.
--backend cpu runs the same on CPU tensors and the runtime's CPU backend
(the test double): it shows the paths run, not speed. Exit 77 without a
GPU (for cuda) or without torch."""
import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))

try:
    import torch
except ImportError:
    print("SKIP: torch is not importable")
    sys.exit(77)

import tessera.torch as tt  # noqa: E402

WARMUP = 2


def main(argv):
    ap = argparse.ArgumentParser(prog="torch_front.py")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--only", default="adds,chain,mixed,mixed_last,reduce")
    ap.add_argument("--backend", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--threshold", type=int, default=131072)
    ap.add_argument("--engines", default="native,python",
                    help="the front's engines to measure, in order (native: no Python an op; python: the mode)")
    a = ap.parse_args(argv)
    if not 1 <= a.reps <= 100:
        print("torch_front.py: --reps must be 1 to 100", file=sys.stderr)
        return 2
    engines = a.engines.split(",")
    if not engines or any(e not in ("native", "python") for e in engines):
        print("torch_front.py: --engines: native and/or python", file=sys.stderr)
        return 2
    if "native" in engines and tt.native_unavailable():
        print("torch_front.py: the native engine is unavailable: %s" % tt.native_unavailable(), file=sys.stderr)
        engines.remove("native")
        if not engines:
            return 1
    if a.backend == "cuda" and not torch.cuda.is_available():
        print("SKIP: no CUDA device")
        return 77
    dev = torch.device("cuda" if a.backend == "cuda" else "cpu")
    torch.manual_seed(0)
    name = torch.cuda.get_device_name(0) if a.backend == "cuda" else "cpu"
    print("device=%s torch=%s backend=%s reps=%d threshold=%d" % (name.replace(" ", "_"), torch.__version__,
                                                                  a.backend, a.reps, a.threshold), flush=True)

    def sync():
        if a.backend == "cuda":
            torch.cuda.synchronize()

    def measure(run, reset=None, front=None):
        """front: None (eager) or the engine."""
        times, stats = [], None
        for r in range(-WARMUP, a.reps):
            if reset:
                reset()
            sync()
            t0 = time.perf_counter()
            if front:
                with tt.scheduler_context(size_threshold=a.threshold, auto_flush_ms=2.0, backend=a.backend,
                                          engine=front) as s:
                    run()
                stats = s.stats
            else:
                run()
                sync()
            if r >= 0:
                times.append((time.perf_counter() - t0) * 1e3)
        return times, stats

    def emit(head, impl, times, ops, stats=None):
        med = statistics.median(times)
        extra = ""
        if stats:
            extra = " " + " ".join("%s=%d" % (k, v) for k, v in stats.items())
        print("%s impl=%s ops=%d total_ms_median=%.3f total_ms_min=%.3f per_op_us=%.3f%s" % (
            head, impl, ops, med, min(times), med * 1e3 / ops, extra), flush=True)

    def check(got, want, what, rtol=1e-5, atol=1e-6):
        if not torch.allclose(got.float(), want.float(), rtol=rtol, atol=atol, equal_nan=True):
            print("torch_front.py: %s: the front's result differs from eager's (max %g)" % (
                what, float((got.float() - want.float()).abs().max())), file=sys.stderr)
            sys.exit(1)

    only = a.only.split(",")
    if "adds" in only:
        for n in (256, 1024, 4096, 16384):
            ops = 10000
            x, y = torch.randn(ops, n, device=dev), torch.randn(ops, n, device=dev)
            out = torch.empty(ops, n, device=dev)
            triples = list(zip(x.unbind(0), y.unbind(0), out.unbind(0)))

            def run():
                for xi, yi, oi in triples:
                    torch.add(xi, yi, out=oi)
            head = "workload=adds size=%d" % n
            t, _ = measure(run)
            emit(head, "eager", t, ops)
            want = out.clone()
            for e in engines:
                out.fill_(float("nan"))
                t, st = measure(run, front=e)
                check(out, want, head + " " + e)
                emit(head, "front-" + e, t, ops, st)
            del x, y, out, triples, want
            if a.backend == "cuda":
                torch.cuda.empty_cache()
    if "chain" in only:
        n, ops = 1024, 10000
        x0, y = torch.randn(n, device=dev), torch.randn(n, device=dev)
        h = torch.full((n,), 0.5, device=dev)
        x = x0.clone()
        cycle = (lambda: x.add_(y), lambda: x.mul_(h), x.relu_, x.sigmoid_, lambda: x.sub_(y))
        seq = [cycle[i % 5] for i in range(ops)]

        def run():
            for f in seq:
                f()

        def reset():
            x.copy_(x0)
        head = "workload=chain size=%d" % n
        t, _ = measure(run, reset)
        emit(head, "eager", t, ops)
        want = x.clone()
        for e in engines:
            t, st = measure(run, reset, front=e)
            check(x, want, head + " " + e, rtol=1e-4, atol=1e-5)
            emit(head, "front-" + e, t, ops, st)
    for wl in ("mixed", "mixed_last"):
        if wl not in only:
            continue
        n, iters = 2048, 1000
        aa, bb, cc = (torch.randn(n, device=dev) for _ in range(3))
        dd = torch.randn(n, device=dev).abs() + 1
        outs = []

        def run():
            outs.clear()
            out = None
            for _ in range(iters):
                x = aa + bb
                y = x * cc
                z = torch.relu(y)
                w = torch.sigmoid(z)
                out = w / dd
                if wl == "mixed":
                    outs.append(out)
            outs.append(out)
        head = "workload=%s size=%d iters=%d" % (wl, n, iters)
        t, _ = measure(run)
        emit(head, "eager", t, iters * 5)
        want = outs[-1].clone()
        for e in engines:
            t, st = measure(run, front=e)
            check(outs[-1], want, head + " " + e)
            if wl == "mixed":
                check(outs[0], want, head + " first iteration " + e)
            emit(head, "front-" + e, t, iters * 5, st)
    if "reduce" in only:
        for rows, cols in ((8, 256), (32, 128), (64, 512), (128, 1024)):
            ops = 1000
            x = torch.randn(rows, cols, device=dev)
            out = torch.empty(ops, rows, device=dev)
            outs = out.unbind(0)

            def run():
                for o in outs:
                    torch.sum(x, dim=-1, out=o)
            head = "workload=reduce shape=%dx%d dim=-1 op=sum" % (rows, cols)
            t, _ = measure(run)
            emit(head, "eager", t, ops)
            want = out.clone()
            for e in engines:
                out.fill_(float("nan"))
                t, st = measure(run, front=e)
                check(out, want, head + " " + e, rtol=1e-4, atol=1e-4)
                emit(head, "front-" + e, t, ops, st)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
