#!/usr/bin/env bash
# bench/gpu-check.sh: run ballast's dcgm collector against the real GPUs of
# this machine and print what it read (exposition text) and the source it
# read through (ballast_gpu_source_info), for BENCHMARKS.md. Fails unless
# the collector succeeded.
#
#   bench/gpu-check.sh                      # libdcgm (embedded host engine), else NVML
#   BALLAST_DCGM_HOSTENGINE=localhost:5555 bench/gpu-check.sh     # libdcgm only
#   BALLAST_DCGM_EXPORTER_URL=http://localhost:9400/metrics bench/gpu-check.sh
#
# Needs Go and gcc (go-dcgm and go-nvml use cgo). go-dcgm dlopen()s
# "libdcgm.so" (unversioned): with DCGM 3/4 packages that name comes from
# the -dev package or a symlink to libdcgm.so.N. Without DCGM the collector
# falls back to NVML: go-nvml dlopen()s the driver's libnvidia-ml.so.1 and
# gives the device fields (utilisation, memory, power, energy, temperatures,
# clocks, ECC, remapped rows, PCIe replays) but no profiling fields, which
# are reported as ballast_collector_field_unavailable. XIDs come from NVML's
# XID events: the check prints "== XID GPU n: watched; last XID x, n XIDs"
# per GPU, or "unavailable" and the logged NVML error where the driver
# refused the registration, and fails when a GPU has neither.
#
# To see an XID go through, name a command that provokes one (an
# application XID: the GPU stays healthy): the check runs it and fails
# unless a GPU's XID count rises within 15 s. bench/gpu-xid.py needs
# PyTorch with CUDA (Triton for its first try):
#   BALLAST_GPU_CHECK_XID_CMD="python3 bench/gpu-xid.py" bench/gpu-check.sh
#
# To run on a machine without Go, build the test binary where Go is and
# name it in BALLAST_GPU_CHECK_BIN:
#   CGO_ENABLED=1 go test -c -tags gpucheck -o gpu-check.test ./collector
#   BALLAST_GPU_CHECK_BIN=./gpu-check.test bench/gpu-check.sh
#
# When libnvidia-ml.so.1 is not in the linker cache (containers that mount
# the driver, e.g. at /usr/local/nvidia), the script looks in the usual
# driver folders and adds the one that holds it to LD_LIBRARY_PATH, and says so.
set -uo pipefail
cd "$(dirname "$0")/.."

. bench/nvml-path.sh

echo "== GPUs (nvidia-smi)"
nvidia-smi -L 2>&1 || echo "nvidia-smi not available"
echo "== libdcgm"
ldconfig -p 2>/dev/null | grep -i 'libdcgm\.so' || echo "libdcgm not in the linker cache"
if ! ldconfig -p 2>/dev/null | grep -q 'libdcgm\.so '; then
  echo "note: no unversioned libdcgm.so; go-dcgm will report 'libdcgm.so not Found' unless LD_LIBRARY_PATH provides it"
fi
echo "== libnvidia-ml (NVML, the fallback without DCGM)"
nvml_path
echo "== dcgm collector"
if [ -n "${BALLAST_GPU_CHECK_BIN:-}" ]; then
  bin=$(realpath "$BALLAST_GPU_CHECK_BIN")
  echo "prebuilt test binary: $bin"
  (cd collector && "$bin" -test.count=1 -test.run '^TestGPUCheck$' -test.v)
else
  go version
  CGO_ENABLED=1 go test -tags gpucheck -count=1 -run '^TestGPUCheck$' -v ./collector
fi
rc=$?
echo "== exit status $rc"
exit $rc
