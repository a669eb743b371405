#!/usr/bin/env bash
# Side-by-side flow benchmarks: alternates psiflow, a hand-written channel
# chain (with and without ctx selects) and go-streams over several rounds in
# one run, then prints the median and range of ns/op for each.
# Usage: scripts/bench-flow.sh [rounds]   (default 8)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-8}
out=$(mktemp)
go test -c -o /tmp/flow.bench ./flow/
for r in $(seq "$rounds"); do
  for b in 'Chain5/psiflow$' 'Chain5/channels$' 'Chain5/channels-ctx$' 'Chain5/go-streams$'; do
    n=1000000; [[ $b == *go-streams* ]] && n=100000
    /tmp/flow.bench -test.run '^$' -test.bench "$b" -test.benchtime ${n}x | grep ns/op >> "$out"
  done
  /tmp/flow.bench -test.run '^$' -test.bench 'BudgetedGraph' -test.benchtime 200000x | grep ns/op >> "$out"
done
python3 - "$out" <<'PY'
import sys, statistics, re, collections
d = collections.defaultdict(list)
for line in open(sys.argv[1]):
    f = line.split()
    d[re.sub(r'-\d+$', '', f[0])].append(float(f[2]))
med = {k: statistics.median(v) for k, v in d.items()}
for k, v in d.items():
    print(f"{k:40s} median {med[k]:9.1f} ns/op  range {min(v):.1f}–{max(v):.1f}  (n={len(v)})")
p = d.get('BenchmarkChain5/psiflow')
for k in ('BenchmarkChain5/channels', 'BenchmarkChain5/channels-ctx', 'BenchmarkChain5/go-streams'):
    if p and k in d:
        r = [a / b for a, b in zip(p, d[k])]  # same round, run back to back
        print(f"psiflow / {k.split('/')[1]}: median of per-round ratios {statistics.median(r):.2f}x (range {min(r):.2f}–{max(r):.2f})")
PY
rm -f "$out"
