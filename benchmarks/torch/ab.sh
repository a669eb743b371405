#!/bin/sh
# make bench-torch's loaders for two builds side by side: BASE (another tree with its
# bin/psiflow, bin/psiflow-imagefolder and python/, e.g. main before a change) as base-*,
# this tree as new-*, each pair back to back in every round, the order reversed every
# other round, cold page cache, torch's libraries prewarmed (see the Makefile's
# bench-torch). Build both trees first (go build -o bin/psiflow ./cmd/psiflow; the same
# for ./cmd/psiflow-imagefolder). Run it under the bench lock:
#   flock /work/tools/bench.lock nice -n 5 benchmarks/torch/ab.sh BASE DATA [ROUNDS] [epochs]
# "epochs" runs the multi-epoch set instead: 3 epochs of the val loop without the model,
# without a cache and with -cache encoded. Results: docs/BENCHMARKS.md
# ("psiflow.DataLoader against torch's DataLoader").
set -eu
base=$1 data=$2 rounds=${3:-3} mode=${4:-one}
L="/usr/bin/python3 python/bench/loop.py"
BL="/usr/bin/python3 $base/python/bench/loop.py"
prewarm="/usr/bin/python3 python/bench/loop.py --loader prewarm --data {data} --read bin/psiflow --read bin/psiflow-imagefolder --read $base/bin/psiflow --read $base/bin/psiflow-imagefolder"
if [ "$mode" = epochs ]; then
  E="--loader psiflow --transform val --model none --epochs 3 --data {data}"
  exec ./bin/psiflow bench -data "$data" -limit none -rounds "$rounds" -cold -timeout 3m -baseline base-3ep -json out/torch-ab-epochs.json -prewarm "$prewarm" -- \
    base-3ep=$BL $E --psiflow "$base/bin/psiflow" -- \
    new-3ep=$L $E --psiflow bin/psiflow -- \
    base-3ep-cache=$BL $E --psiflow "$base/bin/psiflow" --serve-arg=-cache --serve-arg=encoded -- \
    new-3ep-cache=$L $E --psiflow bin/psiflow --serve-arg=-cache --serve-arg=encoded
fi
T="-shuffle -ordered -random-resized-crop 224 -flip 0.5 -normalize imagenet"
exec ./bin/psiflow bench -data "$data" -limit none -rounds "$rounds" -cold -timeout 2m -baseline dataloader-val -json out/torch-ab.json -prewarm "$prewarm" -- \
  torch-only=$L --loader none --data {data} -- \
  dataloader-val=$L --loader dataloader --transform val --data {data} -- \
  base-val=$BL --loader psiflow --transform val --data {data} --psiflow "$base/bin/psiflow" -- \
  new-val=$L --loader psiflow --transform val --data {data} --psiflow bin/psiflow -- \
  dataloader-train=$L --loader dataloader --transform train --data {data} -- \
  base-train=$BL --loader psiflow --transform train --data {data} --psiflow "$base/bin/psiflow" -- \
  new-train=$L --loader psiflow --transform train --data {data} --psiflow bin/psiflow -- \
  base-loop=$BL --loader psiflow --transform val --model none --data {data} --psiflow "$base/bin/psiflow" -- \
  new-loop=$L --loader psiflow --transform val --model none --data {data} --psiflow bin/psiflow -- \
  go-val=bin/psiflow-imagefolder -data {data} -shuffle -ordered -- \
  base-go-train="$base/bin/psiflow-imagefolder" -data {data} $T -- \
  new-go-train=bin/psiflow-imagefolder -data {data} $T
