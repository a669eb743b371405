#!/bin/sh
# Reproduces the table of docs/HOSTILE-INPUT.md (source, flags, leaks): builds the
# programs into a temporary folder, makes each hostile input, runs psiflow on it under a
# time limit and prints one Markdown row per case: the input, the command, the exit
# status and the first line psiflow printed about it. Needs root for the cgroup cases.
# Usage: scripts/hostile.sh [-v]   (-v also runs the reader cases' Go tests verbosely)
set -u
cd "$(dirname "$0")/.."
export CGO_CFLAGS="${CGO_CFLAGS:--O2 -g -Wno-deprecated-declarations}"
T=$(mktemp -d /tmp/psiflow-hostile.XXXXXX)
trap 'rm -rf "$T"' EXIT
go build -o "$T/psiflow" ./cmd/psiflow || exit 1
go build -o "$T/psiflow-imagefolder" ./cmd/psiflow-imagefolder || exit 1
P="$T/psiflow"
IF="$T/psiflow-imagefolder"
"$P" gen jpeg -out "$T/data/class0" -n 8 -width 64 -height 48 >/dev/null || exit 1

# row INPUT EXPECT CMD...: runs CMD (30 s at most) and prints a table row.
row() {
	input=$1; shift
	timeout 30 "$@" >"$T/out" 2>"$T/err" </dev/null
	code=$?
	if [ $code = 0 ]; then
		line=$(grep -h -E 'sharding:|samples in|removed groups' "$T/out" "$T/err" | tr '\n' ' ')
	else
		line=$(grep -m1 -E '^psiflow' "$T/err")
		[ -n "$line" ] || line=$(grep -v -E '^\s*(-|Usage|[a-z]+ (string|value|int))' "$T/err" | grep -m1 .)
	fi
	line=$(printf '%s' "$line" | cut -c1-200 | sed 's/|/\\|/g')
	printf '| %s | `%s` | %s | %s |\n' "$input" "$(echo "$*" | sed "s|$T|T|g" | cut -c1-90)" "$code" "$(echo "$line" | sed "s|$T|T|g")"
}

echo '| input | command | exit | what psiflow says |'
echo '| --- | --- | --- | --- |'

# Datasets
ln -s "$T/data" "$T/link"
row "-data is a symlink to the dataset" "$P" demo -data "$T/link" -pressure=false
mkdir -p "$T/links/a"; ln -s "$T/data/class0" "$T/links/a/class"
row "symlinked class folder" "$P" demo -data "$T/links" -pressure=false
mkdir -p "$T/upper/c"; for f in "$T"/data/class0/*; do b=$(basename "$f" .jpg); cp "$f" "$T/upper/c/$b.JPG"; done
row ".JPG names" "$P" demo -data "$T/upper" -pressure=false
mkdir -p "$T/empty"
row "empty folder" "$P" demo -data "$T/empty" -pressure=false
row "/dev/null as -data" "$P" demo -data /dev/null -pressure=false
mkdir -p "$T/txt"; echo hi > "$T/txt/a.txt"; echo hi > "$T/txt/b.txt"
row "folder of non-images" "$P" demo -data "$T/txt" -pressure=false
mkdir -p "$T/loop/a"; cp "$T/data/class0/"*0.jpg "$T/loop/a/" 2>/dev/null; ln -s .. "$T/loop/a/up"
row "symlink loop" "$P" demo -data "$T/loop" -pressure=false
mkdir -p "$T/dangling"; ln -s missing.jpg "$T/dangling/x.jpg"
row "dangling symlink" "$P" demo -data "$T/dangling" -pressure=false
mkfifo "$T/data/class0/fifo.jpg"
row "FIFO named .jpg in the dataset" "$P" demo -data "$T/data" -pressure=false
rm -f "$T/data/class0/fifo.jpg"
row "RANK=1 WORLD_SIZE=2" env RANK=1 WORLD_SIZE=2 "$P" demo -data "$T/data" -pressure=false
row "RANK=2 WORLD_SIZE=2" env RANK=2 WORLD_SIZE=2 "$P" demo -data "$T/data" -pressure=false
row "WORLD_SIZE=two" env WORLD_SIZE=two "$P" demo -data "$T/data" -pressure=false
row "PSIFLOW_IO=bogus" env PSIFLOW_IO=bogus "$P" demo -data "$T/data" -pressure=false

# Flags
for v in NaN Inf 1e30 9999999999G -7; do row "-memory-max $v" "$P" cgroup run -memory-max "$v" -- /bin/true; done
for v in NaN -1 1e12; do row "-cpus $v" "$P" cgroup run -cpus "$v" -- /bin/true; done
row "-pids-max -7" "$P" cgroup run -pids-max -7 -- /bin/true
row "-adaptive-cpus 4:1" "$P" cgroup run -adaptive-cpus 4:1 -- /bin/true
row "demo -budget 9999999999G" "$P" demo -budget 9999999999G
row "demo -workers -1" "$P" demo -workers -1
row "gen jpeg -width 100000" "$P" gen jpeg -width 100000 -out "$T/g"
row "bench -rounds 0" "$P" bench -rounds 0 -- a=/bin/true
row "pressure watch -interval 0s" "$P" pressure watch -interval 0s
for a in "-epochs 0" "-workers -1" "-limit -1" "-budget 9999999999G" "-crop 100000"; do
	# shellcheck disable=SC2086
	row "psiflow-imagefolder $a" "$IF" -data "$T/data" $a
done

# Leaks (root: cgroups)
if [ "$(id -u)" = 0 ]; then
	cat > "$T/good.sh" <<'EOS'
#!/bin/sh
echo '{"event":"batch","n":10,"t":1}'
echo '{"event":"done","samples":10,"t":2}'
EOS
	chmod +x "$T/good.sh"
	row "bench, one loader fails" "$P" bench -rounds 1 -warmup 0 -timeout 30s -- good="$T/good.sh" -- bad=/bin/sh -c "exit 3"
	name=hostile-kill-$$
	"$P" cgroup run -name "$name" -- /bin/sh -c "sleep 600 & echo \$! \$\$ > $T/pids.tmp && mv $T/pids.tmp $T/pids; wait" >/dev/null 2>&1 &
	launcher=$!
	i=0; while [ ! -f "$T/pids" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done
	kill -9 $launcher; wait $launcher 2>/dev/null
	i=0; left=1
	while [ $i -lt 300 ]; do
		left=0
		for p in $(cat "$T/pids"); do [ -d /proc/$p ] && ! grep -q '^State:.*Z' /proc/$p/status 2>/dev/null && left=1; done
		for d in /sys/fs/cgroup/unified/psiflow/$name /sys/fs/cgroup/memory/psiflow/$name /sys/fs/cgroup/psiflow/$name; do [ -d "$d" ] && left=1; done
		[ $left = 0 ] && break
		sleep 0.1; i=$((i+1))
	done
	printf '| SIGKILL of `cgroup run` (command with a child) | `kill -9 <launcher>` | - | %s |\n' \
		"$([ $left = 0 ] && echo "command, its child and the group gone after $((i*100)) ms" || echo "LEFT BEHIND after 30 s")"
fi

# Readers: the tar, Parquet and Arrow cases are Go tests (they build the shards).
if [ "${1:-}" = -v ]; then
	go test -count=1 -v -run 'TestTar|TestDir|TestUnknownIOSwitch|Fuzz' ./source
else
	go test -count=1 -run 'TestTar|TestDir|TestUnknownIOSwitch|Fuzz' ./source >/dev/null && echo && echo "reader cases (go test -run 'TestTar|TestDir|Fuzz' ./source): pass"
fi
