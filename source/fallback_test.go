package source

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

// withStatus makes the backend probe report reason (forced by the environment
// when env is set) for the duration of the test.
func withStatus(t *testing.T, env, reason string) {
	t.Helper()
	t.Setenv(EnvIO, env)
	old := uringReason
	uringReason = func() string { return reason }
	statusOnce, fallbackLog = sync.Once{}, sync.Once{}
	t.Cleanup(func() {
		uringReason = old
		statusOnce, fallbackLog = sync.Once{}, sync.Once{}
	})
}

func TestFallbackIsAutomaticAndLoggedOnce(t *testing.T) {
	tests := []struct {
		name, env, reason string
		wantBackend       Backend
		wantLog           bool
	}{
		{"seccomp", "", "io_uring_setup: operation not permitted (blocked by seccomp or an LSM, as Docker's default profile does)", BackendPread, true},
		{"disabled", "", "io_uring disabled by sysctl kernel.io_uring_disabled=2", BackendPread, true},
		{"forced-by-env", "pread", "", BackendPread, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			withStatus(t, tc.env, tc.reason)
			var logs bytes.Buffer
			logger := slog.New(slog.NewTextHandler(&logs, nil))
			dir := t.TempDir()
			p1, d1 := writeFile(t, dir, "a.bin", 5000, 1)
			p2, d2 := writeFile(t, dir, "b.bin", 70000, 2)
			for range 2 { // two readers: the notice is logged once
				r, err := NewReader(ReaderOptions{Logger: logger})
				if err != nil {
					t.Fatal(err)
				}
				if r.Backend() != tc.wantBackend {
					t.Fatalf("backend %s, want %s", r.Backend(), tc.wantBackend)
				}
				r.Close()
			}
			st := IOStatus()
			if st.Backend != tc.wantBackend || st.Reason == "" {
				t.Fatalf("status %+v", st)
			}
			if tc.reason != "" && !strings.Contains(st.Reason, tc.reason) {
				t.Fatalf("reason %q, want %q", st.Reason, tc.reason)
			}
			if n := strings.Count(logs.String(), "io_uring unavailable"); (n == 1) != tc.wantLog || n > 1 {
				t.Fatalf("fallback logged %d times:\n%s", n, logs.String())
			}
			// A dataset with no backend preference reads correctly through the fallback.
			it, err := NewFiles([]string{p1, p2}).Samples(Options{WorldSize: 1, Reader: ReaderOptions{Logger: logger}})
			if err != nil {
				t.Fatal(err)
			}
			defer it.Close()
			for _, want := range [][]byte{d1, d2} {
				s, err := it.Next(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(s.Field("bin"), want) {
					t.Fatalf("%s: bytes differ", s.Key)
				}
				s.Release()
			}
			if _, err := it.Next(context.Background()); err != io.EOF {
				t.Fatalf("after the last sample: %v", err)
			}
		})
	}
	t.Run("forced-io_uring-unavailable", func(t *testing.T) {
		withStatus(t, "io_uring", "kernel lacks IORING_OP_READ (Linux ≥ 5.6 needed)")
		if _, err := NewReader(ReaderOptions{}); err == nil || !strings.Contains(err.Error(), "IORING_OP_READ") {
			t.Fatalf("forced io_uring without support: %v", err)
		}
	})
}

func TestUnknownIOSwitchIsAnError(t *testing.T) {
	for _, env := range []string{"bogus", "PREAD", "uring", " pread"} {
		withStatus(t, env, "")
		_, err := NewReader(ReaderOptions{})
		if err == nil || !strings.Contains(err.Error(), EnvIO) || !strings.Contains(err.Error(), env) {
			t.Fatalf("%s=%q: error %v, want one naming the variable and value", EnvIO, env, err)
		}
		if st := IOStatus(); st.Err == nil {
			t.Fatalf("%s=%q: status %+v has no error", EnvIO, env, st)
		}
		// An explicit backend does not read the switch.
		r, err := NewReader(ReaderOptions{Backend: BackendPread})
		if err != nil {
			t.Fatal(err)
		}
		r.Close()
	}
}
