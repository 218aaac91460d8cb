"""A PyTorch (cuBLAS) matmul loop for throttle.sh, with throttle_loop's
output: "sec=<i> kernels=<n>" as each second ends, then "rate=<matmuls/s>
cv=<stddev/mean> max_launch_us=.. p50_launch_us=.. p99_launch_us=..
launches=.. kernels=.. seconds=.. late_ms=..". A "kernel" here is one
matmul; at most 8 are in flight (a synchronize every 8). A second's count
is interpolated between synchronizations, and rate and cv drop the first
second, as in loop.cu. A launch's time is the host call of torch.matmul.

    torch_matmul.py [--seconds T] [--n N] [--dtype bf16|fp32] [--start-at UNIX_S]

The default, an 8192 x 8192 bf16 product, is 1.1 TFLOP: about 1.5 ms on
an H100. Errors: one line on stderr, exit 1."""
import argparse
import math
import sys
import time

BATCH = 8


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--n", type=int, default=8192)
    ap.add_argument("--dtype", choices=["bf16", "fp32"], default="bf16")
    ap.add_argument("--start-at", type=float, default=0.0)
    a = ap.parse_args()
    if a.seconds < 2 or a.n < 1:
        print("torch_matmul: --seconds must be at least 2 and --n at least 1", file=sys.stderr)
        return 1
    import torch

    if not torch.cuda.is_available():
        print("torch_matmul: no CUDA device", file=sys.stderr)
        return 1
    dt = torch.bfloat16 if a.dtype == "bf16" else torch.float32
    # random inputs: zeros multiply faster than real data
    x = torch.randn(a.n, a.n, device="cuda", dtype=dt)
    y = torch.randn(a.n, a.n, device="cuda", dtype=dt)
    z = torch.empty(a.n, a.n, device="cuda", dtype=dt)
    for _ in range(2 * BATCH):  # cuBLAS handle, heuristics, clocks up
        torch.matmul(x, y, out=z)
    torch.cuda.synchronize()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    ms = []
    for _ in range(5):
        e0.record()
        torch.matmul(x, y, out=z)
        e1.record()
        e1.synchronize()
        ms.append(e0.elapsed_time(e1))
    print(f"matmul_ms={sorted(ms)[2]:.4f} n={a.n} dtype={a.dtype}", flush=True)

    late_ms = 0.0
    if a.start_at > 0:
        wait = a.start_at - time.time()
        if wait > 0:
            time.sleep(wait)
        else:
            late_ms = -wait * 1e3
    launch_us = []
    counts = []
    t_prev = c_prev = c_last = 0.0
    next_second = 1
    total = 0
    t0 = time.monotonic()
    t = 0.0
    while next_second <= a.seconds:
        for _ in range(BATCH):
            s = time.perf_counter_ns()
            torch.matmul(x, y, out=z)
            launch_us.append((time.perf_counter_ns() - s) / 1e3)
        torch.cuda.synchronize()
        total += BATCH
        t = time.monotonic() - t0
        while t >= next_second:  # the count at the whole second, interpolated
            f = (next_second - t_prev) / (t - t_prev) if t > t_prev else 1.0
            c_at = c_prev + f * (total - c_prev)
            counts.append(c_at - c_last)
            print(f"sec={next_second} kernels={c_at - c_last:.1f}", flush=True)
            c_last = c_at
            next_second += 1
        t_prev, c_prev = t, total
    if not torch.isfinite(z.float()).all():
        print("torch_matmul: the product is not finite", file=sys.stderr)
        return 1
    kept = counts[1:]
    mean = sum(kept) / len(kept)
    sd = math.sqrt(sum((c - mean) ** 2 for c in kept) / (len(kept) - 1)) if len(kept) > 1 else 0.0
    launch_us.sort()

    def pct(p):
        return launch_us[max(0, math.ceil(len(launch_us) * p / 100) - 1)]

    print(f"rate={mean:.2f} cv={sd / mean if mean > 0 else 0:.4f} max_launch_us={launch_us[-1]:.1f} "
          f"p50_launch_us={pct(50):.2f} p99_launch_us={pct(99):.1f} launches={len(launch_us)} "
          f"kernels={total} seconds={t:.3f} late_ms={late_ms:.0f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
