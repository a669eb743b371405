// Package cheap gives the C heap's free memory back to the kernel: glibc's
// malloc_trim(0), found in the running process with dlsym and called through
// github.com/ebitengine/purego, so it needs no cgo (it builds with
// CGO_ENABLED=0). The C heap is where the libraries psiflow loads at run time
// allocate (libjpeg-turbo's decoder state and scratch rows): glibc keeps what
// they free in its arenas, one per thread that called malloc, and
// debug.FreeOSMemory does not see it.
//
// Where glibc is not loaded (a static binary, musl, macOS) or has no
// malloc_trim, [Trim] does nothing and says so.
package cheap
