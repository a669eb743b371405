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
// t is seconds since the loader process started (any fixed origin works: the harness
// uses only differences). Lines with other events ("start", "info") and lines that are
// not JSON are ignored by the harness, so loaders may log to standard output as long
// as each protocol line stands alone. Loaders must flush every line (Python:
// print(..., flush=True)); a line still buffered when the loader is killed is lost.
//
// # What it owns
//
// The line format (Event, Parse) and a writer for Go loaders (Emitter). It does not
// run loaders or compute statistics (package harness does).
package protocol
