// Command decode-vs-dataloader is the whole-pipeline comparison:
// psiflow (folder → read → decode → Resize(256) → CenterCrop(224) → batch 64)
// against PyTorch's DataLoader (ImageFolder + Resize(256) + CenterCrop(224) +
// PILToTensor, num_workers=2, prefetch_factor=2, batch 64;
// benchmarks/peers/dataloader.py) on the same generated JPEG folder, side by
// side in fresh memory-limited cgroups through package
// [github.com/psiflow/psiflow/internal/harness].
//
// Usage (root, Linux, from the repository root):
//
//	go run ./cmd/decode-vs-dataloader compare -data /var/tmp/psiflow-imagenet -make 4000 \
//	    -limits 0,256M,128M -rounds 3 -cold -md out.md -json out.json
//
// Before the runs, compare times the validation transform alone on the
// folder's files (one thread, thread CPU time) and reports each loader's
// samples/s as a share of the CPU-bound limit: that per-core rate times the
// CPUs.
//
// The "loader" subcommand is the psiflow side; compare runs it as a child
// (this same binary) so both loaders are separate processes charged to their
// own cgroup.
//
// It owns only this comparison; the harness, the protocol and the DataLoader
// peer belong to their packages.
package main
