// Package source reads training data: the io_uring reader and its pread
// fallback, datasets (files, tar shards, Arrow IPC, Parquet), sharding,
// shuffling and resume.
package source
