#!/usr/bin/env bash
# The trainer grid: a PyTorch training loop (benchmarks/peers/trainer.py: a small
# model, forward, backward and SGD on every batch) holding its own ballast at 50, 70
# and 85% of the cgroup's limit, fed by psiflow's Python loader (python/psiflow over
# `psiflow serve`, its defaults) or by torch's DataLoader (2 workers); every cell in
# every round, the two alternating, with an alone cell (no ballast) for "× alone".
#
# Usage: benchmarks/trainer/run.sh [-limit 2G] [-rounds 3] [-timeout 5m] [-epochs 3]
#          [-n 1000] [-ballasts 0.5,0.7,0.85] [-out DIR] [-- extra psiflow serve flags]
# Needs root (cgroups). Reports: DIR/trainer-<limit>.{md,json}; default DIR out/trainer.
set -euo pipefail
cd "$(dirname "$0")/../.."

limit=2G rounds=3 timeout=5m epochs=3 n=1000 ballasts=0.5,0.7,0.85 out=out/trainer
data=${COTENANT_DATA:-out/cotenant-jpeg}
serve=()
while [ $# -gt 0 ]; do
  case "$1" in
    -limit) limit=$2; shift 2 ;;
    -rounds) rounds=$2; shift 2 ;;
    -timeout) timeout=$2; shift 2 ;;
    -epochs) epochs=$2; shift 2 ;;
    -n) n=$2; shift 2 ;;
    -ballasts) ballasts=$2; shift 2 ;;
    -out) out=$2; shift 2 ;;
    --) shift; for f in "$@"; do serve+=(--serve-arg="$f"); done; break ;;
    *) echo "run.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

go build -o bin/psiflow ./cmd/psiflow
benchmarks/mixed-jpeg.sh "$data" "$n"

shapes=alone
for b in ${ballasts//,/ }; do shapes="$shapes,trainer:$b"; done
mkdir -p "$out"
echo "run.sh: $(date -u '+%F %T UTC'), load average $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs, $(git rev-parse --short HEAD)" >&2
status=0
bin/psiflow bench -data "$data" -limit "$limit" -cotenant-shape "$shapes" \
  -rounds "$rounds" -timeout "$timeout" -warmup 3 -cold \
  -json "$out/trainer-$limit.json" -md "$out/trainer-$limit.md" -- \
  psiflow=/usr/bin/python3 benchmarks/peers/trainer.py --loader psiflow --data {data} --epochs "$epochs" --ballast {ballast} --psiflow bin/psiflow "${serve[@]}" -- \
  dataloader=/usr/bin/python3 benchmarks/peers/trainer.py --loader dataloader --data {data} --epochs "$epochs" --ballast {ballast} || status=$?
echo "run.sh: done $(date -u '+%F %T UTC'), load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
exit "$status"
