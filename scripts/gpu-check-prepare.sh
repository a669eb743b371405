#!/usr/bin/env bash
# Prepares what scripts/gpu-check.sh runs on a machine with an NVIDIA GPU and no Go
# toolchain: prebuilt binaries in gpucheck/ (ignored through .git/info/exclude, so the
# device tool's `carry` can take it along), gzip-compressed to fit its 64 MiB.
#
#   scripts/gpu-check-prepare.sh            # here, with Go
#   # then, on the GPU machine (device tool: carry ["gpucheck"]):
#   scripts/gpu-check.sh
#
# gpucheck/ holds:
#   psiflow-gpubench.gz  the image pipeline to the host or the GPU (CGO_ENABLED=0)
#   cuda.test.gz         gpu/cuda's tests and benchmarks, run against the real driver (CGO_ENABLED=0)
#   psiflow.gz           the launcher built with cgo, for doctor's NVML row (go-nvml needs cgo)
#   libturbojpeg0_*.deb  libjpeg-turbo, unpacked there with dpkg -x (psiflow loads it at run time)
#   VERSION              the commit and build settings
set -euo pipefail
cd "$(dirname "$0")/.."
out=gpucheck
mkdir -p "$out"
exclude="$(git rev-parse --git-common-dir)/info/exclude"
mkdir -p "$(dirname "$exclude")"
grep -qx '/gpucheck/' "$exclude" 2>/dev/null || echo '/gpucheck/' >>"$exclude"

export GOOS=linux GOARCH=amd64
flags=(-trimpath -ldflags=-s\ -w)
CGO_ENABLED=0 go build "${flags[@]}" -o "$out/psiflow-gpubench" ./cmd/psiflow-gpubench
CGO_ENABLED=0 go test -c "${flags[@]}" -o "$out/cuda.test" ./gpu/cuda
CGO_ENABLED=1 CGO_CFLAGS="-O2 -Wno-deprecated-declarations" go build "${flags[@]}" -o "$out/psiflow" ./cmd/psiflow
for f in psiflow-gpubench cuda.test psiflow; do gzip -9 -f "$out/$f"; done
rm -f "$out"/libturbojpeg0_*.deb
(cd "$out" && apt-get download libturbojpeg0 >/dev/null 2>&1) || echo "gpu-check-prepare: apt-get download libturbojpeg0 failed: the GPU run will decode with Go's image/jpeg (slower)" >&2
printf 'commit %s%s\nbuilt %s with %s\n' "$(git rev-parse --short HEAD)" "$(git diff --quiet || echo ' (with uncommitted changes)')" \
	"$(date -u +%Y-%m-%dT%H:%MZ)" "$(go version | cut -d' ' -f3)" >"$out/VERSION"
du -ch "$out"/* | tail -1 | sed 's/total/gpucheck total (the carry limit is 64 MiB)/'
