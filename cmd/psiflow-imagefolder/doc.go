// Command psiflow-imagefolder loads an image folder with psiflow the way
// benchmarks/peers/dataloader.py loads it with PyTorch: ImageFolder layout
// (DATA/<class>/<image>), read → decode → Resize(256) → CenterCrop(224) → uint8 CHW
// tensors → batches of 64, and reports progress in the JSON-lines protocol of package
// github.com/psiflow/psiflow/internal/harness/protocol on standard output.
//
// The graph: a file source (package source's io_uring reader or pread fallback,
// admitted by the graph's byte budget), the decode stage (TurboJPEG when available) with
// -workers goroutines, stage.Batch and tensor.Collate into one contiguous tensor per
// batch, and a sink that counts batches. With -drop-cache (the default) the reader
// drops each file's page cache once read, so a cgroup running it is not charged for a
// growing page cache.
//
// The pipeline is pipelines/imagefolder.yaml, the one psiflow run and psiflow demo -data
// run: every flag is an override of one of its keys (-help names it), with that key's
// default and range, and -set overrides any other key. The flags are the same as psiflow
// demo's and psiflow serve's (package internal/frontend).
//
// -memory elastic (the default) runs it under package memory's elastic runtime: the budget
// follows the cgroup's headroom up to -budget, read buffers are sized to the reads in
// flight, and memory is given back under pressure. -memory fixed is psiflow before
// that: a 64 MiB registered read pool, a budget of a quarter of the memory limit
// (unless -budget is given) and no shedding. -pressure=false turns the pressure gate
// off. The variants of the co-tenant benchmark are "-memory fixed -pressure=false"
// (B) and the defaults (C).
//
// Exit status: 0 when every epoch was delivered, 3 when it stopped below its
// memory floor, 128 + the signal's number (130, 143) when SIGINT or SIGTERM
// stopped it (after saying so once), 1 on any other failure.
//
// Usage:
//
//	psiflow-imagefolder -data DIR [-batch 64] [-workers N] [-budget auto] [-limit N] [-memory elastic|fixed] [-pressure=true|false] [-set KEY=VALUE]
package main
