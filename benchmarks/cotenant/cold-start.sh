#!/usr/bin/env bash
# A cold start beside a co-tenant: the binaries' pages are evicted from the page cache
# first (posix_fadvise DONTNEED; fincore shows what is left), so the loader's cgroup is
# charged for them as it runs (and for its locked text). In a memory cgroup limited to
# LIMIT, bin/psiflow-imagefolder (the defaults) runs EPOCHS epochs while a co-tenant
# ("psiflow cotenant") ramps to SHARE of the limit in 5 s and holds it. Per round: the
# binary's MiB in core before, the loader's exit status and wall time (1 s resolution),
# the group's OOM kills, whether the co-tenant survived, memory.stat 3 s in, the number of
# pauses and the loader's pause, resume and epoch lines. Needs root and cgroup v1 memory.
#
# Usage: benchmarks/cotenant/cold-start.sh [-limit 256M] [-share 0.7] [-epochs 4]
#          [-rounds 3] [-data DIR] [-bin DIR] [-- LOADER FLAGS...]
set -uo pipefail
cd "$(dirname "$0")/../.."
limit=256M share=0.7 epochs=4 rounds=3 data=${COTENANT_DATA:-out/cotenant-jpeg} bin=
while [ $# -gt 0 ]; do
  case "$1" in
    -limit) limit=$2; shift 2 ;;
    -share) share=$2; shift 2 ;;
    -epochs) epochs=$2; shift 2 ;;
    -rounds) rounds=$2; shift 2 ;;
    -data) data=$2; shift 2 ;;
    -bin) bin=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "cold-start.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
root=/sys/fs/cgroup/memory
[ -d "$root" ] || { echo "cold-start.sh: needs the cgroup v1 memory controller at $root" >&2; exit 1; }
if [ -z "$bin" ]; then
  go build -o bin/psiflow ./cmd/psiflow && go build -o bin/psiflow-imagefolder ./cmd/psiflow-imagefolder || exit 1
  bin=bin
fi
n=600
[ -f "$data/.complete" ] && n=$(cat "$data/.complete")
benchmarks/mixed-jpeg.sh "$data" "$n" >/dev/null || exit 1
bytes=$(numfmt --from=iec "$limit")
co_bytes=$(awk -v b="$bytes" -v s="$share" 'BEGIN { printf "%d", b * s }')
evict() { /usr/bin/python3 -c 'import os, sys
for p in sys.argv[1:]:
    fd = os.open(p, os.O_RDONLY); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED); os.close(fd)' "$@"; }
g= holder= co=
cleanup() {
  [ -n "$co" ] && kill "$co" 2>/dev/null
  [ -n "$holder" ] && kill "$holder" 2>/dev/null
  if [ -n "$g" ] && [ -d "$g" ]; then
    kill $(cat "$g/cgroup.procs") 2>/dev/null
    for _ in $(seq 1 50); do rmdir "$g" 2>/dev/null && break; sleep 0.1; done
  fi
}
trap cleanup EXIT
for r in $(seq 1 "$rounds"); do
  evict "$bin/psiflow-imagefolder" "$bin/psiflow"
  incore=$(fincore -n -b -o RES "$bin/psiflow-imagefolder" | awk '{ print int($1 / 1048576) }')
  g=$root/psiflow-coldstart-$$-$r
  mkdir "$g" && echo "$bytes" > "$g/memory.limit_in_bytes"
  log=$(mktemp)
  start=$(date +%s)
  sh -c 'echo $$ > "$1/cgroup.procs"; shift; exec "$@"' sh "$g" \
    "$bin/psiflow-imagefolder" -data "$data" -epochs "$epochs" "$@" >/dev/null 2>"$log" &
  loader=$!
  exec {co_in}< <(exec sleep 3600 2>/dev/null)
  holder=$!
  sh -c 'echo $$ > "$1/cgroup.procs"; shift; exec "$@"' sh "$g" \
    "$bin/psiflow" cotenant -bytes "$co_bytes" -ramp 5s <&"$co_in" >/dev/null 2>&1 &
  co=$!
  (sleep 3; awk '$1 ~ /^total_(cache|rss|mapped_file|unevictable)$/ { printf "%s=%dM ", $1, $2 / 1048576 }' "$g/memory.stat" > "$log.stat") &
  stat=$!
  wait "$loader"; rc=$?
  wall=$(($(date +%s) - start))
  oom=$(awk '$1 == "oom_kill" { print $2 }' "$g/memory.oom_control")
  st=$(awk '$1 == "State:" { print $2 }' "/proc/$co/status" 2>/dev/null)
  fate=survived; { [ -n "$st" ] && [ "$st" != Z ]; } || fate=died
  wait "$stat"
  printf 'round %d: %s MiB of the binary in core before; loader exit %d after %d s; OOM kills %s; co-tenant %s; memory.stat 3 s in: %s; pauses %d\n' \
    "$r" "$incore" "$rc" "$wall" "$oom" "$fate" "$(cat "$log.stat" 2>/dev/null)" "$(grep -c 'paused:' "$log")"
  grep -E 'paused:|resumed after|epoch [0-9]+:|below its floor|psiflow-imagefolder: .*(error|stopp)' "$log" | sed 's/^/    /'
  kill "$co" "$holder" 2>/dev/null; wait "$co" 2>/dev/null
  exec {co_in}<&-
  rm -f "$log" "$log.stat"
  cleanup
  g= holder= co=
done
