# bench/gpu-xid.py: provoke one application XID on GPU 0 for the XID part of
# bench/gpu-check.sh (needs PyTorch with CUDA):
#   BALLAST_GPU_CHECK_XID_CMD="python3 bench/gpu-xid.py" bench/gpu-check.sh
# A kernel that writes to an unmapped address faults on the GPU; the driver
# logs an application XID (31, MMU fault, on recent GPUs; 13 on some) and
# tears that process's context down. The GPU stays healthy and needs no
# reset. Tried in order, each in its own process (a faulted CUDA context is
# dead): a Triton kernel storing 1 TiB past a buffer, then an out-of-bounds
# index that trips PyTorch's device-side assert. Exits 0 once one faulted.
import os, subprocess, sys, tempfile

TRITON = """
import torch, triton, triton.language as tl
@triton.jit
def bad(p):
    tl.store(p + (1 << 38), 1.0)
x = torch.zeros(1, device="cuda")
bad[(1,)](x)
torch.cuda.synchronize()
"""
ASSERT = """
import torch
x = torch.zeros(4, device="cuda")
y = x[torch.tensor([1 << 30], device="cuda")]
torch.cuda.synchronize()
"""

for name, src in (("triton illegal store", TRITON), ("device-side assert", ASSERT)):
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(src)
    r = subprocess.run([sys.executable, f.name], capture_output=True, text=True, timeout=120)
    os.unlink(f.name)
    faulted = [l for l in r.stderr.splitlines() if "illegal memory access" in l or "device-side assert triggered" in l]
    print(f"{name}: exit {r.returncode}: {(faulted or r.stderr.strip().splitlines() or [''])[-1]}")
    if r.returncode != 0 and faulted:
        sys.exit(0)
sys.exit(1)
