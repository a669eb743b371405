// Package loaders holds psiflow loader programs used in benchmark comparisons; each
// subdirectory is a command speaking package
// [github.com/psiflow/psiflow/benchmarks/protocol] on its standard output, run by
// package [github.com/psiflow/psiflow/benchmarks/harness] ("psiflow bench").
//
//   - psiflow-imagefolder: folder → read → decode → Resize(256) → CenterCrop(224) →
//     batch 64, the psiflow side of the PyTorch DataLoader comparison
//     (benchmarks/peers/dataloader.py).
//
// This package itself holds no code.
package loaders
