// Package readfault builds fault injectors for the readers of package
// source, for tests: reads that fail with EIO from an offset on, short
// reads, EINTR, and files replaced by a named pipe just before they are
// opened. An [Injector] is a list of [Rule]s consulted at the readers'
// system-call seam ([source.ReaderOptions.Faults]); it records every fault
// it injected, so a test can assert that the fault happened as well as what
// the reader made of it. It is modelled on pebble's vfs/errorfs.
//
// It owns no reading: the readers apply the faults (package source), and the
// tests decide what to assert.
package readfault
