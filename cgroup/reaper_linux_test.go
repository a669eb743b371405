//go:build linux

package cgroup

import (
	"context"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

func TestParseStat(t *testing.T) {
	tests := []struct {
		in    string
		state byte
		ppid  int
		err   bool
	}{
		{"123 (sleep) Z 45 123 45 0", 'Z', 45, false},
		{"7 (a) b (c)) S 1 7 7 0", 'S', 1, false},
		{"7 (x", 0, 0, true},
		{"7 (x) Z", 0, 0, true},
	}
	for _, tc := range tests {
		s, p, err := parseStat([]byte(tc.in))
		if (err != nil) != tc.err || s != tc.state || p != tc.ppid {
			t.Errorf("parseStat(%q) = %c, %d, %v", tc.in, s, p, err)
		}
	}
}

// TestReaperReapsOrphan makes this process a subreaper, lets a shell leave an orphaned
// sleep behind, and expects the reaper to reap it while the shell (owned by exec.Cmd) is
// left to Wait.
func TestReaperReapsOrphan(t *testing.T) {
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip("no /bin/sh")
	}
	if err := SetChildSubreaper(true); err != nil {
		t.Skipf("kernel refuses: %v", err)
	}
	t.Cleanup(func() { SetChildSubreaper(false) })
	if on, err := IsChildSubreaper(); err != nil || !on {
		t.Fatalf("IsChildSubreaper = %v, %v", on, err)
	}
	cmd := exec.Command("/bin/sh", "-c", "sleep 0.2 & exit 0")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	shell := cmd.Process.Pid
	reaped := make(chan int, 4)
	r := NewReaper(func(pid int) bool { return pid == shell }, func(pid int, ws syscall.WaitStatus) {
		if ws.Exited() && ws.ExitStatus() == 0 {
			reaped <- pid
		}
	})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() { done <- r.Run(ctx, 50*time.Millisecond) }()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("shell Wait (must not be reaped by the reaper): %v", err)
	}
	select {
	case pid := <-reaped:
		if pid == shell {
			t.Errorf("reaper reaped the kept shell")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("orphaned sleep not reaped within 10 s")
	}
	cancel()
	<-done
	if r.Reaped() != 1 {
		t.Errorf("Reaped = %d, want 1", r.Reaped())
	}
}
