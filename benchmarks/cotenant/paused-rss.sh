#!/usr/bin/env bash
# The launcher's resident set while it is paused below its floor: bin/psiflow-imagefolder
# (the defaults, -pause-timeout 0) runs in a memory cgroup limited to LIMIT; once it has
# delivered a few batches a co-tenant ("psiflow cotenant") rises to SHARE of the limit and
# holds it. From the loader's "paused:" line on, its /proc status is sampled every 0.1 s
# for WAIT seconds (or until it dies): per round, the number of samples, VmRSS min,
# median and max, the medians of RssAnon, RssFile, VmPin and VmLck, the group's
# memory usage at the end, every VmRSS sample in order, and the median and max of the
# pause's first second (10 samples) and of the rest apart; a loader killed while
# paused gets its last sample printed with the group's OOM kill count. VmPin counts
# the registered read pool once per ring that registered it (two readers: twice). Everything is killed and the cgroup removed at the
# end. Needs root and cgroup v1 memory (or v2 with the memory controller).
#
# -bin DIR runs DIR/psiflow and DIR/psiflow-imagefolder (e.g. binaries built from an
# older commit, for a side-by-side run) instead of building them into bin/. A data folder
# already made by benchmarks/mixed-jpeg.sh (a .complete file) is used as it is, whatever
# its size (COTENANT_DATA=/work/data/mixed1000); else 600 mixed JPEGs are made there
# (with bin/psiflow).
#
# Usage: benchmarks/cotenant/paused-rss.sh [-limit 256M] [-share 0.9] [-wait 5] [-rounds 3]
#          [-data DIR] [-bin DIR] [-- LOADER FLAGS...]
set -euo pipefail
cd "$(dirname "$0")/../.."

limit=256M share=0.9 wait=5 rounds=3 data=${COTENANT_DATA:-out/cotenant-jpeg} bin=
while [ $# -gt 0 ]; do
  case "$1" in
    -limit) limit=$2; shift 2 ;;
    -share) share=$2; shift 2 ;;
    -wait) wait=$2; shift 2 ;;
    -rounds) rounds=$2; shift 2 ;;
    -data) data=$2; shift 2 ;;
    -bin) bin=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "paused-rss.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
if [ -z "$bin" ]; then
  go build -o bin/psiflow ./cmd/psiflow
  go build -o bin/psiflow-imagefolder ./cmd/psiflow-imagefolder
  bin=bin
fi
# A complete set already there (COTENANT_DATA, or the grids' 1000) is used as it is.
n=600
[ -f "$data/.complete" ] && n=$(cat "$data/.complete")
benchmarks/mixed-jpeg.sh "$data" "$n" >/dev/null

bytes=$(numfmt --from=iec "$limit")
co_bytes=$(awk -v b="$bytes" -v s="$share" 'BEGIN { printf "%d", b * s }')
if [ -d /sys/fs/cgroup/memory ]; then
  root=/sys/fs/cgroup/memory limit_file=memory.limit_in_bytes usage_file=memory.usage_in_bytes
elif grep -qw memory /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
  root=/sys/fs/cgroup limit_file=memory.max usage_file=memory.current
else
  echo "paused-rss.sh: no memory cgroup controller here" >&2; exit 1
fi
# alive PID: the process runs (a killed child not yet waited for is a zombie, which
# kill -0 still finds).
alive() { local st; st=$(awk '$1 == "State:" { print $2 }' "/proc/$1/status" 2>/dev/null); [ -n "$st" ] && [ "$st" != Z ]; }
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
    "$bin/psiflow-imagefolder" -data "$data" -epochs 1000 -pause-timeout 0 "$@" >/dev/null 2>"$log" &
  loader=$!
  sleep 3
  exec {co_in}< <(exec sleep 3600 2>/dev/null)
  holder=$!
  sh -c 'echo $$ > "$1/cgroup.procs"; shift; exec "$@"' sh "$g" \
    "$bin/psiflow" cotenant -bytes "$co_bytes" -ramp 2s <&"$co_in" >/dev/null &
  co=$!
  for _ in $(seq 1 300); do grep -q 'paused:' "$log" && break; alive "$loader" || break; sleep 0.1; done
  samples=$(mktemp)
  if grep -q 'paused:' "$log"; then
    state="paused"
    end=$(awk -v w="$wait" 'BEGIN { print w * 10 }')
    for _ in $(seq 1 "$end"); do
      line=$(awk '$1 ~ /^(VmRSS|RssAnon|RssFile|VmPin|VmLck):$/ { v[$1] = $2 }
        END { if (v["VmRSS:"] != "") print v["VmRSS:"], v["RssAnon:"], v["RssFile:"], v["VmPin:"], v["VmLck:"] }' \
        "/proc/$loader/status" 2>/dev/null || true)
      [ -n "$line" ] || break
      echo "$line" >> "$samples"
      sleep 0.1
    done
  else
    state="not paused in 30 s"
  fi
  n=$(wc -l < "$samples")
  if ! alive "$loader"; then
    printf 'round %d: the loader was killed (%s; %d samples; OOM kills in the group: %s); last sample: VmRSS %s kB, RssAnon %s kB, RssFile %s kB, VmPin %s kB, VmLck %s kB\n' \
      "$r" "$state" "$n" "$(awk '$1 == "oom_kill" { print $2 }' "$g/memory.oom_control" 2>/dev/null || echo ?)" \
      $(tail -n 1 "$samples" 2>/dev/null | grep . || echo "? ? ? ? ?")
  elif [ "$n" -gt 0 ]; then
    # Column c's median (and min, max for VmRSS) over the samples.
    med() { sort -n -k"$1","$1" "$samples" | awk -v c="$1" '{ v[NR] = $c } END { print v[int((NR + 1) / 2)] }'; }
    printf 'round %d: paused %d samples over %ss: VmRSS min %s median %s max %s kB; medians RssAnon %s kB, RssFile %s kB, VmPin %s kB, VmLck %s kB; cgroup usage %d MiB (co-tenant %d MiB)\n' \
      "$r" "$n" "$wait" "$(sort -n "$samples" | head -n 1 | cut -d' ' -f1)" "$(med 1)" "$(sort -n "$samples" | tail -n 1 | cut -d' ' -f1)" \
      "$(med 2)" "$(med 3)" "$(med 4)" "$(med 5)" $(($(cat "$g/$usage_file") >> 20)) $((co_bytes >> 20))
  else
    echo "round $r: $state"
  fi
  [ "$n" -gt 0 ] && echo "  VmRSS from the pause line on, every sample (MiB): $(awk '{ printf "%.1f ", $1 / 1024 }' "$samples")"
  # The pause's first second (the first 10 samples) and what follows, apart.
  [ "$n" -gt 0 ] && awk '{ v[NR] = $1 / 1024 } END {
      split("", a); split("", b); na = nb = 0
      for (i = 1; i <= NR; i++) if (i <= 10) a[++na] = v[i]; else b[++nb] = v[i]
      printf "  VmRSS in the first second (MiB): median %s max %s; after it: median %s max %s\n", med(a, na), mx(a, na), med(b, nb), mx(b, nb) }
    function med(x, k,   i, j, t) { if (k == 0) return "-"; for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (x[j] < x[i]) { t = x[i]; x[i] = x[j]; x[j] = t }
      return sprintf("%.1f", x[int((k + 1) / 2)]) }
    function mx(x, k,   i, m) { if (k == 0) return "-"; m = x[1]; for (i = 2; i <= k; i++) if (x[i] > m) m = x[i]; return sprintf("%.1f", m) }' "$samples"
  rm -f "$samples"
  kill $(cat "$g/cgroup.procs") "$holder" 2>/dev/null || true
  wait "$loader" "$co" 2>/dev/null || true
  exec {co_in}<&-
  rm -f "$log"
  cleanup
  g= holder=
done
