#!/usr/bin/env bash
# The monitor's level against the memory.pressure totals: a starving
# cgroup (a co-tenant holding most of the limit, readers looping over a file whose page
# cache cannot fit) watched by `psiflow pressure watch`, which reports the level
# distribution, the totals' stall shares and their agreement interval by interval.
#
# Usage: benchmarks/monitor/run.sh [-limit 256MiB] [-cotenant 200M] [-readers 1]
#          [-duration 30s] [-file-mib 150]
# Needs root (cgroups, drop_caches).
set -euo pipefail
cd "$(dirname "$0")/../.."

limit=256MiB cotenant=200M readers=1 duration=30s file_mib=150
while [ $# -gt 0 ]; do
  case "$1" in
    -limit) limit=$2; shift 2 ;;
    -cotenant) cotenant=$2; shift 2 ;;
    -readers) readers=$2; shift 2 ;;
    -duration) duration=$2; shift 2 ;;
    -file-mib) file_mib=$2; shift 2 ;;
    -inside) inside=1; shift ;;
    *) echo "run.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

if [ -z "${inside:-}" ]; then
  go build -o bin/psiflow ./cmd/psiflow
  mkdir -p out/monitor
  file=out/monitor/stream-${file_mib}MiB.bin
  [ -f "$file" ] || head -c "${file_mib}M" /dev/urandom > "$file"
  echo "run.sh: $(date -u '+%F %T UTC'), load average $(cut -d' ' -f1-3 /proc/loadavg); limit $limit, co-tenant $cotenant, $readers reader(s) of $file_mib MiB" >&2
  exec bin/psiflow cgroup run -memory-max "$limit" -- "$0" -cotenant "$cotenant" -readers "$readers" -duration "$duration" -file-mib "$file_mib" -inside
fi

file=out/monitor/stream-${file_mib}MiB.bin
sleep 3600 | bin/psiflow cotenant -bytes "$cotenant" -ramp 1s > /dev/null 2>&1 &
sleep 2
sync; echo 1 > /proc/sys/vm/drop_caches   # the file's cache is charged to whoever reads it next
pids=()
for _ in $(seq "$readers"); do
  ( while true; do cat "$file" > /dev/null; done ) &
  pids+=($!)
done
sleep 2
bin/psiflow pressure watch -duration "$duration" -interval 1s
kill "${pids[@]}" 2>/dev/null || true
pkill -P $$ 2>/dev/null || true
