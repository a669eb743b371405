//go:build linux

package cgroup

import (
	"errors"
	"os/exec"
	"testing"
)

// TestHelpersNeedRunHelper: in a program that never called RunHelper, the blocked
// start and the watchdog refuse with ErrNoHelper and start nothing (re-executing the
// binary would run the whole program again); once it was called they proceed.
func TestHelpersNeedRunHelper(t *testing.T) {
	_, g, _ := openFake(t, fakeHybrid) // v1 controllers: Start takes the blocked path
	helperCalled.Store(false)
	defer RunHelper() // TestMain called it; restore that

	cmd := exec.Command("/bin/true")
	if err := g.Start(cmd); !errors.Is(err, ErrNoHelper) || cmd.Process != nil {
		t.Fatalf("Start without RunHelper: %v (process %v), want ErrNoHelper and no process", err, cmd.Process)
	}
	if d, err := g.Watch(); !errors.Is(err, ErrNoHelper) || d != nil {
		t.Fatalf("Watch without RunHelper: %v, want ErrNoHelper", err)
	}

	RunHelper()
	d, err := g.Watch()
	if err != nil {
		t.Fatalf("Watch after RunHelper: %v", err)
	}
	if err := d.Stop(); err != nil {
		t.Fatalf("watchdog Stop: %v", err)
	}
}
