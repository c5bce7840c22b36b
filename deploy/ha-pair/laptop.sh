#!/bin/sh
# Laptop trial of an HA pair: one etcd and two mds on 127.0.0.1 with two data
# dirs. Needs etcd (Debian: apt-get install etcd-server) and bin/ballast
# (make build). Ctrl-C stops everything. Try:
#   curl -s 127.0.0.1:9750/api/v1/status/leader; curl -s 127.0.0.1:9760/api/v1/status/leader
#   kill -STOP <pid of the leader>   # the other leads within lease_ttl
set -eu
dir=${1:-./ha-trial}
mkdir -p "$dir/etcd" "$dir/a" "$dir/b"
etcd --name trial --data-dir "$dir/etcd" \
  --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
  --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
  --initial-cluster trial=http://127.0.0.1:2380 --log-level warn &
for n in a b; do
  port=9750; [ "$n" = b ] && port=9760
  cat > "$dir/$n.yml" <<EOC
role: mds
listen: 127.0.0.1:$port
data_dir: $dir/$n
ha:
  etcd_endpoints: [http://127.0.0.1:2379]
  name: mds-$n
  lease_ttl: 4s
EOC
  bin/ballast mds --config "$dir/$n.yml" &
done
trap 'kill 0' INT TERM EXIT
wait
