//go:build !linux

package kerneltest

func probe(f Feature) (bool, string) { return false, "not Linux" }
