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
	[ -n "$line" ] || line=$(grep -m1 -E 'psiflow|fatal|oom|RSS|samples' "$T/out" "$T/err" | head -c 300 | tr '\n' ' ')
	# T first, then the cut: a path cut short would escape the substitution
	line=$(printf '%s' "$line" | sed "s|$T|T|g" | cut -c1-200 | sed 's/|/\\|/g')
	printf '| %s | `%s` | %s | %s |\n' "$input" "$(printf '%s' "$*" | sed "s|$T|T|g" | cut -c1-90)" "$code" "$(printf '%s' "$line" | sed "s|$T|T|g")"
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

# Signals, limits and silent loss: the second table of docs/HOSTILE-INPUT.md.
echo
echo '| case | command | exit | what psiflow says |'
echo '| --- | --- | --- | --- |'
"$P" gen jpeg -out "$T/big/cat" -n 100 -width 500 -height 375 >/dev/null || exit 1
"$P" gen jpeg -out "$T/big/dog" -n 100 -width 500 -height 375 >/dev/null || exit 1
"$P" gen jpeg -out "$T/twenty/c" -n 20 -width 64 -height 48 >/dev/null || exit 1
ms() { echo $(( $(date +%s%N) / 1000000 )); }

# stopsig SIG CMD...: starts CMD, waits for its first progress line, sends SIG and
# prints how long it took to end, its exit status and its last line on stderr.
stopsig() {
	sig=$1; shift
	# Emptied first: the grep below must not see the last case's progress line
	# (a SIGINT sent before psiflow's handler is installed is lost, since sh
	# starts background commands with SIGINT ignored).
	: >"$T/out"
	"$@" >"$T/out" 2>"$T/err" </dev/null &
	pid=$!
	i=0; while ! grep -q 'samples/s' "$T/out" && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done
	t0=$(ms); kill -"$sig" $pid; wait $pid; code=$?; t1=$(ms)
	printf '| SIG%s to `%s` | `kill -%s` | %s | ended %s ms after the signal: %s |\n' "$sig" "$(echo "$*" | sed "s|$T|T|g" | cut -c1-60)" "$sig" "$code" "$((t1-t0))" \
		"$(tail -n1 "$T/err" | cut -c1-160 | sed "s|$T|T|g; s/|/\\\\|/g")"
}
stopsig TERM "$P" run -every 100ms -set source.items=1000000000 demo
stopsig INT "$P" run -every 100ms -set source.items=1000000000 demo
stopsig TERM env DATA="$T/big" "$P" run -every 100ms -set epochs=1000 imagefolder

# Virtual-memory limits (ulimit -v).
for v in 524288 1048576 1572864 2097152 4194304; do
	row "ulimit -v $((v/1024)) MiB, run imagefolder" sh -c "ulimit -v $v && DATA=$T/big exec $P run -every 0 imagefolder"
done
row "ulimit -v 4096 MiB, demo -data" sh -c "ulimit -v 4194304 && exec $P demo -data $T/big"

# Tar shards.
"$P" gen tar -out "$T/tar" -shards 3 -samples 50 -width 64 -height 48 >/dev/null || exit 1
truncate -s 100000 "$T/tar/shard-000001.tar"
row "tar shard cut mid-member, skip_bad" env DATA="$T/tar" "$P" run -every 0 -set source.skip_bad=true webdataset
grep -h 'skipped' "$T/err" | head -1 | sed "s|$T|T|g; s/^/    /"
mkdir -p "$T/notar" && (cd "$T/notar" && cp "$T/data/class0/00000000.jpg" s1.jpg && echo 1 > s0.cls && echo 1 > s1.cls && tar cf a.tar s0.cls s1.jpg s1.cls && rm s0.cls s1.jpg s1.cls)
row "tar sample without its image" env DATA="$T/notar" "$P" run -every 0 -set source.shuffle=false webdataset

# Files that change after the list is taken: 50 of T/big's 200 files are removed
# or cut to 300 bytes once the run's first progress line is out (10 epochs, so
# the later epochs meet them whatever the first had read), under decode's
# on_error: stop (the default) and skip. The row gives the exit status, the
# samples and skips the summary counted and the first line naming a file.
# changerow CASE rm|cut ARGS...
changerow() {
	input=$1; what=$2; shift 2
	rm -rf "$T/chg" && cp -r "$T/big" "$T/chg"
	: >"$T/out"
	env DATA="$T/chg" "$P" run -every 100ms -set epochs=10 "$@" imagefolder >"$T/out" 2>"$T/err" </dev/null &
	pid=$!
	i=0; while ! grep -q 'samples/s' "$T/out" && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done
	for f in "$T"/chg/dog/000000[5-9]?.jpg; do
		if [ "$what" = rm ]; then rm -f "$f"; else truncate -s 300 "$f"; fi
	done
	wait $pid; code=$?
	printf '| %s | `run -set epochs=10 %s imagefolder` | %s | %s; %s; %s |
' "$input" "$*" "$code" \
		"$(grep -o '^[0-9]* samples in [0-9]* batches' "$T/out" | tail -n1)" "$(grep -o '^[0-9]* bad samples skipped' "$T/out" | tail -n1)" \
		"$(grep -m1 -E "$T/chg/dog" "$T/err" | cut -c1-160 | sed "s|$T|T|g; s/|/\\\\|/g")"
}
changerow "50 files removed after the listing" rm
changerow "the same, decode.on_error=skip" rm -set decode.on_error=skip
changerow "50 files cut to 300 bytes after the listing" cut
changerow "the same, decode.on_error=skip" cut -set decode.on_error=skip

# Counts.
row "limit: 1" env DATA="$T/big" "$P" run -every 0 -set limit=1 imagefolder
row "psiflow-imagefolder -limit 50" sh -c "$IF -data $T/big -limit 50 | grep -m1 -o '\"samples\":[0-9]*'"
row "RANK=25 WORLD_SIZE=30 on 20 files" env RANK=25 WORLD_SIZE=30 "$P" demo -data "$T/twenty" -pressure=false
mkdir -p "$T/rootfiles/c" && cp "$T/data/class0/"*.jpg "$T/rootfiles/c/" && cp "$T/data/class0/00000000.jpg" "$T/rootfiles/loose.jpg"
row "ImageFolder with a file in its root" env DATA="$T/rootfiles" "$P" run -every 0 imagefolder
grep -h -i 'root\|outside' "$T/out" "$T/err" | head -1 | sed "s|$T|T|g; s/^/    /"

# Sinks.
"$P" demo -data "$T/twenty" -sink "parquet:$T/pq" >/dev/null 2>&1
row "Parquet sink into a non-empty folder" "$P" demo -data "$T/twenty" -sink "parquet:$T/pq"
row "the same with -overwrite" "$P" demo -data "$T/twenty" -overwrite -sink "parquet:$T/pq"
echo "    folder afterwards: $(ls -A "$T/pq" | tr '\n' ' ')"
"$P" gen arrow -out "$T/arrow" -files 1 -batches 1 -rows 4 >/dev/null && mv "$T/arrow/"*.arrow "$T/arrow/x.parquet"
printf 'source: {kind: tables, config: {paths: [%s]}}\nstages: [to_tensors]\nsink: discard\n' "$T/arrow/x.parquet" > "$T/tables.yaml"
row "Arrow IPC file named .parquet" "$P" run -every 0 "$T/tables.yaml"

# Flags and launch checks.
row "-memory-max 1PiB" "$P" cgroup run -memory-max 1PiB -- /bin/true
row "-memory-max 1024TiB" "$P" cgroup run -memory-max 1024TiB -- /bin/true
t0=$(ms); row "serve with RANK=5 WORLD_SIZE=2" env RANK=5 WORLD_SIZE=2 "$P" serve -data "$T/data" -socket "$T/s.sock" -accept-timeout 20s; echo "    after $(( $(ms) - t0 )) ms"
"$P" gen jpeg -out "$T/huge/c" -n 1 -width 10000 -height 10000 >/dev/null
row "a 10000×10000 JPEG in a pipeline file" env DATA="$T/huge" "$P" run -every 0 imagefolder

if [ "$(id -u)" = 0 ]; then
	# Memory limits: OOM kill, a pause or a clean stop.
	# memrow CASE CMD...: runs CMD, prints its exit status, the OOM kills the cgroup
	# summary counted, the samples delivered and psiflow's last error line.
	memrow() {
		input=$1; shift
		timeout 120 "$@" >"$T/m" 2>&1 </dev/null
		code=$?
		printf '| %s | `%s` | %s | %s; %s; %s |\n' "$input" "$(printf '%s' "$*" | sed "s|$T|T|g" | cut -c1-90)" "$code" \
			"$(grep -o 'oom kills [0-9]*' "$T/m" | tail -n1)" "$(grep -o '^[0-9]* samples in [0-9]* batches' "$T/m" | tail -n1)" \
			"$(grep -E '^psiflow [a-z ]+: ' "$T/m" | grep -v -e 'psiflow run: in cgroup' -e '→' | tail -n1 | cut -c1-160 | sed "s|$T|T|g; s/|/\\\\|/g")"
	}
	memrow "cgroup run -memory-max 64MiB -- run imagefolder" env DATA="$T/big" "$P" cgroup run -memory-max 64MiB -- "$P" run -every 0 imagefolder
	for m in 4MiB 24MiB 44MiB; do
		memrow "cgroup run -memory-max $m -- run imagefolder (below floor + margin: refused)" env DATA="$T/big" "$P" cgroup run -memory-max $m -- "$P" run -every 0 imagefolder
	done
	memrow "cgroup run -memory-max 24MiB -- demo -data (refused)" "$P" cgroup run -memory-max 24MiB -- "$P" demo -data "$T/big"
	memrow "cgroup run -memory-max 48MiB -- run imagefolder" env DATA="$T/big" "$P" cgroup run -memory-max 48MiB -- "$P" run -every 0 imagefolder
	memrow "run -cgroup, resources.memory=96MiB" env DATA="$T/big" "$P" run -cgroup -every 0 -set resources.memory=96MiB imagefolder
	for i in 1 2 3; do
		memrow "cgroup run -memory-max 48MiB -- demo -data ($i)" "$P" cgroup run -memory-max 48MiB -- "$P" demo -data "$T/big"
	done
	timeout 120 env DATA="$T/big" /usr/bin/time -f 'max RSS %M KiB' "$P" run -every 0 -set decode.resize=5000 -set decode.center_crop=0 -set resources.budget=64MiB -set batch.size=8 -set limit=8 imagefolder >"$T/m" 2>&1
	printf '| resize 5000 (no crop), budget 64MiB, 8 samples | `run -set decode.resize=5000 -set decode.center_crop=0 ...` | %s | %s; %s%s |\n' "$?" \
		"$(grep -o 'max RSS [0-9]* KiB' "$T/m")" "$(grep -o 'peak budget in use .*' "$T/m" | head -n1)" \
		"$(grep -m1 -o 'one batch does not fit.*' "$T/m" | cut -c1-200 | sed "s|$T|T|g")"
	# a bench whose loader stops below its floor: bench says what the loader said
	row "bench, a loader stopped below its floor (exit 3)" "$P" bench -rounds 1 -warmup 0 -timeout 60s -limit 24MiB -- small=env DATA="$T/big" "$P" run -every 0 imagefolder
	grep -m1 -o 'small at .*' "$T/err" | cut -c1-300 | sed "s|$T|T|g; s/^/    /"
	# a pipeline file's torch sink whose start-up check fails: no socket
	printf 'source: {kind: files, config: {dir: "%s"}}\nstages: [decode, {kind: batch, config: {size: 4}}, collate]\nsink: {kind: torch, config: {socket: "%s", accept_timeout: 2s}}\n' "$T/big" "$T/t.sock" > "$T/torch.yaml"
	row "pipeline file torch sink, rank without samples" env RANK=250 WORLD_SIZE=300 "$P" run -every 0 "$T/torch.yaml"
	echo "    socket afterwards: $([ -e "$T/t.sock" ] && echo present || echo none)"

	# run -cgroup names the signal once (its child's line), the launcher adding nothing.
	stopsig TERM "$P" run -cgroup -every 100ms -set source.items=1000000000 demo
	printf '    lines naming the stop: %s\n' "$(grep -c 'stopped by' "$T/err")"
	# cgroup run passes its command's exit status through.
	"$P" cgroup run -- /bin/sh -c 'exit 3' >/dev/null 2>&1; a=$?
	"$P" cgroup run -- /bin/sh -c 'kill -TERM $$' >/dev/null 2>&1; b=$?
	printf '| `cgroup run -- sh -c "exit 3"`, and a command killed by SIGTERM | - | %s, %s | the command'"'"'s status; 128 + the signal |\n' "$a" "$b"

	# cgroup run forwards SIGTERM: a trainer that checkpoints, one that ignores it.
	"$P" cgroup run -grace 60s -- /bin/sh -c "trap 'echo saved > $T/ckpt; exit 0' TERM; echo ready > $T/ready; sleep 600 >/dev/null 2>&1 & wait" >"$T/out" 2>"$T/err" &
	pid=$!; i=0; while [ ! -f "$T/ready" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done
	t0=$(ms); kill -TERM $pid; wait $pid; code=$?
	printf '| SIGTERM to `cgroup run` of a trainer that checkpoints | `kill -TERM` | %s | %s ms; checkpoint: %s; %s |\n' "$code" "$(( $(ms) - t0 ))" "$(cat "$T/ckpt" 2>/dev/null || echo none)" "$(grep -m1 forwarded "$T/err")"
	rm -f "$T/ready"
	"$P" cgroup run -grace 2s -- /bin/sh -c "trap '' TERM; echo ready > $T/ready; sleep 600 >/dev/null 2>&1 & wait" >"$T/out" 2>"$T/err" &
	pid=$!; i=0; while [ ! -f "$T/ready" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done
	t0=$(ms); kill -TERM $pid; wait $pid; code=$?
	printf '| SIGTERM to `cgroup run -grace 2s` of a command that ignores it | `kill -TERM` | %s | %s ms; %s |\n' "$code" "$(( $(ms) - t0 ))" "$(tail -n1 "$T/err" | sed "s|$T|T|g" | cut -c1-160)"

	# run -cgroup killed by SIGKILL or SIGHUP: is its group left?
	for sig in KILL HUP; do
		: >"$T/out"
		env DATA="$T/big" "$P" run -cgroup -every 100ms -set epochs=1000 imagefolder >"$T/out" 2>&1 &
		pid=$!; i=0; while ! grep -q 'samples/s' "$T/out" && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done
		kill -$sig $pid; wait $pid 2>/dev/null
		i=0; while [ -d /sys/fs/cgroup/unified/psiflow/run-$pid ] || [ -d /sys/fs/cgroup/memory/psiflow/run-$pid ] || [ -d /sys/fs/cgroup/psiflow/run-$pid ]; do
			[ $i -ge 300 ] && break; sleep 0.1; i=$((i+1)); done
		printf '| SIG%s of `run -cgroup` | `kill -%s` | - | %s |\n' "$sig" "$sig" "$([ $i -lt 300 ] && echo "group psiflow/run-N gone after $((i*100)) ms" || echo "psiflow/run-$pid LEFT BEHIND after 30 s")"
	done

	# A full disk under the Parquet sink (a 1 MiB tmpfs).
	mkdir -p "$T/full"
	if mount -t tmpfs -o size=1m tmpfs "$T/full" 2>/dev/null; then
		row "Parquet sink on a full disk (1 MiB tmpfs)" "$P" demo -data "$T/big" -sink "parquet:$T/full/pq"
		echo "    left on the disk: $(ls -A "$T/full/pq" 2>/dev/null | tr '\n' ' ')"
		umount "$T/full"
	fi
fi

# Readers: the tar, Parquet and Arrow cases are Go tests (they build the shards).
if [ "${1:-}" = -v ]; then
	go test -count=1 -v -run 'TestTar|TestDir|TestUnknownIOSwitch|TestFileSkips|TestChunkStream|Fuzz' ./source
else
	go test -count=1 -run 'TestTar|TestDir|TestUnknownIOSwitch|Fuzz' ./source >/dev/null && echo && echo "reader cases (go test -run 'TestTar|TestDir|Fuzz' ./source): pass"
fi
