#!/usr/bin/env bash
# bench/gpu-check.sh: run ballast's dcgm collector against the real GPUs of
# this machine and print what it read (exposition text), for BENCHMARKS.md.
#
#   bench/gpu-check.sh                      # libdcgm, embedded host engine
#   BALLAST_DCGM_HOSTENGINE=localhost:5555 bench/gpu-check.sh
#   BALLAST_DCGM_EXPORTER_URL=http://localhost:9400/metrics bench/gpu-check.sh
#
# Needs Go and gcc (go-dcgm uses cgo). go-dcgm dlopen()s "libdcgm.so"
# (unversioned): with DCGM 3/4 packages that name comes from the -dev
# package or a symlink to libdcgm.so.N.
set -uo pipefail
cd "$(dirname "$0")/.."

echo "== GPUs (nvidia-smi)"
nvidia-smi -L 2>&1 || echo "nvidia-smi not available"
echo "== libdcgm"
ldconfig -p 2>/dev/null | grep -i 'libdcgm\.so' || echo "libdcgm not in the linker cache"
if ! ldconfig -p 2>/dev/null | grep -q 'libdcgm\.so '; then
  echo "note: no unversioned libdcgm.so; go-dcgm will report 'libdcgm.so not Found' unless LD_LIBRARY_PATH provides it"
fi
echo "== go"
go version
echo "== dcgm collector"
CGO_ENABLED=1 go test -tags gpucheck -count=1 -run '^TestGPUCheck$' -v ./collector
rc=$?
echo "== exit status $rc"
exit $rc
