//go:build !linux

package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "bench: the reader benchmark needs Linux (io_uring, O_DIRECT, fadvise)")
	os.Exit(1)
}
