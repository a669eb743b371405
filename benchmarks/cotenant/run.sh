#!/usr/bin/env bash
# The co-tenant grid: each loader in a memory-limited cgroup next to a
# co-tenant ("psiflow cotenant") that ramps anonymous memory to 0, 50, 70 and 85% of the
# limit over 5 s and holds it until the loader ends; every share in every round, the
# loaders alternating. Variants:
#   A  PyTorch DataLoader (benchmarks/peers/dataloader.py, Debian python3-torch)
#   B  bin/psiflow-imagefolder -memory fixed -pressure=false -direct=false (psiflow before
#      yielding: fixed registered pool, no gate, buffered reads)
#   C  bin/psiflow-imagefolder -memory elastic (gate and elastic memory)
# (B and C run the same command where psiflow-imagefolder has no -memory flag yet.)
#
# Usage: benchmarks/cotenant/run.sh [-limits 256M,1G] [-rounds 5] [-timeout 2m]
#          [-epochs 1] [-n 1000] [-ramp 5s] [-shares 0,0.5,0.7,0.85] [-out DIR]
# Needs root (cgroups). Reports: DIR/cotenant-<limit>.{md,json}; default DIR out/cotenant.
set -euo pipefail
cd "$(dirname "$0")/../.."

limits=256M rounds=5 timeout=2m epochs=1 n=1000 ramp=5s shares=0,0.5,0.7,0.85 out=out/cotenant
data=${COTENANT_DATA:-out/cotenant-jpeg}
while [ $# -gt 0 ]; do
  case "$1" in
    -limits) limits=$2; shift 2 ;;
    -rounds) rounds=$2; shift 2 ;;
    -timeout) timeout=$2; shift 2 ;;
    -epochs) epochs=$2; shift 2 ;;
    -n) n=$2; shift 2 ;;
    -ramp) ramp=$2; shift 2 ;;
    -shares) shares=$2; shift 2 ;;
    -out) out=$2; shift 2 ;;
    *) echo "run.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

go build -o bin/psiflow ./cmd/psiflow
go build -o bin/psiflow-imagefolder ./cmd/psiflow-imagefolder

benchmarks/mixed-jpeg.sh "$data" "$n"

b_flags=() c_flags=()
help=$(bin/psiflow-imagefolder -h 2>&1 || true)
if grep -q -- '-memory' <<<"$help"; then
  b_flags=(-memory fixed -pressure=false -direct=false)
  c_flags=(-memory elastic)
else
  echo "run.sh: bin/psiflow-imagefolder has no -memory flag: B and C run the same command" >&2
fi

mkdir -p "$out"
echo "run.sh: $(date -u '+%F %T UTC'), load average $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs" >&2
status=0
for limit in ${limits//,/ }; do
  # bench exits 1 when a run did not finish (the DataLoader is OOM-killed in most
  # cells): keep going to the next limit and report that status at the end.
  bin/psiflow bench -data "$data" -limit "$limit" -cotenant "$shares" -cotenant-ramp "$ramp" \
    -rounds "$rounds" -timeout "$timeout" -warmup 3 -cold \
    -json "$out/cotenant-$limit.json" -md "$out/cotenant-$limit.md" -- \
    A=/usr/bin/python3 benchmarks/peers/dataloader.py --data {data} --epochs "$epochs" -- \
    B=bin/psiflow-imagefolder -data {data} -epochs "$epochs" "${b_flags[@]}" -- \
    C=bin/psiflow-imagefolder -data {data} -epochs "$epochs" "${c_flags[@]}" || status=$?
done
echo "run.sh: done $(date -u '+%F %T UTC'), load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
exit "$status"
