// Package turbojpeg is a binding to libjpeg-turbo's TurboJPEG API loaded at run
// time with github.com/ebitengine/purego, so that building psiflow needs no C
// library and no cgo (it builds with CGO_ENABLED=0).
//
// # What it owns
//
//   - Finding and loading the shared library ([Load], [Default]); a missing
//     library or symbol is an error that says why, never a panic.
//   - Decompressor handles ([Lib.NewDecompressor]): header parsing, decoding
//     into caller-owned buffers, DCT scaling with exact scaled sizes
//     ([Lib.ScaledSize], [Lib.ScalingFactors]).
//
// # What it does not own
//
// Colour conversion beyond what libjpeg-turbo does (CMYK to RGB is done by
// package decode), resizing, cropping, pools of handles shared between
// goroutines (package decode keeps one), and any fallback decoder.
//
// # Pitfalls handled here
//
//   - tjDecompressHeader3 may succeed with a 0×0 size: rejected.
//   - tjGetErrorCode may report a warning after a fatal error: any non-zero
//     return is a failure.
//   - A width/height that is not an exact scaled size silently selects another
//     scale: callers pass a [ScalingFactor] and the size is computed here.
//   - Truncated data: [FlagStopOnWarning] is always set, so a premature end of
//     data is an error instead of grey rows.
//   - After a failed call (seen with a truncated header) libjpeg-turbo 2.1
//     can leave a handle mid-stream so that the next header read on good data
//     fails ("Bogus DQT index"): a [Decompressor] replaces its handle after
//     every error.
//   - A handle is not safe for concurrent use; it is not tied to a thread.
package turbojpeg
