#!/usr/bin/env bash
# Makes the co-tenant benchmarks' data once: N JPEGs of mixed sizes in three class
# folders as ImageFolder wants them (a third 500×375, a third 1024×768, the rest
# portrait 375×500; `psiflow gen jpeg` makes one size per call).
# Usage: benchmarks/mixed-jpeg.sh DIR N   (needs bin/psiflow)
# DIR/.complete holds N once made. A DIR that holds another set (a .complete with another
# N, or files without one) is left as it is and the script fails: it never deletes data
# it did not make for this N (a shared set passed as COTENANT_DATA stays intact).
set -euo pipefail
data=$1 n=$2
if [ -f "$data/.complete" ]; then
  have=$(cat "$data/.complete")
  if [ "$have" = "$n" ]; then exit 0; fi
  echo "mixed-jpeg.sh: $data holds $have images ($data/.complete), not $n: pass -n $have or another directory" >&2
  exit 2
fi
if [ -d "$data" ] && [ -n "$(ls -A "$data")" ]; then
  echo "mixed-jpeg.sh: $data is not empty and has no .complete (an unfinished or foreign set): remove it or pass another directory" >&2
  exit 2
fi
third=$((n / 3))
bin/psiflow gen jpeg -out "$data/landscape" -n "$third" -width 500 -height 375
bin/psiflow gen jpeg -out "$data/large" -n "$third" -width 1024 -height 768
bin/psiflow gen jpeg -out "$data/portrait" -n $((n - 2 * third)) -width 375 -height 500
echo "$n" > "$data/.complete"
