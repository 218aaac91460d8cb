"""A few DDP training steps across the GPUs torchrun gives (one process a
GPU), NCCL all-reduce first: run by ddp.sh natively and under a lease per
GPU. Each rank prints one key=value line (and writes it to $DDP_OUT.rankN): what mem_get_info says its GPU has,
whether the all-reduce summed right, the loss after each step (the same
seed on every run: the runs must agree), and the time of the timed steps."""
import os
import sys
import time

import torch
import torch.distributed as dist


def main():
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    local = int(os.environ.get("LOCAL_RANK", rank))
    torch.cuda.set_device(local)
    free, total = torch.cuda.mem_get_info()
    t = torch.full((1 << 20,), float(rank + 1), device="cuda")
    dist.all_reduce(t)
    want = world * (world + 1) / 2
    ok = bool(torch.all(t == want).item())
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(2048, 8192), torch.nn.ReLU(), torch.nn.Linear(8192, 2048)).cuda()
    ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local])
    opt = torch.optim.SGD(ddp.parameters(), lr=1e-3)
    g = torch.Generator(device="cuda").manual_seed(1 + rank)
    x = torch.randn(256, 2048, device="cuda", generator=g)
    y = torch.randn(256, 2048, device="cuda", generator=g)
    losses = []
    steps, timed_from = 30, 10
    for i in range(steps):
        if i == timed_from:
            torch.cuda.synchronize()
            t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(ddp(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    torch.cuda.synchronize()
    ms = (time.perf_counter() - t0) * 1e3 / (steps - timed_from)
    line = (f"rank={rank} meminfo_total={total} allreduce_ok={int(ok)} loss_last={losses[-1]:.6f} "
            f"step_ms={ms:.3f}")
    print(line, flush=True)
    out = os.environ.get("DDP_OUT")  # a file a rank: torchrun's ranks share stdout
    if out:
        with open(f"{out}.rank{rank}", "w") as f:
            f.write(line + "\n")
    dist.destroy_process_group()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
