#!/usr/bin/env bash
# bench/agent-overhead.sh: CPU per scrape and RSS of the ds agent against
# node_exporter, all reading the same fake /proc, /sys and /dev tree with
# 24 NVMe controllers (namespaces in diskstats) and 8 NICs. The ds agent
# runs twice: `ballast-agent ds` (the agent binary, without the store) and
# `ballast ds` (the one binary with every role), for comparison.
#
#   bench/agent-overhead.sh [scrapes]     # default 300 scrapes each
#
# node_exporter: NODE_EXPORTER=/path/to/node_exporter, else looked up in
# PATH (go install github.com/prometheus/node_exporter@v1.12.1). It runs
# with the collectors that read the same sources as ballast ds (diskstats,
# netdev, nfsd, nvme); the ballast agents run their default ds collectors (nvme,
# smartctl, diskstats, nfsd, netdev) with the result cache off
# (--cache-for=0), so that every scrape collects. The fake /dev/nvmeN are
# regular files: ballast's SMART ioctl fails fast and reports
# device_up 0, so the numbers measure parsing and exposition, not drive
# latency. CPU is user+system time from /proc/<pid>/stat over the scrapes.
# The agents are scraped in turn within one loop (one scrape of each per
# round), so that load from other processes on the machine falls on all
# of them alike.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-300}
WORK=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$WORK"; }
trap cleanup EXIT

NE=${NODE_EXPORTER:-$(command -v node_exporter || true)}
[ -x "$NE" ] || { echo "node_exporter not found: set NODE_EXPORTER or go install github.com/prometheus/node_exporter@v1.12.1" >&2; exit 1; }

# ---- fake tree ----
P=$WORK/proc S=$WORK/sys D=$WORK/dev
mkdir -p "$P/net/rpc" "$P/fs/nfsd" "$S/class/nvme" "$S/block" "$D"
: > "$P/diskstats"
for i in $(seq 0 23); do
  c=nvme$i n=nvme${i}n1
  mkdir -p "$S/class/nvme/$c/$n" "$S/block/$n/queue"
  printf 'SAMSUNG MZQL23T8HCLS-00A07\n' > "$S/class/nvme/$c/model"
  printf 'S64HNE0R%04d\n' "$i" > "$S/class/nvme/$c/serial"
  printf 'GDC5602Q\n' > "$S/class/nvme/$c/firmware_rev"
  printf 'live\n' > "$S/class/nvme/$c/state"
  printf '%d\n' "$i" > "$S/class/nvme/$c/cntlid"
  printf '7501476528\n' > "$S/class/nvme/$c/$n/size"
  printf '128\n' > "$S/block/$n/queue/read_ahead_kb"
  : > "$D/$c"
  printf ' 259 %d %s 1%d3456 0 2%d4567890 77%d 9%d876 0 1%d2345678 55%d 0 90%d 13%d 0 0 0 0 1%d 2\n' \
    "$i" "$n" "$i" "$i" "$i" "$i" "$i" "$i" "$i" "$i" "$i" >> "$P/diskstats"
done
{
  echo 'Inter-|   Receive                                                |  Transmit'
  echo ' face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed'
  echo '    lo: 1664039048 1566805 0 0 0 0 0 0 1664039048 1566805 0 0 0 0 0 0'
  for i in $(seq 0 7); do
    echo "  ens$i: 87435458${i}7 103639${i}5 0 3 0 0 0 12 56335256${i} 73214${i} 0 0 0 0 0 0"
  done
} > "$P/net/dev"
cp collector/testdata/fixtures/procfs/nfsd/node-exporter_nfsd "$P/net/rpc/nfsd"
cp collector/testdata/fixtures/procfs/nfsd/pcp_nfsrpc-root-002_pool_stats "$P/fs/nfsd/pool_stats"

# ---- agents ----
go build -o "$WORK/ballast-agent" ./cmd/ballast-agent
go build -o "$WORK/ballast" ./cmd/ballast
DS_FLAGS=(ds --proc-root "$P" --sys-root "$S" --dev-root "$D" --cache-for=0 --log-level error)
"$WORK/ballast-agent" "${DS_FLAGS[@]}" --listen 127.0.0.1:19103 2>"$WORK/agent.log" &
PIDS+=($!); APID=$!
"$WORK/ballast" "${DS_FLAGS[@]}" --listen 127.0.0.1:19101 2>"$WORK/ballast.log" &
PIDS+=($!); BPID=$!
"$NE" --web.listen-address=127.0.0.1:19102 --path.procfs="$P" --path.sysfs="$S" \
  --collector.disable-defaults --collector.diskstats --collector.netdev --collector.nfsd --collector.nvme \
  --log.level=error 2>"$WORK/ne.log" &
PIDS+=($!); NPID=$!

wait_up() { for _ in $(seq 100); do curl -fsS -o /dev/null "$1" 2>/dev/null && return 0; sleep 0.1; done; echo "no answer from $1" >&2; return 1; }
NAMES=("ballast-agent ds" "ballast ds" "node_exporter")
APIDS=("$APID" "$BPID" "$NPID")
URLS=(http://127.0.0.1:19103/metrics http://127.0.0.1:19101/metrics http://127.0.0.1:19102/metrics)
for u in "${URLS[@]}"; do wait_up "$u"; done

ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }
kb() { awk -v k="$2" '$1==k":"{print $2}' "/proc/$1/status"; }
HZ=$(getconf CLK_TCK)

scrape_all() { for u in "${URLS[@]}"; do curl -fsS -H 'Accept-Encoding: gzip' -o /dev/null "$u"; done; }
for _ in 1 2 3 4 5; do scrape_all; done
T0=(); for p in "${APIDS[@]}"; do T0+=("$(ticks "$p")"); done
for _ in $(seq "$N"); do scrape_all; done
T1=(); for p in "${APIDS[@]}"; do T1+=("$(ticks "$p")"); done

echo "scrapes per agent: $N; fake tree: 24 NVMe controllers, 24 namespaces in diskstats, 8 NICs + lo, nfsd"
echo "| agent | CPU ms per scrape | RSS MiB | peak RSS MiB | anon RSS MiB | file RSS MiB | series | bytes (plain) |"
echo "|---|---|---|---|---|---|---|---|"
for i in 0 1 2; do
  pid=${APIDS[$i]} url=${URLS[$i]}
  bytes=$(curl -fsS "$url" | wc -c)
  series=$(curl -fsS "$url" | grep -vc '^#')
  awk -v n="${NAMES[$i]}" -v d=$((T1[i] - T0[i])) -v hz="$HZ" -v N="$N" -v rss="$(kb "$pid" VmRSS)" -v hwm="$(kb "$pid" VmHWM)" \
    -v anon="$(kb "$pid" RssAnon)" -v file="$(kb "$pid" RssFile)" -v b="$bytes" -v s="$series" \
    'BEGIN { printf "| %s | %.3f | %.1f | %.1f | %.1f | %.1f | %d | %d |\n", n, d * 1000 / hz / N, rss / 1024, hwm / 1024, anon / 1024, file / 1024, s, b }'
done
