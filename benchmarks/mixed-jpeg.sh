#!/usr/bin/env bash
# Makes the co-tenant benchmarks' data once: N JPEGs of mixed sizes in three class
# folders as ImageFolder wants them (a third 500×375, a third 1024×768, the rest
# portrait 375×500; `psiflow gen jpeg` makes one size per call).
# Usage: benchmarks/mixed-jpeg.sh DIR N   (needs bin/psiflow)
set -euo pipefail
data=$1 n=$2
if [ ! -f "$data/.complete" ] || [ "$(cat "$data/.complete")" != "$n" ]; then
  rm -rf "$data"
  third=$((n / 3))
  bin/psiflow gen jpeg -out "$data/landscape" -n "$third" -width 500 -height 375
  bin/psiflow gen jpeg -out "$data/large" -n "$third" -width 1024 -height 768
  bin/psiflow gen jpeg -out "$data/portrait" -n $((n - 2 * third)) -width 375 -height 500
  echo "$n" > "$data/.complete"
fi
