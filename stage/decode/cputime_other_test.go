//go:build !linux

package decode

import "testing"

type cpuMeter struct{}

func startCPU(b *testing.B) *cpuMeter        { return &cpuMeter{} }
func (m *cpuMeter) report(b *testing.B)      {}
func (m *cpuMeter) reportLimit(b *testing.B) {}
