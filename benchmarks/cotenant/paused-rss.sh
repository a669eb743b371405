#!/usr/bin/env bash
# The launcher's resident set while it is paused below its floor: bin/psiflow-imagefolder
# (the defaults, -pause-timeout 0) runs in a memory cgroup limited to LIMIT; once it has
# delivered a few batches a co-tenant ("psiflow cotenant") rises to SHARE of the limit and
# holds it; WAIT after the loader's "paused:" line its /proc status (VmRSS, RssAnon,
# RssFile, RssShmem, VmLck) and its cgroup's memory.usage are printed. Everything is
# killed and the cgroup removed at the end. Needs root and cgroup v1 memory (or v2 with
# the memory controller).
#
# Usage: benchmarks/cotenant/paused-rss.sh [-limit 256M] [-share 0.9] [-wait 5] [-rounds 3]
#          [-data DIR] [-- LOADER FLAGS...]
set -euo pipefail
cd "$(dirname "$0")/../.."

limit=256M share=0.9 wait=5 rounds=3 data=${COTENANT_DATA:-out/cotenant-jpeg}
while [ $# -gt 0 ]; do
  case "$1" in
    -limit) limit=$2; shift 2 ;;
    -share) share=$2; shift 2 ;;
    -wait) wait=$2; shift 2 ;;
    -rounds) rounds=$2; shift 2 ;;
    -data) data=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "paused-rss.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
go build -o bin/psiflow ./cmd/psiflow
go build -o bin/psiflow-imagefolder ./cmd/psiflow-imagefolder
benchmarks/mixed-jpeg.sh "$data" 600 >/dev/null

bytes=$(numfmt --from=iec "$limit")
co_bytes=$(awk -v b="$bytes" -v s="$share" 'BEGIN { printf "%d", b * s }')
if [ -d /sys/fs/cgroup/memory ]; then
  root=/sys/fs/cgroup/memory limit_file=memory.limit_in_bytes usage_file=memory.usage_in_bytes
elif grep -qw memory /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
  root=/sys/fs/cgroup limit_file=memory.max usage_file=memory.current
else
  echo "paused-rss.sh: no memory cgroup controller here" >&2; exit 1
fi
kb() { awk -v k="$1" '$1 == k":" { print $2 }' "/proc/$2/status" 2>/dev/null || echo "?"; }
g=
cleanup() {
  if [ -n "$g" ] && [ -d "$g" ]; then
    kill $(cat "$g/cgroup.procs") 2>/dev/null || true
    for _ in $(seq 1 50); do rmdir "$g" 2>/dev/null && break; sleep 0.1; done
  fi
  [ -n "${holder:-}" ] && kill "$holder" 2>/dev/null || true
}
trap cleanup EXIT
for r in $(seq 1 "$rounds"); do
  g="$root/psiflow-pausedrss-$$-$r"
  mkdir "$g"
  echo "$bytes" > "$g/$limit_file"
  log=$(mktemp)
  sh -c 'echo $$ > "$1/cgroup.procs"; shift; exec "$@"' sh "$g" \
    bin/psiflow-imagefolder -data "$data" -epochs 1000 -pause-timeout 0 "$@" >/dev/null 2>"$log" &
  loader=$!
  sleep 3
  exec {co_in}< <(exec sleep 3600 2>/dev/null)
  holder=$!
  sh -c 'echo $$ > "$1/cgroup.procs"; shift; exec "$@"' sh "$g" \
    bin/psiflow cotenant -bytes "$co_bytes" -ramp 2s <&"$co_in" >/dev/null &
  co=$!
  for _ in $(seq 1 300); do grep -q 'paused:' "$log" && break; kill -0 "$loader" 2>/dev/null || break; sleep 0.1; done
  state="paused ${wait}s"
  if ! grep -q 'paused:' "$log"; then
    state="not paused in 30 s"
  fi
  if kill -0 "$loader" 2>/dev/null; then
    sleep "$wait"
  fi
  if ! kill -0 "$loader" 2>/dev/null; then
    echo "round $r: the loader was killed ($state; OOM kills in the group: $(awk '$1 == "oom_kill" { print $2 }' "$g/memory.oom_control" 2>/dev/null || echo ?))"
  else
    lck=$(kb VmLck "$loader")
    printf 'round %d: %s: VmRSS %s kB, RssAnon %s kB, RssFile %s kB, RssShmem %s kB, VmLck %s kB; cgroup usage %d MiB (co-tenant %d MiB)\n' \
      "$r" "$state" "$(kb VmRSS "$loader")" "$(kb RssAnon "$loader")" "$(kb RssFile "$loader")" "$(kb RssShmem "$loader")" "$lck" \
      $(($(cat "$g/$usage_file") >> 20)) $((co_bytes >> 20))
  fi
  kill $(cat "$g/cgroup.procs") "$holder" 2>/dev/null || true
  wait "$loader" "$co" 2>/dev/null || true
  exec {co_in}<&-
  rm -f "$log"
  cleanup
  g= holder=
done
