//go:build !linux

package main

import (
	"fmt"
	"os"
	"runtime"
)

func main() {
	fmt.Fprintf(os.Stderr, "decode_vs_dataloader: needs Linux cgroups, not %s\n", runtime.GOOS)
	os.Exit(1)
}
