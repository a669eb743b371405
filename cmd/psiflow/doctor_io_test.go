package main

import (
	"strings"
	"testing"

	"github.com/psiflow/psiflow/source"
)

func TestDescribeReader(t *testing.T) {
	tests := []struct {
		st     source.Status
		ok     bool
		detail string
	}{
		{source.Status{Backend: source.BackendURing}, true, "io_uring (one ring"},
		{source.Status{Backend: source.BackendURing, Forced: true}, true, "forced by PSIFLOW_IO"},
		{source.Status{Backend: source.BackendPread, Reason: "io_uring_setup: operation not permitted (blocked by seccomp"}, true, "pread fallback: io_uring_setup"},
		{source.Status{Backend: source.BackendURing, Reason: "ENOSYS", Forced: true}, false, "unavailable: ENOSYS"},
	}
	for _, tc := range tests {
		ok, detail := describeReader(tc.st)
		if ok != tc.ok || !strings.Contains(detail, tc.detail) {
			t.Errorf("%+v: got %v %q", tc.st, ok, detail)
		}
	}
	if ok, detail := probeReaderBackend(t.Context()); !ok || detail == "" {
		t.Errorf("probe on this host: %v %q", ok, detail)
	}
}
