# psiflow — the two set-up commands are `make run` and `make test`.
# Everything they need is installed here (Debian packages via apt-get, Go
# modules via go.mod); nothing is assumed to be installed by hand.

GO       ?= go
# go-nvml's cgo preamble declares deprecated NVML functions; keep the build quiet.
export CGO_CFLAGS ?= -O2 -g -Wno-deprecated-declarations
BIN      := bin/psiflow
PKGS     := ./...
# Packages the tests need at run time: TurboJPEG for the JPEG decoder, Pillow
# as the decode reference.
TEST_DEBS  := libturbojpeg0 python3-pil
# Packages the benchmarks compare against: fio, and PyTorch's DataLoader.
BENCH_DEBS := fio python3-torch python3-torchvision python3-pil libturbojpeg0

.PHONY: all run build test test-short tracked-check vet fmt-check deps bench-deps bench bench-go bench-flow bench-source bench-loaders bench-cotenant clean

all: build

build:
	$(GO) build -o $(BIN) ./cmd/psiflow

# The main job on a built-in default: generate an ImageNet-like JPEG folder once
# (out/demo-jpeg), then run the default pipeline over it through the real reader
# (io_uring, or pread where it is unavailable) and decoder: read → decode →
# Resize(256) → CenterCrop(224) → batch 64 → consume.
DEMO_DATA ?= out/demo-jpeg
DEMO_N    ?= 1000
run: deps build
	@[ -f $(DEMO_DATA)/.complete ] || { rm -rf $(DEMO_DATA) && ./$(BIN) gen jpeg -out $(DEMO_DATA) -n $(DEMO_N) && touch $(DEMO_DATA)/.complete; }
	./$(BIN) demo -data $(DEMO_DATA) -epochs 2

# All tests: gofmt check, go vet, every test with the race detector and shuffled order.
test: deps tracked-check fmt-check vet
	$(GO) test -race -shuffle=on -timeout 9m $(PKGS)

test-short: fmt-check vet
	$(GO) test -short -timeout 5m $(PKGS)

# No tracked file may be a built binary or larger than 1 MiB: generated data and
# programs are made by scripts, never committed.
tracked-check:
	@bad=$$(git ls-files -z 2>/dev/null | xargs -0 -r sh -c 'for f; do [ -f "$$f" ] || continue; if [ $$(stat -c %s "$$f") -gt 1048576 ] || head -c 4 "$$f" | grep -q "ELF"; then echo "$$f"; fi; done' sh); \
	if [ -n "$$bad" ]; then echo "tracked files that must not be committed (binary or > 1 MiB):"; echo "$$bad"; exit 1; fi

vet:
	$(GO) vet $(PKGS)

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

# Issue 9's co-tenant grid: DataLoader, psiflow fixed/no gate, psiflow elastic, each next
# to a co-tenant at 0/50/70/85% of 256 MiB in the same cgroup, 5 rounds (needs root).
# COTENANT_ARGS passes more flags to the script, e.g. "-limits 256M,1G -rounds 2".
bench-cotenant: bench-deps
	benchmarks/cotenant/run.sh $(COTENANT_ARGS)

clean:
	rm -rf bin
