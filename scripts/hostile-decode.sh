#!/bin/sh
# Hostile image inputs against the real programs, each in a fresh cgroup with a
# 512 MiB memory limit: builds psiflow and psiflow-imagefolder into $OUT/bin,
# generates every hostile file under $OUT (never in the repository), runs each
# case with -on-error stop and skip, and prints one table row per run: the
# case, the command, its exit status, the OOM kills of its cgroup, and the last
# line it printed. docs/HOSTILE-INPUT-decode.md holds a copy of the table.
#
#   scripts/hostile-decode.sh [OUT]      (default /tmp/psiflow-hostile-decode; needs root for cgroups)
set -eu
OUT=${1:-/tmp/psiflow-hostile-decode}
MEM=${MEM:-512MiB}
./scripts/apt-install.sh python3-pil
rm -rf "$OUT" && mkdir -p "$OUT/bin"
go build -o "$OUT/bin/psiflow" ./cmd/psiflow
go build -o "$OUT/bin/psiflow-imagefolder" ./cmd/psiflow-imagefolder
P="$OUT/bin/psiflow"
"$P" gen jpeg -out "$OUT/good" -n 40 >/dev/null

# hostile files, made by Debian's /usr/bin/python3 with Pillow, from Debian's python3-pil)
/usr/bin/python3 - "$OUT/files" "$OUT/good" <<'EOF'
import os, struct, sys, zlib, glob
out, good = sys.argv[1], sys.argv[2]
os.makedirs(out, exist_ok=True)
def chunk(t, d):
    return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
def png(w, h, depth=8, ctype=0, idat=b""):
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, depth, ctype, 0, 0, 0)) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")
def write(name, data):
    open(os.path.join(out, name), "wb").write(data)
# 20000×20000 8-bit gray, every row present and zero: about 389 KB
c = zlib.compressobj(9)
row = bytes(20001)
z = b"".join(c.compress(row) for _ in range(20000)) + c.flush()
write("bomb-gray-20000.png", png(20000, 20000, idat=z))
write("claims-100000.png", png(100000, 100000, idat=zlib.compress(bytes(64))))
from PIL import Image
Image.new("L", (20000, 20000), 128).save(os.path.join(out, "big-20000.jpg"), quality=50)
# under the limit (81 M pixels) but larger than the demo's whole budget in 512 MiB: the overdraft path
Image.new("RGB", (9000, 9000), (10, 200, 30)).save(os.path.join(out, "large-9000.jpg"), quality=80)
sample = sorted(glob.glob(os.path.join(good, "**", "*.jpg"), recursive=True))[0]
g = open(sample, "rb").read()
write("truncated.jpg", g[: len(g) // 2])
write("zero-size.jpg", b"")
write("garbage.jpg", os.urandom(4096))
write("html-named.jpg", b"<html><body>404 Not Found</body></html>")
Image.open(sample).convert("CMYK").save(os.path.join(out, "cmyk.jpg"), quality=85)
Image.open(sample).save(os.path.join(out, "progressive.jpg"), quality=85, progressive=True)
Image.open(sample).save(os.path.join(out, "png-named.jpg"), format="PNG")
write("thin-1x60000.png", png(1, 60000, idat=zlib.compress(bytes(60000 * 2))))
EOF

row() { printf '| %s | `%s` | %s | %s | %s |\n' "$@"; }
echo "| input | command | exit | OOM kills | last line |"
echo "| --- | --- | --- | --- | --- |"
n=0
run() { # case, then the command to run inside the cgroup
	name=$1; shift
	n=$((n + 1))
	log="$OUT/run-$n.log"
	set +e
	"$P" cgroup run -memory-max "$MEM" -name "hostile-$$" -- "$@" >"$log" 2>&1
	rc=$?
	set -e
	oom=$(grep -o 'oom kills [0-9]*' "$log" | tail -1 | grep -o '[0-9]*$' || true)
	last=$(grep -v -E '^(cgroup psiflow/|psiflow cgroup run: )' "$log" | grep -v '^ *$' | grep -v '^psiflow: skipped' | grep -v -E '^ *(STAGE|read|decode|batch|collate|consume) ' | tail -1 | cut -c1-160 | sed 's/|/\\|/g')
	skips=$(grep -c '^psiflow: skipped' "$log" || true)
	[ "$skips" -gt 0 ] && last="$last (skip lines: $skips)"
	cmd=$(echo "$*" | sed "s|$OUT|\$OUT|g")
	row "$name" "$cmd" "$rc" "${oom:-0}" "$last"
}
for f in "$OUT"/files/*; do
	base=$(basename "$f")
	d="$OUT/case-$base"
	mkdir -p "$d/class0"
	cp "$OUT"/good/*.jpg "$d/class0/"
	cp "$f" "$d/class0/$base"
	run "$base" "$P" demo -data "$d" -pressure=false
	run "$base" "$P" demo -data "$d" -pressure=false -on-error skip
	run "$base" "$OUT/bin/psiflow-imagefolder" -data "$d" -backend std -on-error skip
done
d="$OUT/case-progressive.jpg"
run "crop 100000" "$OUT/bin/psiflow-imagefolder" -data "$d" -crop 100000
run "every image over -max-pixels" "$P" demo -data "$d" -pressure=false -on-error skip -max-pixels 100000
