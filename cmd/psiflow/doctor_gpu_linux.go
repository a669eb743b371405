package main

import "github.com/psiflow/psiflow/gpu/cuda"

// cudaLibrary names the driver library the device was opened through.
func cudaLibrary(d *cuda.Device) string { return d.Library() }
