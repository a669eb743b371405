// Package synth writes synthetic datasets for demos, tests and benchmarks:
// noisy JPEG files with ImageNet-like sizes, WebDataset tar shards, Parquet
// and Arrow IPC files. Everything is deterministic for a given seed.
//
// It owns only generation; reading is package source's job.
package synth
