//go:build linux

package pipelines

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTorchSinkListensAfterTheChecks: a pipeline file's torch sink makes its
// socket only once the start-up checks passed (after the first graph is built
// and Hooks.Ready returned, Build.WhenReady), as psiflow serve does: a run
// that fails its checks leaves no socket a client could have connected to, and
// a file at the socket's path is neither refused before the checks nor
// touched.
func TestTorchSinkListensAfterTheChecks(t *testing.T) {
	errCheck := errors.New("a start-up check failed")
	tests := []struct {
		name      string
		fileThere bool  // a regular file at the socket's path
		readyErr  error // what Hooks.Ready returns
		want      []string
	}{
		{"a check fails", false, errCheck, nil},
		{"a check fails, a file at the path", true, errCheck, nil},
		{"the checks pass, nobody connects", false, nil, []string{`sink "torch" (kind torch, `, "no consumer connected to ", "within 300ms"}},
		{"the checks pass, a file at the path", true, nil, []string{`sink "torch" (kind torch, `, "is not a socket"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sock := filepath.Join(t.TempDir(), "t.sock")
			if tt.fileThere {
				if err := os.WriteFile(sock, []byte("x"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			p, err := Parse("torch.yaml", []byte(`source: {kind: generate, config: {items: 8, width: 32, height: 32}}
stages:
  - {kind: decode, config: {resize: 16, center_crop: 16}}
  - {kind: batch, config: {size: 4}}
  - collate
sink: {kind: torch, config: {socket: "`+sock+`", accept_timeout: 300ms}}
resources: {budget: 16MiB, pressure: off}
`), Options{})
			if err != nil {
				t.Fatal(err)
			}
			readyCalled := false
			_, err = Run(context.Background(), p, Hooks{Ready: func() error {
				readyCalled = true
				fi, err := os.Lstat(sock)
				switch {
				case tt.fileThere && (err != nil || !fi.Mode().IsRegular()):
					t.Errorf("at Ready the file at the socket's path is gone or changed: %v", err)
				case !tt.fileThere && !errors.Is(err, os.ErrNotExist):
					t.Errorf("the socket exists before the start-up checks passed (%v)", err)
				}
				return tt.readyErr
			}})
			if !readyCalled {
				t.Fatalf("Hooks.Ready was not called (the sink waited for its consumer first?): %v", err)
			}
			if tt.readyErr != nil && !errors.Is(err, tt.readyErr) {
				t.Errorf("Run: %v, want the check's error", err)
			}
			if err == nil {
				t.Fatal("Run: no error, want one")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Run: %v, want it to say %q", err, w)
				}
			}
			fi, lerr := os.Lstat(sock)
			switch {
			case tt.fileThere:
				if b, rerr := os.ReadFile(sock); rerr != nil || string(b) != "x" {
					t.Errorf("the file at the socket's path changed: %q %v", b, rerr)
				}
			case !errors.Is(lerr, os.ErrNotExist):
				t.Errorf("the socket is left after the run (%v, %v)", fi, lerr)
			}
		})
	}
}
