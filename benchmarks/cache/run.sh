#!/usr/bin/env bash
# The sample cache against the uncached pipeline and PyTorch's DataLoader: three
# epochs over the same folder, each loader in a fresh cgroup, cold page cache,
# alternating loaders within each round (psiflow bench). Prints per-epoch
# samples/s (from each loader's "epoch N: R samples/s" lines) and the harness table.
#
# Usage (root, from the repository root): benchmarks/cache/run.sh DIR [ROUNDS] [LIMIT]
#   DIR: an image folder in ImageFolder layout (e.g. bin/psiflow gen jpeg -out DIR/class0 -n 1000)
#   LIMIT: the cgroup memory limit of each run (default 1G; "none" for no limit)
set -euo pipefail
data=${1:?usage: benchmarks/cache/run.sh DIR [ROUNDS] [LIMIT]}
rounds=${2:-3}
limit=${3:-1G}
out=${OUT:-out/bench-cache}
mkdir -p "$out" bin
go build -o bin/psiflow ./cmd/psiflow
go build -o bin/psiflow-imagefolder ./cmd/psiflow-imagefolder
status=0
bin/psiflow bench -data "$data" -limit "$limit" -rounds "$rounds" -cold -timeout 10m -json "$out/report.json" -- \
  cached=bin/psiflow-imagefolder -data {data} -epochs 3 -cache decoded -- \
  uncached=bin/psiflow-imagefolder -data {data} -epochs 3 -- \
  dataloader=/usr/bin/python3 benchmarks/peers/dataloader.py --data {data} --epochs 3 || status=$?
python3 benchmarks/cache/epochs.py "$out/report.json"
exit $status
