// Package protocol defines the progress protocol that benchmark loaders speak: one JSON
// object per line on standard output, read by package
// [github.com/psiflow/psiflow/internal/harness].
//
// # Lines
//
//	{"event":"batch","n":64,"t":1.234}          a batch of n samples was delivered to the consumer
//	{"event":"done","samples":2000,"t":9.87}    the loader finished its work (last line)
//	{"event":"done","error":"...","t":3.2}      the loader gave up; error says why
//
// and, optionally, for the harness's finer checks:
//
//	{"event":"start","files":1000,"epochs":3,"t":0.1}   samples per epoch and epochs to run
//	{"event":"batch","n":2,"keys":["a/1.jpg","a/2.jpg"],"t":1.3}   a batch with its samples' keys
//	{"event":"epoch","epoch":1,"t":4.1}         epoch 1 (counted from 1) has ended
//	{"event":"pause","t":5.0}                   the loader paused below its floor; the consumer waits
//	{"event":"resume","t":9.2}                  it goes on
//
// With keys the harness checks that every sample of an epoch arrived exactly once
// (nothing twice, nothing skipped); with pause and resume it adds up the time paused.
// A co-tenant speaks the same format ("ramp", "held", "fell" with the bytes it holds).
//
// t is seconds since the loader process started (any fixed origin works: the harness
// uses only differences). Lines with other events ("info") and lines that are
// not JSON are ignored by the harness, so loaders may log to standard output as long
// as each protocol line stands alone. Loaders must flush every line (Python:
// print(..., flush=True)); a line still buffered when the loader is killed is lost.
//
// # What it owns
//
// The line format (Event, Parse) and a writer for Go loaders (Emitter). It does not
// run loaders or compute statistics (package harness does).
package protocol
