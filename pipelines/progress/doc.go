// Package progress holds what every shipped pipeline reports: a live [Snapshot] for
// progress displays, a [Summary] at the end, and [Report], the goroutine that samples
// a running graph.
//
// It owns no graph and no output format; the launcher prints these.
package progress
