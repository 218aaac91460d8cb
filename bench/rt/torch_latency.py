"""torch_latency.py: where a task's time goes when it follows eager work.

    python3 bench/rt/torch_latency.py [--iters 200] [--numel 4096] [--trace N]

A diagnostic beside bench/rt/torch_optim.py's interleave row. Each case
runs --iters times inside one native scheduler_context (passing off, so
every operation the front takes is a task), and prints the median and p90
of each phase's host time in microseconds, the runtime's device counters
per batch over the case, and eager's time for the same operations:

  warm      y = x * 0.5; flush                 (the kernel is running)
  idle      sleep 2 ms; y = x * 0.5; flush     (the kernel ended idle: a relaunch)
  after_mm  h = x @ w; y = h * 0.5; flush      (eager device work first: the
                                                taken op synchronizes the stream)
  mm_idle   h = x @ w; sync; sleep 2 ms; y = h * 0.5; flush
  mm_after  y = x * 0.5; h = y @ w             (eager work reading a task's
                                                result: the front waits first)

Phases: `op` is the host time of the taken operation (for after_mm it
includes the stream synchronize), `flush` the host time of the flush (post,
relaunch if needed, the device's work, the wait). With --trace N, the last
N iterations of after_mm and mm_after also run under torch.profiler, and
every GPU kernel's start and duration (us, from the first) is printed, so
a relaunch of the persistent kernel and its gap to the eager kernels show.
Exit 77 without a GPU, torch or the native engine."""
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


def q(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))]


def dev_delta(a, b):
    d = {k: b[k] - a[k] for k in ("device_batches", "device_tasks", "device_fetch_cycles", "device_run_cycles",
                                  "device_wait_cycles", "device_publish_cycles", "device_launches")}
    khz = b["device_clock_khz"] or 1
    nb = max(1, d["device_batches"])
    us = lambda c: c / nb / khz * 1000.0  # noqa: E731
    return "launches=%d batches=%d tasks=%d per_batch_us fetch=%.1f run=%.1f wait=%.1f publish=%.1f" % (
        d["device_launches"], d["device_batches"], d["device_tasks"], us(d["device_fetch_cycles"]), us(d["device_run_cycles"]),
        us(d["device_wait_cycles"]), us(d["device_publish_cycles"]))


def main(argv):
    ap = argparse.ArgumentParser(prog="torch_latency.py")
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--numel", type=int, default=4096)
    ap.add_argument("--trace", type=int, default=0)
    a = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("SKIP: no CUDA device")
        return 77
    if tt.native_unavailable():
        print("SKIP: the native engine: %s" % tt.native_unavailable())
        return 77
    side = int(round(a.numel ** 0.5))
    x = torch.randn(side, side, device="cuda")
    w = torch.randn(side, side, device="cuda") / side
    torch.cuda.synchronize()

    cases = {}

    def case(name, body, pre=None):
        cases[name] = (body, pre)

    class Lap:
        """ph[name] gets the time since the last lap (or since made)."""

        def __init__(self, ph):
            self.ph, self.t = ph, time.perf_counter()

        def __call__(self, name):
            t = time.perf_counter()
            self.ph[name].append(t - self.t)
            self.t = t

    def warm(ph, s):
        lap = Lap(ph)
        y = x * 0.5
        lap("op")
        s.flush()
        lap("flush")
        return y

    def idle_pre():
        time.sleep(0.002)

    def after_mm(ph, s):
        lap = Lap(ph)
        h = x @ w
        lap("mm")
        y = h * 0.5
        lap("op")
        s.flush()
        lap("flush")
        return y

    def mm_idle(ph, s):
        h = x @ w
        torch.cuda.synchronize()
        time.sleep(0.002)
        lap = Lap(ph)
        y = h * 0.5
        lap("op")
        s.flush()
        lap("flush")
        return y

    def mm_after(ph, s):
        lap = Lap(ph)
        y = x * 0.5
        lap("op")
        h = y @ w
        lap("mm")
        torch.cuda.synchronize()
        lap("sync")
        return h

    case("warm", warm)
    case("idle", warm, idle_pre)
    case("after_mm", after_mm)
    case("mm_idle", mm_idle)
    case("mm_after", mm_after)

    class Eager:
        def flush(self):
            torch.cuda.synchronize()

    for name, (body, pre) in cases.items():
        for impl in ("eager", "front"):
            ph = {k: [] for k in ("mm", "op", "flush", "sync")}
            tot = []
            if impl == "eager":
                s = Eager()
                for i in range(a.iters + 5):
                    if pre:
                        pre()
                    t0 = time.perf_counter()
                    body(ph, s)
                    torch.cuda.synchronize()
                    if i >= 5:
                        tot.append(time.perf_counter() - t0)
                extra = ""
            else:
                with tt.scheduler_context(engine="native", passing=False) as s:
                    for _ in range(5):
                        body({k: [] for k in ph}, s)
                    s.flush()
                    d0 = s.rt.stats()
                    for i in range(a.iters):
                        if pre:
                            pre()
                        t0 = time.perf_counter()
                        body(ph, s)
                        s.flush()
                        tot.append(time.perf_counter() - t0)
                    d1 = s.rt.stats()
                    st = s.stats
                extra = " " + dev_delta(d0, d1) + " syncs=%d waits=%d" % (st["syncs"], st["waits"])
            parts = " ".join("%s_us=%.1f/%.1f" % (k, statistics.median(v) * 1e6, q(v, 0.9) * 1e6)
                             for k, v in ph.items() if v)
            print("case=%s impl=%s total_us=%.1f/%.1f %s%s" % (name, impl, statistics.median(tot) * 1e6,
                                                             q(tot, 0.9) * 1e6, parts, extra), flush=True)

    if a.trace > 0:
        from torch.profiler import profile, ProfilerActivity
        for name in ("after_mm", "mm_after", "idle"):
            body, pre = cases[name]
            with tt.scheduler_context(engine="native", passing=False) as s:
                for _ in range(5):
                    body({k: [] for k in ("mm", "op", "flush", "sync")}, s)
                s.flush()
                with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                    for _ in range(a.trace):
                        if pre:
                            pre()
                        body({k: [] for k in ("mm", "op", "flush", "sync")}, s)
                        s.flush()
            evs = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
            evs.sort(key=lambda e: e.time_range.start)
            if not evs:
                print("trace=%s: no device events" % name)
                continue
            t0 = evs[0].time_range.start
            print("trace=%s (us from the first device event: start +duration name)" % name)
            for e in evs[:60]:
                print("  %9.1f +%8.1f %s" % (e.time_range.start - t0, e.time_range.elapsed_us(), e.name[:60]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
