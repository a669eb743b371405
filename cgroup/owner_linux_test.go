//go:build linux

package cgroup

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"
)

func TestParseStartTime(t *testing.T) {
	stat := "4242 (a) b) (c) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10 18446744073709551615"
	if st, err := parseStartTime(stat); err != nil || st != 987654 {
		t.Fatalf("parseStartTime = %d, %v", st, err)
	}
	for _, bad := range []string{"", "1 (x", "1 (x) S 1 2"} {
		if _, err := parseStartTime(bad); err == nil {
			t.Errorf("parseStartTime(%q) accepted", bad)
		}
	}
	for _, bad := range []string{"", "12", "x 1", "-1 5", "0 5", "1 -5"} {
		if _, err := parseOwner(bad); err == nil {
			t.Errorf("parseOwner(%q) accepted", bad)
		}
	}
}

// TestRemoveOrphans: a group whose recorded owner is gone is swept with what
// runs inside it; a group of a live owner is not.
func TestRemoveOrphans(t *testing.T) {
	tree := realTree(t)
	live := newTestGroup(t, tree)
	o, ok, err := live.Owner()
	if err != nil || !ok || o.PID != os.Getpid() || !tree.Alive(o) {
		t.Fatalf("Owner = %+v, %v, %v; want this process, alive", o, ok, err)
	}

	orphanName := "test-orphan-" + itoa(os.Getpid())
	orphan, err := tree.New(orphanName)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = orphan.Remove() })
	// A process that has exited stands for the dead owner.
	dead := exec.Command("/bin/true")
	if err := dead.Run(); err != nil {
		t.Skip(err)
	}
	gone := Owner{PID: dead.Process.Pid, Start: 1}
	for _, d := range orphan.dirs() {
		if err := syscall.Setxattr(d, OwnerXattr, []byte(gone.String()), 0); err != nil {
			t.Skipf("no user xattrs on %s: %v", d, err)
		}
	}
	// Something still runs in it.
	sleeper := exec.Command("/bin/sleep", "600")
	if err := orphan.Start(sleeper); err != nil {
		t.Fatal(err)
	}
	// A reused PID with another start time is not the owner either.
	if tree.Alive(Owner{PID: os.Getpid(), Start: o.Start + 1}) {
		t.Fatal("a different start time passed for the owner")
	}

	removed, err := tree.RemoveOrphans()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(removed, orphanName) || slices.Contains(removed, filepath.Base(live.Name())) {
		t.Fatalf("removed %v: want %s and not %s", removed, orphanName, live.Name())
	}
	done := make(chan error, 1)
	go func() { done <- sleeper.Wait() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the process in the orphaned group was not killed")
	}
	for _, d := range orphan.dirs() {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Fatalf("%s still exists (%v)", d, err)
		}
	}
	if _, err := os.Stat(live.V2Dir()); err != nil && live.V2Dir() != "" {
		t.Fatalf("live group removed: %v", err)
	}
}

// TestWatchdogRemovesGroupWhenOwnerDies: closing the pipe as a dying owner
// would makes the watchdog kill the group's processes and remove it.
func TestWatchdogRemovesGroupWhenOwnerDies(t *testing.T) {
	tree := realTree(t)
	if os.Geteuid() != 0 {
		t.Skip("creating cgroups needs root")
	}
	g, err := tree.New("test-watchdog-" + itoa(os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Remove() })
	sleeper := exec.Command("/bin/sleep", "600")
	if err := g.Start(sleeper); err != nil {
		t.Fatal(err)
	}
	wd, err := g.Watch()
	if err != nil {
		t.Fatal(err)
	}
	wd.w.Close() // what the kernel does when the owner dies
	wd.w = nil
	if err := wd.cmd.Wait(); err != nil {
		t.Fatalf("watchdog: %v", err)
	}
	if err := sleeper.Wait(); err == nil {
		t.Fatal("the process in the group exited cleanly; want it killed")
	}
	for _, d := range g.dirs() {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Fatalf("%s still exists (%v)", d, err)
		}
	}

	// Stop: the watchdog exits and leaves the group alone.
	g2 := newTestGroup(t, tree)
	wd, err = g2.Watch()
	if err != nil {
		t.Fatal(err)
	}
	if err := wd.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(g2.dirs()[0]); err != nil {
		t.Fatalf("group removed after Stop: %v", err)
	}
}
