//go:build !linux

package main

import (
	"fmt"
	"os"
	"runtime"
)

func main() {
	fmt.Fprintf(os.Stderr, "decode-vs-dataloader: needs Linux cgroups, not %s\n", runtime.GOOS)
	os.Exit(1)
}
