// Command source-bench measures psiflow's io_uring and pread readers against fio on
// the same files, side by side in alternating rounds:
//
//   - cached: 1 MiB reads of a file pinned in the page cache (mmap+mlock),
//     two workers reading disjoint halves;
//   - direct: cold O_DIRECT 1 MiB reads of the same file;
//   - small: cold reads of whole 112 KiB files (ImageNet-like),
//     through the psiflow Files dataset, io_uring with small files chained
//     (open linked to read, the default; the run fails unless every file
//     took that path) and with separate calls, pread, and fio, buffered and
//     O_DIRECT;
//   - fadvise: page-cache residency of the small files and of a streamed
//     large file with DropCache off and on.
//
// It reports throughput (median and range over rounds), CPU seconds per GB
// (getrusage: the process for psiflow, its children for fio, which includes
// fio's start-up), the cores used (throughput × CPU s/GB), and whether each
// goal of the reader issue is met. Data (≤ 1.5 GiB) is written under
// -dir and removed at the end. Run it as root (mlock of the cached file).
//
// Usage: go run ./cmd/source-bench [-dir /var/tmp] [-rounds 5] [-fio fio] [-quick]
// [-cases cached,direct,small,cache] [-big MiB] [-small files] [-only text]
//
// -only runs only the contenders whose name contains text (to profile one reader,
// for example -only "chained, 2 rings qd32 O_DIRECT"); a goal line is printed only
// when the contenders it compares ran.
package main
