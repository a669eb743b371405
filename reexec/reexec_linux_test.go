//go:build linux

package reexec_test

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/psiflow/psiflow/reexec"
)

func TestMain(m *testing.M) {
	reexec.Init()
	os.Exit(m.Run())
}

// TestInitRunsTheHelpers re-executes this test binary as each helper, as cgroup and
// pressure do, with inputs that make the helper fail at once: Init runs the helper
// (its own message and exit status) instead of returning to the program (the tests,
// which would say "PASS" or "testing: warning").
func TestInitRunsTheHelpers(t *testing.T) {
	for _, tt := range []struct {
		name, env, stderr string
		status            int
	}{
		{"blocked-start trampoline", "PSIFLOW_CGROUP_START_FD=x", "psiflow cgroup start: bad PSIFLOW_CGROUP_START_FD", 127},
		{"user-namespace helper", "PSIFLOW_PSI_USERNS_HELPER=1", "psiflow psi helper: sendmsg", 1},
		{"cgroup watchdog", "PSIFLOW_CGROUP_WATCH_FD=x", "psiflow cgroup watchdog: bad PSIFLOW_CGROUP_WATCH_FD", 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestNothing$", "-test.v")
			cmd.Env = append(os.Environ(), tt.env)
			var out, errOut strings.Builder
			cmd.Stdout, cmd.Stderr = &out, &errOut
			err := cmd.Run()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || (tt.status >= 0 && ee.ExitCode() != tt.status) {
				t.Fatalf("exit %v, want status %d; stderr %q", err, tt.status, errOut.String())
			}
			if strings.Contains(out.String(), "PASS") || strings.Contains(out.String(), "testing:") {
				t.Fatalf("the helper returned to the program: stdout %q", out.String())
			}
			if !strings.Contains(errOut.String(), tt.stderr) {
				t.Fatalf("stderr %q, want %q", errOut.String(), tt.stderr)
			}
		})
	}
	// Not a helper: Init returns and the program runs.
	out, err := exec.Command(os.Args[0], "-test.run=^TestNothing$", "-test.v").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "PASS") {
		t.Fatalf("plain run: %v\n%s", err, out)
	}
}

func TestNothing(t *testing.T) {}
