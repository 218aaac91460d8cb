"""What another process's GPU work does to a kernel's measured duration.

The shim learns what a launch costs from CUDA events around sampled
launches (src/shim/cost.h). On a GPU time-sliced between two processes, a
kernel preempted in the middle is measured with the other's slice inside
it. This probe shows how often and by how much, for a PyTorch fp32 matmul,
and what the shim's estimator would make of those samples.

    slice_probe.py probe [--seconds T] [--n N] [--duty D] [--start-at UNIX_S]
        bursts of matmuls, each bracketed by its own events, at about D of
        the GPU's time (bursts of ~10 ms, as a throttled lease runs); prints
        alone_ms (the median of 20 before the start) and every sample's
        ratio to it as percentiles, the share of samples inflated by more
        than 10% and 30%, and for each (ring, trim%) the mean of the
        estimator (the mean of the ring's samples within trim% of its
        fastest) over every window of consecutive samples, as a ratio to
        alone_ms
    slice_probe.py hog [--seconds T] [--n N] [--duty D] [--start-at UNIX_S]
        the other process: bursts of matmuls at about D of the GPU's time

Output: key=value lines on stdout, and with TSR_BENCH_JSON set the probe's
figures as records there (bench/README.md); errors: one line on stderr,
exit 1."""
import argparse
import os
import random
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
import bench_record  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("role", choices=["probe", "hog"])
    ap.add_argument("--seconds", type=float, default=6.0)
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--duty", type=float, default=0.3)
    ap.add_argument("--start-at", type=float, default=0.0)
    a = ap.parse_args()
    if not 0 < a.duty <= 1 or a.seconds <= 0 or a.n < 1:
        print("slice_probe: --duty is in (0, 1], --seconds > 0, --n >= 1", file=sys.stderr)
        return 1
    if a.role == "hog" and a.start_at > 0:
        # nothing on the GPU before the start: the probe times its matmul
        # alone in the meantime (on 2026-11-28 the hog's warm-up fell into
        # it and doubled the probe's alone_ms)
        wait = a.start_at - time.time()
        if wait > 0:
            time.sleep(wait)
    import torch

    if not torch.cuda.is_available():
        print("slice_probe: no CUDA device", file=sys.stderr)
        return 1
    x = torch.randn(a.n, a.n, device="cuda")
    y = torch.randn(a.n, a.n, device="cuda")
    z = torch.empty(a.n, a.n, device="cuda")
    for _ in range(16):
        torch.matmul(x, y, out=z)
    torch.cuda.synchronize()
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(64)]
    alone = []
    for i in range(20):
        e0, e1 = ev[i]
        e0.record()
        torch.matmul(x, y, out=z)
        e1.record()
        e1.synchronize()
        alone.append(e0.elapsed_time(e1))
    alone_ms = sorted(alone)[len(alone) // 2]
    per_burst = min(64, max(1, round(10.0 / alone_ms)))
    if a.start_at > 0:
        wait = a.start_at - time.time()
        if wait > 0:
            time.sleep(wait)
    end = time.monotonic() + a.seconds
    ratios = []
    while time.monotonic() < end:
        t = time.monotonic()
        if a.role == "hog":
            for _ in range(per_burst):
                torch.matmul(x, y, out=z)
            torch.cuda.synchronize()
        else:
            for i in range(per_burst):
                e0, e1 = ev[i]
                e0.record()
                torch.matmul(x, y, out=z)
                e1.record()
            torch.cuda.synchronize()
            ratios.extend(ev[i][0].elapsed_time(ev[i][1]) / alone_ms for i in range(per_burst))
        busy = time.monotonic() - t
        # about `duty` of the time, with a random phase against the other
        time.sleep(busy * (1 - a.duty) / a.duty * random.uniform(0.7, 1.3))
    print(f"role={a.role} alone_ms={alone_ms:.4f} per_burst={per_burst} duty={a.duty}", flush=True)
    if a.role == "hog":
        return 0
    if not ratios:
        print("slice_probe: no sample", file=sys.stderr)
        return 1
    s = sorted(ratios)

    def pct(p):
        return s[min(len(s) - 1, int(len(s) * p / 100))]

    print("samples=%d p0=%.3f p10=%.3f p50=%.3f p90=%.3f p99=%.3f over10=%.3f over30=%.3f" % (
        len(s), s[0], pct(10), pct(50), pct(90), pct(99), sum(r > 1.1 for r in s) / len(s),
        sum(r > 1.3 for r in s) / len(s)), flush=True)
    device = torch.cuda.get_device_name(0)
    driver = bench_record.gpu()[1] if os.environ.get("TSR_BENCH_JSON") else None  # nvidia-smi only when recording
    bench_record.record("slice_probe", f"samples, n {a.n}, duty {a.duty}", {
        "alone_ms": alone_ms, "per_burst": per_burst, "samples": len(s), "p0_ratio": s[0], "p10_ratio": pct(10),
        "p50_ratio": pct(50), "p90_ratio": pct(90), "p99_ratio": pct(99),
        "over10_share": sum(r > 1.1 for r in s) / len(s), "over30_share": sum(r > 1.3 for r in s) / len(s)},
        device=device, driver=driver)
    # the shim samples the first launch after a wait: one per burst
    firsts = ratios[::per_burst]
    for ring in (8, 16, 32):
        for trim in (130, 110, 100):
            ests = []
            for i in range(ring, len(firsts) + 1):
                w = firsts[i - ring:i]
                lo = min(w)
                kept = [v for v in w if v * 100 <= lo * trim]
                ests.append(sum(kept) / len(kept))
            if ests:
                print(f"estimator ring={ring} trim={trim} mean_ratio={sum(ests) / len(ests):.3f} "
                      f"max_ratio={max(ests):.3f} windows={len(ests)}", flush=True)
                bench_record.record("slice_probe.estimator", f"n {a.n}, duty {a.duty}, ring {ring}, trim {trim}",
                                    {"mean_ratio": sum(ests) / len(ests), "max_ratio": max(ests),
                                     "windows": len(ests)}, device=device, driver=driver)
    return 0


if __name__ == "__main__":
    sys.exit(main())
