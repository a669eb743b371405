package main

import (
	"bytes"
	"context"
	"runtime"
	"strings"
	"testing"

	"github.com/psiflow/psiflow/cgroup"
	"github.com/psiflow/psiflow/internal/kerneltest"
)

// doctorRows runs "psiflow doctor" and returns its rows by feature name.
func doctorRows(t *testing.T) (map[string][2]string, []string) {
	t.Helper()
	var out bytes.Buffer
	if err := runDoctor(context.Background(), &out, nil); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
	if len(lines) != len(hostChecks)+1 {
		t.Fatalf("doctor printed %d rows for %d checks:\n%s", len(lines)-1, len(hostChecks), out.String())
	}
	rows := map[string][2]string{}
	var order []string
	// Columns are separated by at least two spaces (tabwriter padding 2).
	for _, l := range lines[1:] {
		parts := splitColumns(l)
		if len(parts) < 2 {
			t.Fatalf("row %q: want FEATURE STATUS DETAIL", l)
		}
		detail := ""
		if len(parts) > 2 {
			detail = parts[2]
		}
		rows[parts[0]] = [2]string{parts[1], detail}
		order = append(order, parts[0])
	}
	return rows, order
}

func splitColumns(l string) []string {
	var out []string
	for _, f := range strings.Split(l, "  ") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	if len(out) > 3 { // details may contain double spaces
		out = append(out[:2], strings.Join(out[2:], "  "))
	}
	return out
}

func TestDoctorHostRows(t *testing.T) {
	rows, order := doctorRows(t)
	want := []string{"cgroup layout", "cgroup control", "memory limit", "PSI", "PSI trigger 2 s window",
		"PSI trigger 500 ms window", "cgroup v1 vmpressure", "memlock limit", "MADV_FREE", "userfaultfd", "io_uring", "NVML"}
	for _, name := range want {
		r, ok := rows[name]
		if !ok {
			t.Errorf("no %q row; rows: %v", name, order)
			continue
		}
		if r[0] != "yes" && r[0] != "no" {
			t.Errorf("%s: status %q", name, r[0])
		}
		if r[0] == "no" && r[1] == "" {
			t.Errorf("%s: no without a reason", name)
		}
	}
	// Rows appear in registration order of their areas.
	if idx(order, "cgroup layout") > idx(order, "PSI") || idx(order, "PSI") > idx(order, "io_uring") || idx(order, "io_uring") > idx(order, "NVML") {
		t.Errorf("rows out of order: %v", order)
	}
	if runtime.GOOS != "linux" {
		return
	}
	layout, err := cgroup.DetectLayout()
	if err != nil {
		kerneltest.Skip(t, kerneltest.Cgroups, "no cgroups here: %v", err)
	}
	if r := rows["cgroup layout"]; r[0] != "yes" || !strings.HasPrefix(r[1], layout.String()) {
		t.Errorf("cgroup layout row %v; want yes, %s", r, layout)
	}
	capRes, err := hasCap(capSysResource)
	if err != nil {
		t.Fatal(err)
	}
	// The kernel refuses windows that are not multiples of 2 s to openers without
	// CAP_SYS_RESOURCE; rows must say so when PSI is on.
	if rows["PSI"][0] == "yes" {
		if got, want := rows["PSI trigger 500 ms window"][0], map[bool]string{true: "yes", false: "no"}[capRes]; got != want {
			t.Errorf("500 ms trigger row %v with CAP_SYS_RESOURCE %v; want %s", rows["PSI trigger 500 ms window"], capRes, want)
		}
		if r := rows["PSI trigger 2 s window"]; r[0] != "yes" {
			t.Errorf("2 s trigger row %v; want yes where PSI is on", r)
		}
	}
	if layout == cgroup.LayoutV2 && rows["cgroup v1 vmpressure"][0] != "no" {
		t.Errorf("vmpressure row %v on a pure v2 host", rows["cgroup v1 vmpressure"])
	}
}

func idx(list []string, s string) int {
	for i, x := range list {
		if x == s {
			return i
		}
	}
	return -1
}
