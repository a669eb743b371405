#!/usr/bin/env bash
# psiflow on a machine with an NVIDIA GPU, in one go (about 3 minutes, never more than
# GPUCHECK_SECONDS, default 300: each step's timeout is cut to what is left, and a step
# that no longer fits is a "skipped" row), ending with one Markdown table for
# docs/BENCHMARKS.md:
#
#   build           the prebuilt binaries run here (the GPU machine has no Go toolchain)
#   doctor          psiflow doctor's NVML and CUDA driver rows
#   CUDA tests      gpu/cuda against the real driver: the device conformance suite and
#                   256 MiB copied from registered UMA memory and read back
#   H2D bandwidth   psiflow's registered UMA memory against PyTorch's pinned tensor
#                   .to('cuda', non_blocking=True), same bytes, both timed with CUDA events
#                   (goal: ≥ 0.9×)
#   copy-back       every batch of the image pipeline read back from the GPU and compared
#   image pipeline  read → decode → Resize → CenterCrop → batch → pin → H2D →
#                   mark-preemptible, against a DataLoader with pin_memory=True moving each
#                   batch with .to('cuda', non_blocking=True) (goal: ≥ 1.5× samples/s)
#   overlap         the copy stages' busy time beside the decode's
#   pipeline file   psiflow run of a pipeline file ending in pin → h2d → mark_preemptible
#                   (verify: true, every batch read back) with resources.device: cuda
#   Python pin      psiflow's Python DataLoader with pin_memory=True (batches pinned by
#                   registering the shared ring with CUDA, read back equal) and device='cuda'
#
# Prepare with scripts/gpu-check-prepare.sh (here, with Go), then run this on the GPU
# machine from the repository root, with gpucheck/ carried along. Environment:
# PSIFLOW_LIBCUDA (the driver library, default: the loader's path, then
# /usr/local/nvidia/lib64/libcuda.so.1), GPUCHECK_IMAGES (default 2000), GPUCHECK_SECONDS
# (default 300), PYTHON (default python3). Without a GPU (PSIFLOW_LIBCUDA pointing at the
# fake driver of internal/fakecuda) it dry-runs every step: the CUDA rows pass against the
# fake, the PyTorch rows say torch sees no CUDA device.
set -uo pipefail
cd "$(dirname "$0")/.."
pre=gpucheck
work=${TMPDIR:-/tmp}/psiflow-gpucheck
py=${PYTHON:-python3}
images=${GPUCHECK_IMAGES:-2000}
deadline=${GPUCHECK_SECONDS:-300}
rm -rf "$work" && mkdir -p "$work"
declare -a rows
row() { rows+=("| $1 | $2 | $3 | $4 | $5 | $6 |"); }
# left N: N seconds, or what is left of the deadline (less a 10 s reserve for the table).
left() { local l=$((deadline - SECONDS - 10)); [ "$l" -gt "$1" ] && l=$1; [ "$l" -lt 1 ] && l=1; echo "$l"; }
# fits N: whether at least N seconds are left; else the step is a skipped row.
fits() { [ $((deadline - SECONDS - 10)) -ge "$1" ]; }
skipped() { row "$1" "skipped: the ${deadline} s of GPUCHECK_SECONDS were spent" "" "" "" "SKIPPED"; }
json() { "$py" -c 'import json,sys
try: d=json.loads(sys.argv[1])
except Exception: print(""); sys.exit()
for k in sys.argv[2].split("."):
    d = d[int(k)] if isinstance(d, list) else (d.get(k, "") if isinstance(d, dict) else "")
print(d if not isinstance(d, float) else ("%.2f" % d))' "$1" "$2" 2>/dev/null; }
ratio() { "$py" -c 'import sys
try: print("%.2f×" % (float(sys.argv[1]) / float(sys.argv[2])))
except Exception: print("–")' "$1" "$2"; }

# --- build: unpack the prebuilt binaries and libjpeg-turbo -------------------------------
ok=yes
for f in psiflow-gpubench cuda.test psiflow; do
	if [ -f "$pre/$f.gz" ]; then gzip -dc "$pre/$f.gz" >"$work/$f" && chmod +x "$work/$f" || ok=no; else ok=no; fi
done
if deb=$(ls "$pre"/libturbojpeg0_*.deb 2>/dev/null | head -1) && [ -n "$deb" ]; then
	if command -v dpkg >/dev/null; then dpkg -x "$deb" "$work/deb"; else (cd "$work" && ar x "$(cd - >/dev/null; realpath "$deb")" && mkdir -p deb && tar -xf data.tar.* -C deb); fi
	tj=$(ls "$work"/deb/usr/lib/*/libturbojpeg.so.0* 2>/dev/null | head -1)
	[ -n "$tj" ] && export PSIFLOW_TURBOJPEG="$tj"
fi
if [ -z "${PSIFLOW_LIBCUDA:-}" ] && ! ldconfig -p 2>/dev/null | grep -q 'libcuda.so.1 '; then
	for c in /usr/local/nvidia/lib64/libcuda.so.1 /usr/local/nvidia/lib/libcuda.so.1 /usr/lib/x86_64-linux-gnu/libcuda.so.1; do
		[ -e "$c" ] && export PSIFLOW_LIBCUDA="$c" && break
	done
fi
[ -d /usr/local/nvidia/lib64 ] && export LD_LIBRARY_PATH="/usr/local/nvidia/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
ver=$(head -1 "$pre/VERSION" 2>/dev/null || echo "no VERSION")
if [ "$ok" = yes ] && "$work/psiflow-gpubench" -h >/dev/null 2>&1; [ "$ok" = yes ] && [ -x "$work/psiflow-gpubench" ]; then
	row "build" "prebuilt, $ver" "ran here" "" "" "ok"
else
	row "build" "prebuilt binaries missing or not runnable ($ver)" "" "" "" "FAIL: run scripts/gpu-check-prepare.sh"
fi
gpu=$(nvidia-smi --query-gpu=name,driver_version,pcie.link.gen.current,pcie.link.width.current --format=csv,noheader 2>/dev/null | head -1)
row "GPU" "${gpu:-nvidia-smi not available}" "libcuda: ${PSIFLOW_LIBCUDA:-loader path}" "turbojpeg: ${PSIFLOW_TURBOJPEG:-not unpacked}" "" ""

# --- doctor -------------------------------------------------------------------------------
doc=$(timeout "$(left 30)" "$work/psiflow" doctor 2>&1)
drow() { echo "$doc" | grep "^$1 " | sed "s/^$1 *//; s/  */ /g" | tr '|' '/' | cut -c1-200; }
[ -n "$doc" ] || doc="psiflow (built with cgo) does not run here"
row "doctor: NVML" "$(drow NVML)" "" "" "" ""
row "doctor: CUDA driver" "$(drow 'CUDA driver')" "" "" "" ""

# --- CUDA tests against the real driver ------------------------------------------------------
t=$(PSIFLOW_CUDA_REAL=1 timeout "$(left 90)" "$work/cuda.test" -test.run 'TestReal' -test.v 2>&1)
pass=$(echo "$t" | grep -c -- '^--- PASS: TestReal')
fail=$(echo "$t" | grep -c -- '--- FAIL')
if [ "$pass" -ge 2 ] && [ "$fail" -eq 0 ]; then res=PASS; else res="FAIL: $(echo "$t" | grep -m3 -E 'FAIL|Error|error|cuda:' | tr '|\n' '/ ' | cut -c1-200)"; fi
row "CUDA tests (real driver)" "conformance + 256 MiB copy-back: $pass passed, $fail failed" "" "" "" "$res"

# --- H2D bandwidth ----------------------------------------------------------------------------
b=$(PSIFLOW_CUDA_REAL=1 timeout "$(left 60)" "$work/cuda.test" -test.run '^$' -test.bench BenchmarkRealH2D -test.benchtime 50x 2>&1)
tb=$(timeout "$(left 60)" "$py" scripts/gpu-check.py h2d --bytes 9633792 67108864 --iters 50 2>&1 | tail -1)
for i in 0 1; do
	size=$([ $i = 0 ] && echo 9633792 || echo 67108864)
	ours=$(echo "$b" | grep "bytes=$size" | grep -o '[0-9.]* GB/s(events)' | cut -d' ' -f1)
	theirs=$(json "$tb" "h2d.$i.gbps")
	if [ -n "$ours" ]; then ours="$ours GB/s"; else ours="not measured: $(echo "$b" | grep -m1 -iE 'fail|error|skip' | tr '|' '/' | cut -c1-120)"; fi
	if [ -n "$theirs" ]; then theirs="$theirs GB/s"; else theirs=$(json "$tb" error | tr '|' '/' | cut -c1-120); fi
	row "H2D $size bytes" "psiflow $ours" "torch pinned $theirs" "$(ratio "${ours% GB/s}" "${theirs% GB/s}")" "≥ 0.9×" ""
done

# --- the image pipeline to the GPU ---------------------------------------------------------
data="$work/images"
timeout "$(left 60)" "$work/psiflow-gpubench" -data "$data" -gen "$images" 2>&1 | tail -1
rate() { "$py" -c 'import json,sys
ts=[json.loads(l)["t"] for l in open(sys.argv[1]) if l.startswith("{\"event\":\"batch\"")]
ns=[json.loads(l)["n"] for l in open(sys.argv[1]) if l.startswith("{\"event\":\"batch\"")]
print("%.0f" % (sum(ns[3:]) / (ts[-1] - ts[2])) if len(ts) > 4 else "")' "$1" 2>/dev/null; }
dl=""
for run in 1 2; do # the first run warms the page cache (and is dropped when time is short)
	if [ "$run" = 1 ] && ! fits 200; then continue; fi
	timeout "$(left 60)" "$work/psiflow-gpubench" -data "$data" -end cuda -verify >"$work/ours.jsonl" 2>"$work/ours.err"
	dl=$(timeout "$(left 90)" "$py" scripts/gpu-check.py dataloader --data "$data" 2>&1 | tail -1)
done
info=$(grep '"end":"cuda"' "$work/ours.jsonl" | tail -1)
ours=$(rate "$work/ours.jsonl")
theirs=$(json "$dl" samples_per_s)
row "image pipeline to GPU (samples/s)" "psiflow ${ours:-$(tail -1 "$work/ours.err" | tr '|' '/')}" "DataLoader pin_memory=True ${theirs:-$(json "$dl" error)} ($(json "$dl" workers) workers)" "$(ratio "$ours" "$theirs")" "≥ 1.5×" ""
vb=$(json "$info" verified_batches)
row "copy-back" "$vb batches of the pipeline read back and equal (xxh3)" "torch: $(json "$tb" h2d.0.copy_back_equal)" "" "all equal" "$([ -n "$vb" ] && [ "$vb" != 0 ] && echo ok || echo FAIL)"
row "overlap" "decode busy $(json "$info" busy_decode_s) s (all workers), pin $(json "$info" busy_pin_s) s, h2d $(json "$info" busy_h2d_s) s, mark-preemptible $(json "$info" busy_mark_preemptible_s) s, wall $(json "$info" wall_s) s" "registrations $(json "$info" registrations), copies $(json "$info" copies), quota waits $(json "$info" quota_waits)" "" "copy hidden in decode" ""

# --- a pipeline file to the GPU: the pin, h2d and mark_preemptible kinds --------------------
cat >"$work/to-gpu.yaml" <<YAML
name: to-gpu
source: {kind: files, config: {dir: "$data"}}
stages:
  - {kind: decode, config: {label: folder, resize: 256, center_crop: 224}}
  - {kind: batch, config: {size: 64}}
  - pin
  - h2d
  - {kind: mark_preemptible, config: {verify: true}}
sink: discard
resources: {device: cuda}
YAML
if fits 20; then
	pf=$(timeout "$(left 60)" "$work/psiflow" run -progress=false -every 0 "$work/to-gpu.yaml" 2>&1)
	pfrc=$?
	pline=$(echo "$pf" | grep -m1 -E '^[0-9]+ samples in [0-9]+ batches')
	pdev=$(echo "$pf" | grep -m1 'pin: device: ' | sed 's/.*pin: device: //' | tr '|' '/')
	psamples=$(echo "$pline" | cut -d' ' -f1)
	if [ "$pfrc" = 0 ] && [ "$psamples" = "$images" ]; then pres=ok; else pres="FAIL (exit $pfrc): $(echo "$pf" | grep -m2 -iE 'error|psiflow run:' | tr '|\n' '/ ' | cut -c1-200)"; fi
	row "pipeline file to GPU (psiflow run)" "${pline:-no summary}" "${pdev:-no device line}" "" "every batch verified, $images samples" "$pres"
else
	skipped "pipeline file to GPU (psiflow run)"
fi

# --- the Python pin_memory=True path -------------------------------------------------------
pp=skip
if fits 30; then
	pp=$(timeout "$(left 90)" "$py" scripts/gpu-check.py psiflow-pin --data "$data" --psiflow "$work/psiflow" 2>&1 | tail -1)
	[ -n "$pp" ] || pp='{"error": "no output (timed out?)"}'
fi
if [ "$pp" = skip ]; then
	skipped "Python pin_memory=True"
elif [ -n "$(json "$pp" error)" ]; then
	row "Python pin_memory=True" "FAIL: $(json "$pp" error | tr '|' '/' | cut -c1-200)" "" "" "" "FAIL"
else
	pb=$(json "$pp" pin.batches); pn=$(json "$pp" pin.pinned_batches); pv=$(json "$pp" pin.verified); pe=$(json "$pp" pin.equal_batches)
	row "Python pin_memory=True" "$pn of $pb batches pinned (the shared ring registered with cudaHostRegister), $pe of $pv read back equal" "" "" "every batch pinned and equal" "$([ -n "$pb" ] && [ "$pn" = "$pb" ] && [ "$pe" = "$pv" ] && echo ok || echo FAIL)"
	dn=$(json "$pp" device.batches_on_device); ds=$(json "$pp" device.samples_per_s)
	row "Python device='cuda' (samples/s)" "psiflow.DataLoader ${ds:-?} ($dn batches on the GPU)" "DataLoader pin_memory=True ${theirs:-?}" "$(ratio "$ds" "$theirs")" "" ""
fi

echo
echo "psiflow gpu-check, $(date -u +%Y-%m-%d\ %H:%M) UTC, $(nproc) CPUs, ${SECONDS} s of ${deadline}"
echo
echo "| check | psiflow | reference | × | goal | verdict |"
echo "| --- | --- | --- | ---: | --- | --- |"
printf '%s\n' "${rows[@]}"
