"""PyTorch (the machine's own wheels) under a lease: one check per run, as
tests/gpu/torch/torch.sh calls it inside `tessera run`. Prints key=value
lines; exits 0 when the check ran to its end (torch.sh judges the values),
1 with an "error=" line when it could not.

    checks.py CHECK LIMIT_BYTES

CHECK: meminfo, over (one tensor over the lease), chunks (256 MiB until
refused; also run with expandable segments), graph (a CUDA graph captured
with PyTorch's private pool, then one whose pool would pass the lease),
compile (torch.compile(mode="reduce-overhead"): Inductor with CUDA graphs),
resize (the lease resized while this process runs: torch.sh resizes it when
this check writes $TSR_RESIZE_DIR/grow, then .../shrink, and answers with
.../grown and .../shrunk)."""
import os
import sys
import time

import torch

MiB = 1 << 20


def meminfo(limit):
    free, total = torch.cuda.mem_get_info()
    print(f"meminfo_total={total} meminfo_free={free}")


def over(limit):
    try:
        x = torch.empty(limit + limit // 2, dtype=torch.uint8, device="cuda")
        print(f"over=made over_bytes={x.numel()}")
    except torch.OutOfMemoryError:
        print("over=OutOfMemoryError")
    y = torch.ones(16 * MiB, dtype=torch.uint8, device="cuda")  # the process goes on
    print(f"after_over={int(y.sum().item() == 16 * MiB)}")


def chunks(limit):
    held = []
    stopped = "none"
    try:
        while len(held) < 1000:
            held.append(torch.empty(256 * MiB, dtype=torch.uint8, device="cuda"))
    except torch.OutOfMemoryError:
        stopped = "OutOfMemoryError"
    print(f"chunks={len(held)} chunks_stopped_by={stopped}")
    del held
    torch.cuda.empty_cache()
    a = torch.randn(512, 512, device="cuda", dtype=torch.float64)
    err = (a @ a - (a.cpu() @ a.cpu()).cuda()).abs().max().item()
    print(f"chunks_matmul_ok={int(err < 1e-9)}")


def graph(limit):
    x = torch.randn(2048, 2048, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up off the capture, as PyTorch asks
        for _ in range(2):
            (x @ x).relu_()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):  # its tensors come from the graph's private pool
        y = (x @ x).relu_()
        big = torch.empty(512 * MiB, dtype=torch.uint8, device="cuda")  # 512 MiB from the pool
        big.fill_(1)
        sample = big[::MiB].to(torch.float32).sum()  # 512 of its bytes
    g.replay()
    torch.cuda.synchronize()
    ok = torch.allclose(y, (x @ x).relu_(), rtol=1e-3, atol=1e-3) and int(sample.item()) == 512
    print(f"graph_replay_ok={int(ok)}")
    # a capture whose pool would pass what the lease has left
    g2 = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(g2):
            huge = torch.empty(limit, dtype=torch.uint8, device="cuda")
            huge.fill_(1)
        print("graph_over=made")
    except torch.OutOfMemoryError:
        print("graph_over=OutOfMemoryError")
    except RuntimeError as e:  # a capture may end in another error: say which
        print(f"graph_over=RuntimeError:{str(e).splitlines()[0][:80].replace(' ', '_')}")
    g.replay()  # the first graph still works
    torch.cuda.synchronize()
    print(f"graph_after_ok={int(torch.allclose(y, (x @ x).relu_(), rtol=1e-3, atol=1e-3))}")


def compile_(limit):
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(1024, 4096), torch.nn.GELU(), torch.nn.Linear(4096, 1024)).cuda()
    x = torch.randn(64, 1024, device="cuda")
    f = torch.compile(model, mode="reduce-overhead")
    with torch.no_grad():
        want = model(x)
        for _ in range(5):  # the first calls compile, then record the graph, then replay
            got = f(x)
        torch.cuda.synchronize()
    ok = torch.allclose(got, want, rtol=1e-2, atol=1e-2)
    free, total = torch.cuda.mem_get_info()
    print(f"compile_ok={int(ok)} compile_reserved={torch.cuda.memory_reserved()} compile_total={total}")


def _handshake(ask, answer):
    d = os.environ["TSR_RESIZE_DIR"]
    open(os.path.join(d, ask), "w").close()
    for _ in range(1200):  # 60 s
        if os.path.exists(os.path.join(d, answer)):
            return True
        time.sleep(0.05)
    print(f"error=no {answer} from torch.sh")
    return False


def _try(nbytes):
    try:
        return torch.empty(nbytes, dtype=torch.uint8, device="cuda"), "ok"
    except torch.OutOfMemoryError:
        torch.cuda.empty_cache()
        return None, "OutOfMemoryError"


def resize(limit):
    """LIMIT is the lease's first size; torch.sh grows it to 2x, then shrinks it back."""
    big = limit + limit // 4  # more than the lease, less than twice it
    x, got = _try(big)
    print(f"before_grow={got}")
    del x
    if not _handshake("grow", "grown"):
        return
    x, got = _try(big)  # the same allocation, the same process
    free, total = torch.cuda.mem_get_info()
    print(f"after_grow={got} total_grown={total}")
    del x
    torch.cuda.empty_cache()
    held, _ = _try(limit // 2)
    y, got = _try(limit // 2)  # the context and twice half the lease: only the grown lease holds it
    print(f"before_shrink={got}")
    del y
    torch.cuda.empty_cache()
    if not _handshake("shrink", "shrunk"):
        return
    y, got = _try(limit // 2)  # the same, after the shrink: past the lease
    free, total = torch.cuda.mem_get_info()
    print(f"after_shrink={got} total_shrunk={total}")
    del y, held
    torch.cuda.empty_cache()


CHECKS = {"meminfo": meminfo, "over": over, "chunks": chunks, "graph": graph, "compile": compile_, "resize": resize}


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in CHECKS:
        print(f"usage: checks.py {'|'.join(CHECKS)} LIMIT_BYTES", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("error=torch sees no CUDA device")
        return 1
    CHECKS[sys.argv[1]](int(sys.argv[2]))
    print("done=1")
    return 0


if __name__ == "__main__":
    sys.exit(main())
