//go:build !linux

package main

import "github.com/psiflow/psiflow/gpu/cuda"

// cudaLibrary names the driver library; off Linux there is none to name.
func cudaLibrary(*cuda.Device) string { return "no CUDA driver library off Linux" }
