//go:build !linux

package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "decodebench: runs on Linux only (TurboJPEG binding)")
	os.Exit(2)
}
