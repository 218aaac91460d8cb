#!/usr/bin/env python3
"""The PyTorch front on ordinary PyTorch code (issue 33), beside eager in
the same process on the same GPU: torch.optim's steps, an elementwise
block a model would have, eager work between taken operations, and the
differential test's random programs.

    torch_optim.py [--reps N] [--only optim,block,interleave,random] [--backend cuda|cpu]
                   [--params 200] [--numel 4096] [--steps 30] [--programs 100] [--md FILE]

One line per measurement, `key=value` pairs, as torch_front.py prints them:
    workload=optim opt=Adam foreach=1 impl=eager total_ms_median=.. ...
    workload=optim opt=Adam foreach=1 impl=front-native total_ms_median=.. scheduled=.. ...
and, with --md, the tables in Markdown.

Time is host wall time from the first operation to the end of the work:
eager synchronizes the device at the end, the front leaves its context
(which waits for what is pending). Eager and the front run in turns,
repetition by repetition, so that a drift of the machine's speed touches
both (for an optimizer, every variant in turn: eager and the front with
foreach=False and True, and eager fused=True); median and min of --reps
repetitions each after 2 warm-ups (the step-only floor alone). Each repetition starts from the
same state (parameters cloned, a new optimizer) outside the timed part.
Every result of the front is checked against eager's after each of its
repetitions, and the run fails if one differs.

Workloads (float32, seed 0):
  optim   Adam, AdamW (weight_decay 0.01), SGD (momentum 0.9), RMSprop and
          Adagrad (their foreach operations taken one call at a time), each with
          foreach=False and foreach=True: --steps steps over --params
          parameters of --numel floats, each with a fixed gradient. Eager
          with fused=True is measured too where this PyTorch has it (a
          reference: the front does not take fused kernels).
  block   for each of --params tensors x of --numel floats:
          y = gelu(x * w + 0.5); y = sigmoid(y) * tanh(y);
          y = y.abs().sqrt(); out = clamp(y, -1, 1) / 3.0   (8 operations)
  random  the first --programs programs of the differential test
          (python/tests/test_torch_front.py: program(seed)), each run 40
          times in a row; the ratio front / eager per program, and the
          worst.
  interleave  200 times: h = x @ w (eager, cuBLAS), then x = tanh(h * 0.5
          + b) (three operations the front takes), 64 x 64 floats.
Exit 77 without a GPU (for cuda) or without torch; 1 if a result differs."""
import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python", "tests"))

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    print("SKIP: torch is not importable")
    sys.exit(77)

import tessera.torch as tt  # noqa: E402

WARMUP = 2


def main(argv):
    ap = argparse.ArgumentParser(prog="torch_optim.py")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--only", default="optim,block,interleave,random")
    ap.add_argument("--backend", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--engine", default="native", choices=("native", "python"))
    ap.add_argument("--params", type=int, default=200)
    ap.add_argument("--numel", type=int, default=4096)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--programs", type=int, default=100)
    ap.add_argument("--md", default=None, help="also write the tables in Markdown to this file")
    a = ap.parse_args(argv)
    if not 1 <= a.reps <= 100 or a.params < 1 or a.numel < 1 or a.steps < 1 or a.programs < 0:
        print("torch_optim.py: --reps 1 to 100; --params, --numel, --steps at least 1", file=sys.stderr)
        return 2
    if a.engine == "native" and tt.native_unavailable():
        print("torch_optim.py: the native engine is unavailable: %s" % tt.native_unavailable(), file=sys.stderr)
        return 1
    if a.backend == "cuda" and not torch.cuda.is_available():
        print("SKIP: no CUDA device")
        return 77
    os.environ["TESSERA_TORCH_BACKEND"] = a.backend
    dev = torch.device("cuda" if a.backend == "cuda" else "cpu")
    name = torch.cuda.get_device_name(0) if a.backend == "cuda" else "cpu"
    print("device=%s torch=%s backend=%s reps=%d" % (name.replace(" ", "_"), torch.__version__, a.backend, a.reps),
          flush=True)
    front = "front-" + a.engine
    md = []

    def sync():
        if a.backend == "cuda":
            torch.cuda.synchronize()

    def once(run, reset, use_front):
        if reset:
            reset()
        sync()
        t0 = time.perf_counter()
        stats = None
        if use_front:
            with tt.scheduler_context(backend=a.backend, engine=a.engine) as s:
                run()
            stats = s.stats
        else:
            run()
            sync()
        return (time.perf_counter() - t0) * 1e3, stats

    def measure(run, reset=None):
        """eager alone: --reps times after the warm-ups"""
        times = []
        for r in range(-WARMUP, a.reps):
            t, _ = once(run, reset, False)
            if r >= 0:
                times.append(t)
        return times

    def measure_pair(run, reset, result, what, rtol=1e-5, atol=1e-6):
        """eager and the front in turns, repetition by repetition (a drift
        of the machine's speed then touches both alike); the front's result
        (result()) checked against eager's after each of its runs"""
        te, tf, stats = [], [], None
        for r in range(-WARMUP, a.reps):
            t, _ = once(run, reset, False)
            want = [x.detach().clone() for x in result()]
            if r >= 0:
                te.append(t)
            t, stats = once(run, reset, True)
            check([x.detach() for x in result()], want, what, rtol, atol)
            if r >= 0:
                tf.append(t)
        return te, tf, stats

    def emit(head, impl, times, stats=None):
        extra = " " + " ".join("%s=%d" % (k, v) for k, v in stats.items()) if stats else ""
        print("%s impl=%s total_ms_median=%.3f total_ms_min=%.3f%s" % (
            head, impl, statistics.median(times), min(times), extra), flush=True)

    def check(got, want, what, rtol=1e-5, atol=1e-6):
        for g, w in zip(got, want):
            if not torch.allclose(g.float(), w.float(), rtol=rtol, atol=atol, equal_nan=True):
                print("torch_optim.py: %s: the front's result differs from eager's (max %g)" % (
                    what, float((g.float() - w.float()).abs().max())), file=sys.stderr)
                sys.exit(1)

    only = a.only.split(",")
    torch.manual_seed(0)
    if "optim" in only:
        P, N = a.params, a.numel
        start = [torch.randn(N, device=dev) for _ in range(P)]
        grads = [torch.randn(N, device=dev) for _ in range(P)]
        opts = {
            "Adam": lambda ps, **k: torch.optim.Adam(ps, lr=1e-3, **k),
            "AdamW": lambda ps, **k: torch.optim.AdamW(ps, lr=1e-3, weight_decay=0.01, **k),
            "SGD": lambda ps, **k: torch.optim.SGD(ps, lr=1e-3, momentum=0.9, **k),
            # no whole-step path: their foreach operations go through the engine one call at a time
            "RMSprop": lambda ps, **k: torch.optim.RMSprop(ps, lr=1e-3, **k),
            "Adagrad": lambda ps, **k: torch.optim.Adagrad(ps, lr=1e-3, **k),
        }
        md.append("| optimizer | foreach | eager ms | front ms | front vs eager | eager fastest ms (choice) "
                  "| front vs eager fastest | eager fused=True ms | front vs fused | step()'s own Python ms |")
        md.append("|---|---|---|---|---|---|---|---|---|---|")
        import importlib
        functional = {"Adam": ("torch.optim.adam", "_multi_tensor_adam"),
                      "AdamW": ("torch.optim.adam", "_multi_tensor_adam"),
                      "SGD": ("torch.optim.sgd", "_multi_tensor_sgd"),
                      "RMSprop": ("torch.optim.rmsprop", "_multi_tensor_rmsprop"),
                      "Adagrad": ("torch.optim.adagrad", "_multi_tensor_adagrad")}
        for oname, make in opts.items():
            # every variant in turn within each repetition (eager foreach=False, the front, eager
            # foreach=True, the front, eager fused=True), so that a drift of the machine's speed
            # touches all of them alike (fused measured apart once read 0.74x of a front that was
            # 1.2x faster by the minimums: bench/results/rt-front-2026-11-28.md)
            runs = {}
            for foreach in (False, True, "fused"):
                kw = {"fused": True} if foreach == "fused" else {"foreach": foreach}
                if foreach == "fused" and (a.backend != "cuda" or oname in ("RMSprop", "Adagrad")):
                    continue  # fused: CUDA's Adam, AdamW and SGD
                state = {}

                def reset(state=state, kw=kw):
                    ps = [s.clone().requires_grad_() for s in start]
                    for p, g in zip(ps, grads):
                        p.grad = g
                    state["ps"] = ps
                    state["opt"] = make(ps, **kw)

                def run(state=state):
                    o = state["opt"]
                    for _ in range(a.steps):
                        o.step()
                try:
                    reset()
                except (TypeError, RuntimeError, ValueError) as e:
                    print("note: %s %s: %s" % (oname, kw, e), flush=True)
                    continue
                runs[foreach] = (run, reset, state)
            times = {(f, impl): [] for f in runs for impl in ("eager", "front") if impl == "eager" or f != "fused"}
            stats = {}
            for r in range(-WARMUP, a.reps):
                for foreach, (run, reset, state) in runs.items():
                    what = "%s foreach=%s" % (oname, foreach)
                    t, _ = once(run, reset, False)
                    if r >= 0:
                        times[(foreach, "eager")].append(t)
                    if foreach == "fused":
                        continue
                    want = [x.detach().clone() for x in state["ps"]]
                    t, stats[foreach] = once(run, reset, True)
                    check([x.detach() for x in state["ps"]], want, what)
                    if r >= 0:
                        times[(foreach, "front")].append(t)
            res = {}
            for (foreach, impl), t in times.items():
                head = "workload=optim opt=%s foreach=%s params=%d numel=%d steps=%d" % (
                    oname, "fused" if foreach == "fused" else int(foreach), P, N, a.steps)
                emit(head, front if impl == "front" else "eager", t, stats.get(foreach) if impl == "front" else None)
                res[(foreach, impl)] = statistics.median(t)
            # what step() costs around its functional form: the functional replaced by one that does nothing
            floor = None
            modname, fname = functional[oname]
            mod = importlib.import_module(modname)
            real = getattr(mod, fname, None)
            if real is not None:
                state = {}

                def reset_f():
                    ps = [s.clone().requires_grad_() for s in start]
                    for p, g in zip(ps, grads):
                        p.grad = g
                    state["opt"] = make(ps, foreach=True)

                def run_f():
                    for _ in range(a.steps):
                        state["opt"].step()
                setattr(mod, fname, lambda *x, **k: None)
                try:
                    t = measure(run_f, reset_f)
                finally:
                    setattr(mod, fname, real)
                floor = statistics.median(t)
                print("workload=optim opt=%s foreach=1 impl=step-without-its-functional total_ms_median=%.3f" % (
                    oname, floor), flush=True)
            fastest = min((res[(f, "eager")], f) for f in (False, True) if (f, "eager") in res)
            for foreach in (False, True):
                if (foreach, "front") not in res:
                    continue
                e, f = res[(foreach, "eager")], res[(foreach, "front")]
                fused = res.get(("fused", "eager"))
                md.append("| %s | %s | %.2f | %.2f | %.2fx | %.2f (foreach=%s) | %.2fx | %s | %s | %s |" % (
                    oname, foreach, e, f, e / f, fastest[0], fastest[1], fastest[0] / f,
                    "%.2f" % fused if fused else "-", "%.2fx" % (fused / f) if fused else "-",
                    "%.2f" % floor if floor else "-"))
        del start, grads
    if "block" in only:
        P, N = a.params, a.numel
        xs = [torch.randn(N, device=dev) for _ in range(P)]
        w = torch.randn(N, device=dev)
        outs = [None] * P

        def run():
            for i, x in enumerate(xs):
                y = F.gelu(x * w + 0.5)
                y = torch.sigmoid(y) * torch.tanh(y)
                y = y.abs().sqrt()
                outs[i] = torch.clamp(y, -1, 1) / 3.0
        head = "workload=block tensors=%d numel=%d ops=%d" % (P, N, P * 8)
        t, tf, st = measure_pair(run, None, lambda: outs, head, rtol=1e-4, atol=1e-5)
        emit(head, "eager", t)
        emit(head, front, tf, st)
        e, f = statistics.median(t), statistics.median(tf)
        md.append("")
        md.append("| workload | eager ms | front ms | front vs eager |")
        md.append("|---|---|---|---|")
        md.append("| elementwise block with numbers, %d x %d floats, 8 operations each | %.2f | %.2f | %.2fx |" % (
            P, N, e, f, e / f))
    if "interleave" in only:
        # eager work between taken operations, both ways: a matmul (cuBLAS,
        # eager) reads what tasks wrote, tasks read what it wrote
        n = 64
        x0 = torch.randn(n, n, device=dev)
        wm = torch.randn(n, n, device=dev) / 8
        bias = torch.randn(n, device=dev)
        st = {}

        def reset():
            st["x"] = x0.clone()

        def run():
            x = st["x"]
            for _ in range(200):
                h = x @ wm
                x = torch.tanh(h * 0.5 + bias)
            st["x"] = x
        head = "workload=interleave size=%d iters=200" % n
        t, tf, stf = measure_pair(run, reset, lambda: [st["x"]], head, rtol=1e-4, atol=1e-5)
        emit(head, "eager", t)
        emit(head, front, tf, stf)
        e, f = statistics.median(t), statistics.median(tf)
        md.append("")
        md.append("| eager work between tasks (200 x: matmul eager, then 3 taken) | eager ms | front ms "
                  "| front vs eager |")
        md.append("|---|---|---|---|")
        md.append("| 64 x 64 | %.2f | %.2f | %.2fx |" % (e, f, e / f))
    if "random" in only and a.programs:
        import test_torch_front as progs  # noqa: E402 (its DEVICE follows TESSERA_TORCH_BACKEND)
        ratios = []
        for seed in range(a.programs):
            inputs, prog = progs.program(seed)
            try:
                prog(inputs)
            except RuntimeError:
                continue
            got = {}

            def run():
                for _ in range(40):
                    got["r"] = prog(inputs)
            t_e, t_f, st = measure_pair(run, None, lambda: got["r"], "program %d" % seed, rtol=2e-2, atol=2e-2)
            ratio = statistics.median(t_f) / statistics.median(t_e)
            ratios.append((ratio, seed, statistics.median(t_e), statistics.median(t_f), st))
            print("workload=random program=%d eager_ms=%.3f front_ms=%.3f ratio=%.3f fallbacks=%d tasks=%d" % (
                seed, statistics.median(t_e), statistics.median(t_f), ratio, st["fallbacks"], st["tasks"]),
                flush=True)
        if ratios:
            ratios.sort()
            worst = ratios[-1]
            slower = sum(1 for r in ratios if r[0] > 1.05)
            print("workload=random programs=%d median_ratio=%.3f worst_ratio=%.3f worst_program=%d slower_5pct=%d" % (
                len(ratios), statistics.median(r[0] for r in ratios), worst[0], worst[1], slower), flush=True)
            md.append("")
            md.append("| random programs | front / eager time, median | best | worst (program) | more than 5% slower |")
            md.append("|---|---|---|---|---|")
            md.append("| %d, each run 40 times | %.3f | %.3f | %.3f (%d) | %d |" % (
                len(ratios), statistics.median(r[0] for r in ratios), ratios[0][0], worst[0], worst[1], slower))
    if a.md:
        with open(a.md, "w") as f:
            f.write("\n".join(md) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
