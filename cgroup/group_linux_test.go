//go:build linux

package cgroup

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestRealLayout(t *testing.T) {
	tree := realTree(t)
	l, err := DetectLayout()
	if err != nil {
		t.Fatal(err)
	}
	if l != tree.Layout() || l == LayoutUnknown {
		t.Fatalf("DetectLayout = %v, tree says %v", l, tree.Layout())
	}
	self, err := Self()
	if err != nil {
		t.Fatal(err)
	}
	if tree.V2Root() != "" {
		if _, err := self.PressurePath("memory"); err != nil {
			t.Errorf("PressurePath(memory): %v", err)
		}
	}
	if err := self.Remove(); err == nil {
		t.Error("Remove of Self succeeded; want refusal")
	}
	lim, src, err := SelfMemoryLimit()
	if err != nil || lim <= 0 || src == "" {
		t.Fatalf("SelfMemoryLimit = %d, %q, %v", lim, src, err)
	}
}

// TestRealStartChargesGroup creates a memory-limited group, starts a child in it that
// touches 32 MiB, and checks the child sits in the group in every hierarchy and that the
// memory is charged to the group.
func TestRealStartChargesGroup(t *testing.T) {
	tree := realTree(t)
	g := newTestGroup(t, tree)
	const limit = 256 << 20
	if err := g.SetMemoryMax(limit); err != nil {
		t.Fatal(err)
	}
	if got, limited, err := g.MemoryLimit(); err != nil || !limited || got != limit {
		t.Fatalf("MemoryLimit = %d, %v, %v; want %d, true", got, limited, err, limit)
	}
	if err := g.SetMemoryHigh(limit / 2); err != nil {
		t.Fatal(err)
	}
	cg, finish := startAlloc(t, g, 32)
	for _, line := range strings.Split(strings.TrimSpace(cg), "\n") {
		parts := strings.SplitN(line, ":", 3)
		ctl := parts[1]
		want := ctl == "" || ctl == "memory" || ctl == "pids" || ctl == "cpu" || ctl == "cpuacct" || ctl == "blkio" || ctl == "cpu,cpuacct"
		if want && !strings.HasSuffix(parts[2], "/"+g.Name()) {
			t.Errorf("child cgroup line %q: not in %s", line, g.Name())
		}
	}
	cur, err := g.MemoryCurrent()
	if err != nil {
		t.Fatal(err)
	}
	if cur < 32<<20 {
		t.Errorf("MemoryCurrent = %d after the child touched 32 MiB; charges went elsewhere", cur)
	}
	procs, err := g.Procs()
	if err != nil || len(procs) != 1 {
		t.Errorf("Procs = %v, %v; want one pid", procs, err)
	}
	if err := finish(); err != nil {
		t.Fatalf("child: %v", err)
	}
	ev, err := g.MemoryEvents()
	if err != nil {
		t.Fatal(err)
	}
	if ev.OOMKill != 0 {
		t.Errorf("MemoryEvents = %+v; want no OOM kill", ev)
	}
}

// TestRealOOMKillCounted runs a child over its limit and expects SIGKILL and an
// OOMKill count (no swap here: the kernel kills instead of failing the allocation).
func TestRealOOMKillCounted(t *testing.T) {
	tree := realTree(t)
	g := newTestGroup(t, tree)
	if err := g.SetMemoryMax(64 << 20); err != nil {
		t.Fatal(err)
	}
	cmd := helperCmd("alloc:256")
	if err := g.Start(cmd); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("child over its limit: %v; want killed", err)
	}
	ws := ee.Sys().(syscall.WaitStatus)
	if !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Skipf("child ended with %v, not SIGKILL (swap available?)", err)
	}
	ev, err := g.MemoryEvents()
	if err != nil {
		t.Fatal(err)
	}
	if ev.OOMKill < 1 || ev.Max < 1 {
		t.Errorf("MemoryEvents = %+v; want OOMKill and Max ≥ 1", ev)
	}
}

// TestRealRemoveKillsMembers removes a group while a child still runs in it.
func TestRealRemoveKillsMembers(t *testing.T) {
	tree := realTree(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	g, err := tree.New("test-remove-" + strings.ReplaceAll(t.Name(), "/", "_") + "-" + itoa(os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	removed := false
	t.Cleanup(func() {
		if !removed {
			g.Remove()
		}
	})
	cmd := helperCmd("alloc:1")
	cmd.Stdin = blockingReader(t)
	if err := g.Start(cmd); err != nil {
		t.Fatal(err)
	}
	if err := g.Remove(); err != nil {
		t.Fatalf("Remove with a live member: %v", err)
	}
	removed = true
	if err := cmd.Wait(); err == nil {
		t.Error("member exited cleanly; want killed by Remove")
	}
	for _, d := range g.dirs() {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("%s still there after Remove: %v", d, err)
		}
	}
	if err := g.Remove(); err == nil {
		t.Error("second Remove succeeded")
	}
}

// TestRealStartV2Only opens the cgroup2 mount as a tree of its own, so that the pure-v2
// path of Start (clone3 into the cgroup) runs on a hybrid host too.
func TestRealStartV2Only(t *testing.T) {
	host := realTree(t)
	if host.V2Root() == "" {
		t.Skip("no cgroup2 mount")
	}
	tree, err := OpenTree(host.V2Root())
	if err != nil {
		t.Fatal(err)
	}
	if tree.Layout() != LayoutV2 {
		t.Fatalf("tree at %s: layout %v, want v2", host.V2Root(), tree.Layout())
	}
	g := newTestGroup(t, tree)
	cg, finish := startAlloc(t, g, 1)
	if !strings.Contains(cg, "0::/"+g.Name()+"\n") {
		t.Errorf("child cgroup %q: not in %s", cg, g.Name())
	}
	if err := finish(); err != nil {
		t.Fatal(err)
	}
	if _, err := g.PressurePath("memory"); err != nil {
		t.Error(err)
	}
	if _, err := os.Stat(filepath.Join(g.V2Dir(), "memory.pressure")); err != nil {
		t.Error(err)
	}
}

func TestRealNewDuplicate(t *testing.T) {
	tree := realTree(t)
	g := newTestGroup(t, tree)
	_, err := tree.New(strings.TrimPrefix(g.Name(), DefaultParent+"/"))
	if err == nil || !errors.Is(err, os.ErrExist) {
		t.Fatalf("New of an existing name: %v; want ErrExist", err)
	}
	if _, err := os.Stat(g.dirs()[0]); err != nil {
		t.Fatalf("failed duplicate New removed the first group: %v", err)
	}
}
