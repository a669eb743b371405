package decode

import "time"

// Observer is told of every image a decode stage processed, for metrics (package
// package metrics implements it with Prometheus counters). ObserveDecode is called
// from the stage's workers at once, so it must be cheap and safe for concurrent use.
type Observer interface {
	// ObserveDecode reports one image: its encoded size, the bytes of the tensor it
	// became (0 on error), the time spent decoding and transforming it, and the error
	// (nil on success).
	ObserveDecode(encodedBytes int, tensorBytes int64, d time.Duration, err error)
}
