"""PyTorch under libtessera-cuda.so: allocations stop at the lease, the
lease is what mem_get_info reports, and the arithmetic is right."""
import sys
import torch

assert torch.cuda.is_available(), "no CUDA"
free, total = torch.cuda.mem_get_info()
print(f"torch_meminfo_free={free} torch_meminfo_total={total}")
chunks = []
refused = "none"
try:
    while len(chunks) < 1000:
        chunks.append(torch.empty(256 << 20, dtype=torch.uint8, device="cuda"))
except torch.OutOfMemoryError as e:
    refused = "OutOfMemoryError"
print(f"torch_chunks={len(chunks)} torch_stopped_by={refused}")
del chunks
torch.cuda.empty_cache()
a = torch.randn(512, 512, device="cuda", dtype=torch.float64)
b = torch.randn(512, 512, device="cuda", dtype=torch.float64)
err = (a @ b - (a.cpu() @ b.cpu()).cuda()).abs().max().item()
print(f"torch_matmul_maxerr={err:.3e}")
sys.exit(0 if err < 1e-9 else 1)
