# psiflow — the two set-up commands are `make run` and `make test`.
# Everything they need is installed here (Debian packages via apt-get, Go
# modules via go.mod); nothing is assumed to be installed by hand.

GO       ?= go
# go-nvml's cgo preamble declares deprecated NVML functions; keep the build quiet.
export CGO_CFLAGS ?= -O2 -g -Wno-deprecated-declarations
# One build flag for every step, tests, vet, staticcheck, the binaries the tests build
# and the wheel's (python/setup.py: CGO_ENABLED=0 go build -trimpath): -trimpath, so a
# package compiles once for all the steps that share its other flags (docs/BENCHMARKS.md,
# "make test from an empty Go build cache"). Whatever GOFLAGS `go env` has is kept.
export GOFLAGS := $(strip $(filter-out -trimpath,$(shell $(GO) env GOFLAGS)) -trimpath)
BIN      := bin/psiflow
PKGS     := ./...
# Packages the tests need at run time: TurboJPEG for the JPEG decoder, Pillow
# and torchvision (with torch) as the decode and RandomResizedCrop references,
# numpy for the Python consumer's tests (python/tests),
# Prometheus (prometheus and promtool) for the rule tests and the real scrape in
# metrics; gcc (cc) builds the fake CUDA driver the gpu tests load.
# python3-venv, -pip, -setuptools and -wheel install the Python package offline
# (cmd/psiflow TestPythonInstall runs the README's install commands); python3-torch
# runs the torchrun test (cmd/psiflow TestTorchrun: torch.distributed.run, gloo on CPU).
TEST_DEBS  := libturbojpeg0 python3-pil python3-numpy prometheus python3-venv python3-pip python3-setuptools python3-wheel python3-torch python3-torchvision gcc
# Packages the benchmarks compare against: fio, and PyTorch's DataLoader.
BENCH_DEBS := fio python3-torch python3-torchvision python3-pil libturbojpeg0

.PHONY: wheel fuzz fuzz-source all run build test test-run test-race test-beside test-rules test-cotenant test-nocgo test-short tracked-check vet vet-race vet-darwin fmt-check staticcheck deps bench-deps bench bench-go bench-flow bench-source bench-loaders bench-torch bench-cotenant clean

all: build

build:
	$(GO) build -o $(BIN) ./cmd/psiflow

# The main job on a built-in default: generate an ImageNet-like JPEG folder once
# (out/demo-jpeg), then run the shipped default pipeline file over it with the
# launcher (pipelines/imagefolder.yaml: read through io_uring, or pread where it is
# unavailable, into a UMA pool → decode → Resize(256) → CenterCrop(224) → batch 64
# → collate), two epochs.
DEMO_DATA ?= out/demo-jpeg
DEMO_N    ?= 1000
PIPELINE  ?= pipelines/imagefolder.yaml
run: deps build
	@[ -f $(DEMO_DATA)/.complete ] || { rm -rf $(DEMO_DATA) && ./$(BIN) gen jpeg -out $(DEMO_DATA) -n $(DEMO_N) && touch $(DEMO_DATA)/.complete; }
	DATA=$(DEMO_DATA) EPOCHS=2 ./$(BIN) run $(PIPELINE)

# The Python package as a platform wheel that carries a static psiflow binary
# (python/setup.py builds it with CGO_ENABLED=0), for machines without Go:
# pip install --no-index out/wheels/psiflow-*.whl
wheel: deps
	/usr/bin/python3 -m pip wheel --no-build-isolation --no-index --no-deps -w out/wheels ./python
	@ls -l out/wheels/psiflow-*.whl

# All tests: gofmt check, go vet, staticcheck, every test with the race detector and
# shuffled order. PSIFLOW_REQUIRE_KERNEL=1 makes a kernel test (PSI, cgroups, io_uring,
# reclaim) that skips although this host supports the feature fail (internal/kerneltest);
# the Python tests (python/tests) run inside go test (cmd/psiflow TestPythonModule), and
# PSIFLOW_REQUIRE_PYTHON=1 makes a missing numpy (or, in stage/decode, Pillow or
# torchvision) a failure there instead of a skip.
#
# From an empty Go build cache most of the time is compiling, and every set of build
# flags compiles the module and its dependencies once more, so the steps share flags
# where the guarantee allows (docs/BENCHMARKS.md, "Test suite"): every step builds with
# -trimpath (GOFLAGS above); go vet and staticcheck run with -race, the tests' flags, and
# the tests link from what they compiled (the !race files, three test constants, are
# vetted by the macOS pass); the non-race builds (the co-tenant test, the plain psiflow
# binary cmd/psiflow's tests build) share every package whose build does not depend on
# cgo with the CGO_ENABLED=0 lane and the wheel. go vet runs once: the race tests and the
# co-tenant test run with -vet=off, since vet-race ran every analyzer go test's own vet
# would (and the rest of go vet's) on the same packages with the same flags. The macOS
# vet and staticcheck (test-beside) run niced beside the tests (test-run), on the CPU the
# tests leave idle while they wait on the kernel; a failure of either still fails make test.
test: deps tracked-check fmt-check test-rules vet-race
	@$(MAKE) --no-print-directory -j2 test-beside test-run

# The tests, one after another: the real co-tenant test, the CGO_ENABLED=0 lane, then
# every test with the race detector.
test-run:
	@$(MAKE) --no-print-directory test-cotenant
	@$(MAKE) --no-print-directory test-nocgo
	@$(MAKE) --no-print-directory test-race

# -vet=off: make test ran vet-race (go vet -race, a superset of go test's vet) first.
test-race: deps
	PSIFLOW_REQUIRE_KERNEL=1 PSIFLOW_REQUIRE_PYTHON=1 $(GO) test -race -shuffle=on -vet=off -timeout 9m $(PKGS)

# The checks that need no test to wait for, at nice 10: they take the CPU the tests
# leave idle, and give it back when a test wants it.
test-beside:
	@nice -n 10 $(MAKE) --no-print-directory vet-darwin
	@nice -n 10 $(MAKE) --no-print-directory staticcheck

# The CGO_ENABLED=0 lane: everything builds without cgo, and the GPU binding's tests run
# against the fake CUDA driver through purego alone (what the prebuilt binaries of
# scripts/gpu-check.sh do on a GPU machine).
# With GOFLAGS' -trimpath, the same compile flags as python/setup.py's build of the
# wheel's binary (CGO_ENABLED=0 go build -trimpath), so that python/pkgtest's pip install
# of the README links from this build's cache instead of compiling every package a second
# time; and a package whose files do not depend on cgo compiles the same with cgo or
# without, so this lane links mostly from what the co-tenant test compiled before it.
test-nocgo: deps
	CGO_ENABLED=0 $(GO) build ./...
	CGO_ENABLED=0 PSIFLOW_REQUIRE_KERNEL=1 $(GO) test -count=1 -timeout 3m ./gpu/...

# The Prometheus recording and alert rules: syntax, then their unit tests.
test-rules: deps
	promtool check rules deploy/prometheus/psiflow-rules.yml
	promtool test rules deploy/prometheus/*_test.yml

# The real co-tenant tests skip themselves under -race (the detector's shadow memory does
# not fit a 256 MiB cgroup beside a 179 MiB co-tenant), so it runs here without it.
# -vet=off: vet-race vetted the package (its !race file: the macOS pass).
test-cotenant:
	$(GO) test -count=1 -vet=off -timeout 5m -run 'TestCotenant' ./pipelines/imagefolder

test-short: fmt-check vet
	$(GO) test -short -timeout 5m $(PKGS)

# No tracked file may be a built binary or larger than 1 MiB: generated data and
# programs are made by scripts, never committed.
tracked-check:
	@bad=$$(git ls-files -z 2>/dev/null | xargs -0 -r sh -c 'for f; do [ -f "$$f" ] || continue; if [ $$(stat -c %s "$$f") -gt 1048576 ] || head -c 4 "$$f" | grep -q "ELF"; then echo "$$f"; fi; done' sh); \
	if [ -n "$$bad" ]; then echo "tracked files that must not be committed (binary or > 1 MiB):"; echo "$$bad"; exit 1; fi

# go vet for Linux and, cross-compiled, for macOS: the tests that need Linux (the fake
# CUDA driver, cgroups, tmpfs, fadvise) say so with build constraints, so the rest still
# type-checks on a Mac. make test runs vet-race (Linux, with the race detector's flags,
# which the tests then reuse) and vet-darwin.
vet: vet-darwin
	$(GO) vet $(PKGS)

vet-race:
	$(GO) vet -race $(PKGS)

vet-darwin:
	GOOS=darwin $(GO) vet $(PKGS)

# staticcheck at a pinned version, built into bin/ (ignored) from the module proxy.
STATICCHECK_VERSION := v0.8.2
STATICCHECK := bin/staticcheck-$(STATICCHECK_VERSION)
$(STATICCHECK):
	@mkdir -p bin
	GOBIN=$(CURDIR)/bin/.staticcheck $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	mv bin/.staticcheck/staticcheck $@ && rmdir bin/.staticcheck

# With -race (and GOFLAGS' -trimpath), like vet-race and the tests: its go list -export
# then reuses their compiled packages instead of compiling the module without -race.
staticcheck: $(STATICCHECK)
	GOFLAGS="$$($(GO) env GOFLAGS) -race" $(STATICCHECK) $(PKGS)

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

# Installs the Debian packages the tests need, only when missing.
deps:
	@./scripts/apt-install.sh $(TEST_DEBS)

bench-deps:
	@./scripts/apt-install.sh $(BENCH_DEBS)

# Benchmarks; results and the commands that made them are in docs/BENCHMARKS.md.
# `make bench` runs them all (about 15 minutes); each part has its own target.
BENCH_DATA ?= out/bench-jpeg
bench: bench-deps bench-go bench-flow bench-source bench-loaders

bench-go: bench-deps
	$(GO) test -run '^$$' -bench . -benchmem -count 5 -timeout 60m $(PKGS)

bench-flow:
	scripts/bench-flow.sh 10

bench-source: bench-deps
	cmd/source-bench/run.sh -rounds 5

# psiflow's image-folder loader against PyTorch's DataLoader, cold, unconstrained and
# under 256 MiB and 128 MiB cgroup limits (needs root for the cgroups).
bench-loaders: bench-deps build
	@[ -f $(BENCH_DATA)/.complete ] || { rm -rf $(BENCH_DATA) && ./$(BIN) gen jpeg -out $(BENCH_DATA)/class0 -n 2000 && touch $(BENCH_DATA)/.complete; }
	$(GO) build -o bin/psiflow-imagefolder ./cmd/psiflow-imagefolder
	./$(BIN) bench -data $(BENCH_DATA) -limit none,256M,128M -rounds 3 -cold -timeout 5m -- \
	  dataloader=/usr/bin/python3 benchmarks/peers/dataloader.py --data {data} -- \
	  psiflow=bin/psiflow-imagefolder -data {data}

# Bounded fuzzing: each target runs FUZZTIME (default one minute). Their seed
# corpora run with the normal tests. Findings and executions: docs/HOSTILE-INPUT.md.
FUZZTIME ?= 1m
fuzz: fuzz-source

fuzz-source:
	$(GO) test -run '^$$' -fuzz '^FuzzTarReader$$' -fuzztime $(FUZZTIME) ./source
	$(GO) test -run '^$$' -fuzz '^FuzzParquetReader$$' -fuzztime $(FUZZTIME) ./source
	$(GO) test -run '^$$' -fuzz '^FuzzArrowReader$$' -fuzztime $(FUZZTIME) ./source
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME) ./internal/bytesize
	$(GO) test -run '^$$' -fuzz '^FuzzParseFloat$$' -fuzztime $(FUZZTIME) ./internal/flagval

# A training-style loop (python/bench/loop.py: the user's float conversion and a small
# model's SGD step per batch) fed by psiflow.DataLoader and by torch's DataLoader
# (ImageFolder, num_workers=2, prefetch 2, torchvision's same transforms), val and train,
# shuffled, as whole cgroups (Go and Python together), cold page cache, alternating rounds;
# torch-only is `import torch` alone (its peak is taken off the others'), psiflow-loop is the
# psiflow loop without the model step and go-val the same pipeline consumed in Go. Every
# loader runs with its defaults (psiflow: the elastic runtime and the pressure gate).
# Before every run, -prewarm imports torch, torchvision and psiflow and reads the binaries
# outside the run's cgroup: the libraries are then cached and charged to the harness for
# every run alike (the host evicts unmapped file pages within about a minute, so without
# it a run's peak held torch's ≈ 480 MiB of library pages or not, by chance of order).
# Results: docs/BENCHMARKS.md ("psiflow.DataLoader against torch's DataLoader").
TORCH_ROUNDS ?= 5
bench-torch: bench-deps build
	@[ -f $(BENCH_DATA)/.complete ] || { rm -rf $(BENCH_DATA) && ./$(BIN) gen jpeg -out $(BENCH_DATA)/class0 -n 2000 && touch $(BENCH_DATA)/.complete; }
	$(GO) build -o bin/psiflow-imagefolder ./cmd/psiflow-imagefolder
	./$(BIN) bench -data $(BENCH_DATA) -limit none -rounds $(TORCH_ROUNDS) -cold -timeout 10m -baseline dataloader-val $(TORCH_ARGS) \
	  -prewarm '/usr/bin/python3 python/bench/loop.py --loader prewarm --data {data} --read $(BIN) --read bin/psiflow-imagefolder' -- \
	  torch-only=/usr/bin/python3 python/bench/loop.py --loader none --data {data} -- \
	  dataloader-val=/usr/bin/python3 python/bench/loop.py --loader dataloader --transform val --data {data} -- \
	  psiflow-val=/usr/bin/python3 python/bench/loop.py --loader psiflow --transform val --data {data} --psiflow $(BIN) -- \
	  dataloader-train=/usr/bin/python3 python/bench/loop.py --loader dataloader --transform train --data {data} -- \
	  psiflow-train=/usr/bin/python3 python/bench/loop.py --loader psiflow --transform train --data {data} --psiflow $(BIN) -- \
	  psiflow-loop=/usr/bin/python3 python/bench/loop.py --loader psiflow --transform val --model none --data {data} --psiflow $(BIN) -- \
	  go-val=bin/psiflow-imagefolder -data {data} -shuffle -ordered

# The co-tenant grid: DataLoader, psiflow fixed/no gate, psiflow elastic, each next
# to a co-tenant at 0/50/70/85% of 256 MiB in the same cgroup, 5 rounds (needs root).
# COTENANT_ARGS passes more flags to the script, e.g. "-limits 256M,1G -rounds 2".
bench-cotenant: bench-deps
	benchmarks/cotenant/run.sh $(COTENANT_ARGS)

clean:
	rm -rf bin

# Bounded fuzzing: each target runs FUZZTIME (their seed corpora also run in
# `make test`). `fuzz` depends on one target per area; findings go to testdata/fuzz.
FUZZTIME ?= 1m
.PHONY: fuzz fuzz-decode
fuzz: fuzz-decode
fuzz-decode: deps
	@for t in FuzzJPEGHeader FuzzPNGHeader FuzzDecode; do \
		echo "== stage/decode $$t ($(FUZZTIME))"; \
		$(GO) test -run '^$$' -fuzz "^$$t\$$" -fuzztime $(FUZZTIME) ./stage/decode/ || exit 1; \
	done
