// Command decodebench compares per-core JPEG decode rates of psiflow's
// TurboJPEG binding, the standard library and Pillow on the same files in
// alternating rounds. See main.go for usage. It owns nothing else.
package main
