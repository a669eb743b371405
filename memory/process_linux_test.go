//go:build linux

package memory

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// PreferOOMVictim, in a child so the test process keeps its own score.
func TestPreferOOMVictim(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=oom")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helper: %v", err)
	}
	f := strings.Fields(string(out))
	if len(f) != 2 || f[1] != "1000" {
		t.Fatalf("helper printed %q, want the old score and 1000", out)
	}
}

func TestLockProgramText(t *testing.T) {
	n, err := LockProgramText()
	if errors.Is(err, unix.EPERM) || errors.Is(err, unix.ENOMEM) || errors.Is(err, unix.EAGAIN) {
		t.Skipf("the host refuses to lock %d bytes of program text: %v", n, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if n <= 0 {
		t.Fatal("no mapping of the program found to lock")
	}
	// The locked pages show up in VmLck as they are faulted in.
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if strings.HasPrefix(line, "VmLck:") {
			if strings.Fields(line)[1] == "0" {
				t.Fatalf("VmLck 0 after locking %d bytes of text", n)
			}
			return
		}
	}
	t.Fatal("no VmLck line in /proc/self/status")
}
