#!/bin/bash
# Metrics overhead: psiflow demo -data over the same folder, metrics off and on
# (served, and scraped every second by a real Prometheus), alternating. Run from the
# repository root after make build: deploy/bench/metrics-overhead.sh DIR PAIRS EPOCHS
set -u
DATA=${1:-/tmp/obs-jpeg}; PAIRS=${2:-8}; EPOCHS=${3:-3}
dir=$(mktemp -d)
cat > $dir/p.yml <<EOC
global: {scrape_interval: 1s, scrape_timeout: 1s}
scrape_configs: [{job_name: psiflow, static_configs: [{targets: ["127.0.0.1:19470"]}]}]
EOC
prometheus --config.file=$dir/p.yml --storage.tsdb.path=$dir/data --web.listen-address=127.0.0.1:19471 --log.level=error >/dev/null 2>&1 &
ppid=$!
trap 'kill $ppid; wait $ppid 2>/dev/null; rm -rf $dir' EXIT
sleep 3
for i in $(seq $PAIRS); do
  for mode in off on; do
    args=()
    [ $mode = on ] && args=(-metrics 127.0.0.1:19470)
    r=$(bin/psiflow demo -data $DATA -epochs $EPOCHS -workers 2 -pressure=false "${args[@]}" | grep -oE '[0-9]+ samples/s' | grep -oE '^[0-9]+')
    echo "$i $mode $r"
  done
done
curl -s "http://127.0.0.1:19471/api/v1/query?query=up" | head -c 300; echo
