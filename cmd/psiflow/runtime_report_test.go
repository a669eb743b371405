package main

import (
	"strings"
	"testing"
	"time"

	"github.com/psiflow/psiflow/memory"
	"github.com/psiflow/psiflow/pressure"
)

// TestRuntimeReportPauses: the runtime report that ends psiflow demo -data and
// psiflow run says how often and how long the loader paused below its floor, and
// says nothing of pauses when there were none.
func TestRuntimeReportPauses(t *testing.T) {
	const mib = 1 << 20
	for _, tt := range []struct {
		name   string
		others int64
		want   string
	}{
		{name: "paused", others: 230 * mib, want: "Memory: paused 1× below the floor, "},
		{name: "room", others: 10 * mib},
	} {
		t.Run(tt.name, func(t *testing.T) {
			// 256 MiB − others − 16 MiB reserve against a 40 MiB floor, from New's
			// first sample.
			read := func() (pressure.MemorySample, error) {
				return pressure.MemorySample{At: time.Now(), Limit: 256 * mib, Limited: true, Unreclaimable: tt.others + 10*mib, Self: 10 * mib}, nil
			}
			rt, err := memory.New(memory.Config{Floor: 40 * mib, BudgetFloor: 16 * mib, MaxBudget: 64 * mib, Workers: 1, ReadRegistered: -1,
				Headroom: pressure.HeadroomConfig{Read: read, Reserve: 16 * mib}})
			if err != nil {
				t.Fatal(err)
			}
			defer rt.Close()
			var b strings.Builder
			printRuntimeReport(&b, rt)
			got := b.String()
			if tt.want == "" && strings.Contains(got, "paused") || tt.want != "" && !strings.Contains(got, tt.want) {
				t.Fatalf("report %q; want %q in it", got, tt.want)
			}
		})
	}
}
