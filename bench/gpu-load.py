# bench/gpu-load.py: a GPU load for bench/gpu-e2e.sh (needs PyTorch with CUDA):
# bf16 8192x8192 matrix products for N seconds (default 25), then the rate.
#   BALLAST_GPU_LOAD="python3 bench/gpu-load.py 25" bench/gpu-e2e.sh
import sys, time, torch
secs = float(sys.argv[1]) if len(sys.argv) > 1 else 25
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
torch.cuda.synchronize()
t0 = time.time(); n = 0
while time.time() - t0 < secs:
    for _ in range(10):
        b = a @ a
    torch.cuda.synchronize(); n += 10
dt = time.time() - t0
print(f"{n} products of 8192^3 bf16 in {dt:.1f} s: {n*2*8192**3/dt/1e12:.0f} TFLOP/s")
