#!/usr/bin/env bash
# The spike grid: each loader in a memory-limited cgroup next to a co-tenant that
# rises to a peak (85, 90, 95% of the limit) over -ramp, holds it (5, 10, 30 s),
# gives back all but 40% at once and holds that until the loader ends: a trainer's
# evaluation or checkpoint peak. Every cell in every round, the loaders alternating,
# with an alone cell for the wall-time bound (alone + 1.5 × the spike's hold).
#   A  PyTorch DataLoader (benchmarks/peers/dataloader.py, Debian python3-torch)
#   C  bin/psiflow-imagefolder with its defaults
#
# Usage: benchmarks/spike/run.sh [-limits 256M,1G] [-rounds 3] [-timeout 3m]
#          [-epochs 3] [-n 1000] [-ramp 2s] [-peaks 0.85,0.9,0.95] [-holds 5s,10s,30s]
#          [-after 0.4] [-loaders A,C] [-out DIR] [-- extra C flags]
# Needs root (cgroups). Reports: DIR/spike-<limit>.{md,json}; default DIR out/spike.
set -euo pipefail
cd "$(dirname "$0")/../.."

limits=256M,1G rounds=3 timeout=3m epochs=3 n=1000 ramp=2s peaks=0.85,0.9,0.95 holds=5s,10s,30s
after=0.4 loaders=A,C out=out/spike
data=${COTENANT_DATA:-out/cotenant-jpeg}
c_extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    -limits) limits=$2; shift 2 ;;
    -rounds) rounds=$2; shift 2 ;;
    -timeout) timeout=$2; shift 2 ;;
    -epochs) epochs=$2; shift 2 ;;
    -n) n=$2; shift 2 ;;
    -ramp) ramp=$2; shift 2 ;;
    -peaks) peaks=$2; shift 2 ;;
    -holds) holds=$2; shift 2 ;;
    -after) after=$2; shift 2 ;;
    -loaders) loaders=$2; shift 2 ;;
    -out) out=$2; shift 2 ;;
    --) shift; c_extra=("$@"); break ;;
    *) echo "run.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

go build -o bin/psiflow ./cmd/psiflow
go build -o bin/psiflow-imagefolder ./cmd/psiflow-imagefolder
benchmarks/mixed-jpeg.sh "$data" "$n"

shapes=alone
for p in ${peaks//,/ }; do
  for h in ${holds//,/ }; do shapes="$shapes,spike:$p/$h/$after"; done
done
args=()
for l in ${loaders//,/ }; do
  case "$l" in
    A) args+=(-- A=/usr/bin/python3 benchmarks/peers/dataloader.py --data {data} --epochs "$epochs") ;;
    C) args+=(-- C=bin/psiflow-imagefolder -data {data} -epochs "$epochs" "${c_extra[@]}") ;;
    *) echo "run.sh: unknown loader $l (want A or C)" >&2; exit 2 ;;
  esac
done

mkdir -p "$out"
echo "run.sh: $(date -u '+%F %T UTC'), load average $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs, $(git rev-parse --short HEAD)" >&2
status=0
for limit in ${limits//,/ }; do
  # bench exits 1 when a run did not finish: keep going, report the status at the end.
  bin/psiflow bench -data "$data" -limit "$limit" -cotenant-shape "$shapes" -cotenant-ramp "$ramp" \
    -rounds "$rounds" -timeout "$timeout" -warmup 3 -cold \
    -json "$out/spike-$limit.json" -md "$out/spike-$limit.md" "${args[@]}" || status=$?
  echo "run.sh: $limit done $(date -u '+%F %T UTC'), load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
done
exit "$status"
