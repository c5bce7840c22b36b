#!/usr/bin/env bash
# bench/gpu-e2e.sh: the GPU path of the product end to end on a real GPU
# node, on 127.0.0.1 only: `ballast-agent client` reads the GPUs (libdcgm,
# else the driver's NVML), `ballast mds` scrapes it every 2 s into its
# embedded store, an optional load runs on the GPU for a while, and the
# mds's query API is asked what it stored. For BENCHMARKS.md; fails unless
# the mds stored GPU series from the agent.
#
#   bench/gpu-e2e.sh                               # binaries from bin/ (make build)
#   BALLAST_BIN=/path/ballast BALLAST_AGENT_BIN=/path/ballast-agent \
#   BALLAST_GPU_LOAD="python3 bench/gpu-load.py 25" BALLAST_GPU_LOAD_SECONDS=45 bench/gpu-e2e.sh
#
# Needs curl. Ports 19750 (mds) and 19752 (agent) on 127.0.0.1; it ends only
# the processes it started. The load command, when given, runs in the
# background; it is ended if still running after BALLAST_GPU_LOAD_SECONDS
# (default 30).
set -uo pipefail
cd "$(dirname "$0")/.."

mds_bin=${BALLAST_BIN:-bin/ballast}
agent_bin=${BALLAST_AGENT_BIN:-bin/ballast-agent}
load_s=${BALLAST_GPU_LOAD_SECONDS:-30}
for b in "$mds_bin" "$agent_bin"; do
  [ -x "$b" ] || { echo "gpu-e2e: $b is not an executable; run make build or set BALLAST_BIN / BALLAST_AGENT_BIN" >&2; exit 2; }
done
command -v curl >/dev/null || { echo "gpu-e2e: needs curl" >&2; exit 2; }

# containers often mount the driver outside the linker cache
. bench/nvml-path.sh
nvml_path

work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

cat >"$work/mds.yaml" <<YAML
scrape:
  interval: 2s
  timeout: 2s
  targets: ["127.0.0.1:19752"]
pipeline:
  tick: 5s
YAML

"$agent_bin" client --listen 127.0.0.1:19752 --node-name gpu-e2e >"$work/agent.log" 2>&1 &
pids+=($!)
"$mds_bin" mds --config "$work/mds.yaml" --listen 127.0.0.1:19750 --data-dir "$work/data" >"$work/mds.log" 2>&1 &
pids+=($!)

api=http://127.0.0.1:19750
for i in $(seq 1 50); do
  curl -fsS "$api/readyz" >/dev/null 2>&1 && break
  sleep 0.2
done
start=$(date +%s)
echo "== idle for 10 s"
sleep 10
if [ -n "${BALLAST_GPU_LOAD:-}" ]; then
  echo "== load for ${load_s} s: $BALLAST_GPU_LOAD"
  bash -c "$BALLAST_GPU_LOAD" >"$work/load.log" 2>&1 &
  lp=$!
  pids+=($lp)
  for i in $(seq 1 "$load_s"); do
    kill -0 "$lp" 2>/dev/null || break
    sleep 1
  done
  kill "$lp" 2>/dev/null && echo "(load still running after ${load_s} s: ended)"
  wait "$lp" 2>/dev/null
  tail -3 "$work/load.log"
  echo "== idle again for 10 s"
  sleep 10
fi
end=$(date +%s)

q() { # q EXPR: instant query at the end of the run
  echo "-- $1"
  curl -fsS -G "$api/api/v1/query" --data-urlencode "query=$1" --data-urlencode "time=$end"
  echo
}
echo "== agent /metrics, GPU lines"
curl -fsS http://127.0.0.1:19752/metrics | grep -E '^ballast_(gpu_|collector_success|collector_field_unavailable)' | head -80
echo "== what the mds stored (query API)"
q 'up'
q 'ballast_gpu_source_info'
q 'ballast_gpu_info'
q 'count by (__name__) ({__name__=~"ballast_gpu_.*"})'
q 'count by (node) ({__name__=~"ballast_(gpu|netdev|collector)_.*"})'
w="$((end - start))s"
for m in utilization_ratio sm_active_ratio tensor_active_ratio power_watts temperature_celsius memory_used_bytes sm_clock_hertz; do
  q "min_over_time(ballast_gpu_${m}[$w])"
  q "max_over_time(ballast_gpu_${m}[$w])"
done
q "increase(ballast_gpu_energy_joules_total[$w])"
echo "== the agent's own footprint on the GPU node (scraped from it)"
q 'process_resident_memory_bytes{node="gpu-e2e"}'
q "increase(process_cpu_seconds_total{node=\"gpu-e2e\"}[$w])"
q 'ballast_collector_duration_seconds{node="gpu-e2e",collector="dcgm"}'
echo "== what the mds's analysis made of it (findings over the run)"
curl -fsS "$api/api/v1/findings" | head -c 4000
echo
echo "== mds log (warnings and errors)"
grep -E 'level=(WARN|ERROR)' "$work/mds.log" | head -20
echo "== agent log"
head -40 "$work/agent.log"

n=$(curl -fsS -G "$api/api/v1/query" --data-urlencode 'query=count({__name__=~"ballast_gpu_.*",node="gpu-e2e"})' --data-urlencode "time=$end" |
  sed -n 's/.*"value":\[[0-9.]*,"\([0-9]*\)"\].*/\1/p')
echo "== GPU series stored from the agent: ${n:-0}"
[ "${n:-0}" -gt 0 ]
