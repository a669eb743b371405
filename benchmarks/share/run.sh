#!/bin/bash
# The whole pipeline's share of the CPU-bound limit (docs/BENCHMARKS.md, "The CPU-bound
# limit and the whole pipeline's share of it"), the default libjpeg-turbo calls
# (PSIFLOW_TURBOJPEG_CALLS=syscall) against PSIFLOW_TURBOJPEG_CALLS=direct, side by side.
# Each round, under its own flock of /work/tools/bench.lock (so other benchmarks can
# interleave between rounds): decodebench's per-core rate of the val and train transforms
# (default decode, one 3 s round each; the limit is that rate × 2 cores), then
# pipelines/imagefolder.yaml (val) and its train twin, 2 epochs each, in both call modes,
# the order reversed every other round. The pipeline's defaults read with O_DIRECT and
# drop the files' cache, so every run reads cold. Results: OUT/results.tsv, then a summary.
# Usage: benchmarks/share/run.sh [ROUNDS] [DATA] [OUT]
set -eu
cd "$(dirname "$0")/../.."
R=${1:-6} D=${2:-/work/data/mixed1000} B=${3:-/tmp/share}
LOCK=${LOCK:-/work/tools/bench.lock}
mkdir -p "$B"
go build -o "$B/psiflow" ./cmd/psiflow
go build -o "$B/decodebench" ./cmd/decodebench
sed -e 's/resize: 256/random_resized_crop: 224/' -e 's/center_crop: 224/flip: 0.5/' pipelines/imagefolder.yaml > "$B/train.yaml"
: > "$B/results.tsv"
for r in $(seq "$R"); do
  flock "$LOCK" bash -c '
    r=$1 D=$2 B=$3
    for t in val train; do
      nice -n 5 "$B/decodebench" -dir "$D" -files 1000 -rounds 1 -seconds 3 -transform $t -pillow=false > "$B/db-$t-$r.txt" 2>&1
      printf "%s\tlimit\t%s\t-\t%s\n" $r $t "$(awk "\$3==\"psiflow\" && \$4==\"reduced\" {print \$(NF-1)}" "$B/db-$t-$r.txt")" >> "$B/results.tsv"
    done
    order="val:syscall val:direct train:syscall train:direct"
    [ $((r % 2)) = 0 ] && order="train:direct train:syscall val:direct val:syscall"
    for c in $order; do
      t=${c%%:*} m=${c##*:} y=pipelines/imagefolder.yaml
      [ $t = train ] && y="$B/train.yaml"
      PSIFLOW_TURBOJPEG_CALLS=$m DATA="$D" EPOCHS=2 nice -n 5 /usr/bin/time -o "$B/time.txt" -f "%e %U %S %c %w" "$B/psiflow" run -every 0 "$y" > "$B/run-$t-$m-$r.txt" 2>&1
      printf "%s\trun\t%s\t%s\t%s\t%s\n" $r $t $m "$(grep -o "[0-9.]* samples/s" "$B/run-$t-$m-$r.txt" | head -1 | cut -d" " -f1)" "$(cat "$B/time.txt")" >> "$B/results.tsv"
    done' _ "$r" "$D" "$B"
done
/usr/bin/python3 - "$B/results.tsv" <<'PY'
import sys, statistics as st
lim, run = {}, {}
for l in open(sys.argv[1]):
    r = l.rstrip("\n").split("\t")
    if r[1] == "limit":
        lim[(int(r[0]), r[2])] = float(r[4])
    else:
        e, u, s, c, w = map(float, r[5].split())
        run[(int(r[0]), r[2], r[3])] = dict(sps=float(r[4]), cpu=u + s, cs=c + w)
R = sorted({k[0] for k in run})
def f(xs, n=0): return f"{st.median(xs):.{n}f} [{min(xs):.{n}f}–{max(xs):.{n}f}]"
for t in ["val", "train"]:
    L = [lim[(r, t)] for r in R]
    print(f"{t}: per-core rate {f(L, 1)} images per CPU-second, limit {f([2 * x for x in L])} images/s")
    for m in ["syscall", "direct"]:
        x = [run[(r, t, m)] for r in R]
        print(f"  {m:8s} samples/s {f([a['sps'] for a in x])}  share {f([a['sps'] / (2 * lim[(r, t)]) for a, r in zip(x, R)], 2)}"
              f"  per CPU-s {f([2000 / a['cpu'] for a in x])} (÷ rate {f([2000 / a['cpu'] / lim[(r, t)] for a, r in zip(x, R)], 2)})"
              f"  CPU s {f([a['cpu'] for a in x], 2)}  switches/image {f([a['cs'] / 2000 for a in x], 1)}")
    print("  direct ÷ syscall per round: samples/s", f([run[(r, t, 'direct')]['sps'] / run[(r, t, 'syscall')]['sps'] for r in R], 2),
          " CPU", f([run[(r, t, 'direct')]['cpu'] / run[(r, t, 'syscall')]['cpu'] for r in R], 3))
PY
