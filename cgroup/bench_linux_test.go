//go:build linux

package cgroup

import (
	"os/exec"
	"testing"
)

// BenchmarkStart compares starting /bin/true plainly, in a v2-only group (clone3 into
// the cgroup) and in a group of the host's layout (blocked start: re-exec, move, release).
func BenchmarkStart(b *testing.B) {
	host, err := DefaultTree()
	if err != nil {
		b.Skip(err)
	}
	run := func(b *testing.B, start func(*exec.Cmd) error) {
		for b.Loop() {
			cmd := exec.Command("/bin/true")
			if err := start(cmd); err != nil {
				b.Fatal(err)
			}
			if err := cmd.Wait(); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("plain", func(b *testing.B) { run(b, (*exec.Cmd).Start) })
	if host.V2Root() != "" {
		b.Run("v2-clone-into", func(b *testing.B) {
			tree, err := OpenTree(host.V2Root())
			if err != nil {
				b.Fatal(err)
			}
			g := newBenchGroup(b, tree)
			run(b, g.Start)
		})
	}
	b.Run("host-"+host.Layout().String(), func(b *testing.B) {
		g := newBenchGroup(b, host)
		run(b, g.Start)
	})
}

// BenchmarkReadStats measures the cost of the reads a controller makes every interval.
func BenchmarkReadStats(b *testing.B) {
	host, err := DefaultTree()
	if err != nil {
		b.Skip(err)
	}
	g := newBenchGroup(b, host)
	for _, bc := range []struct {
		name string
		read func() error
	}{
		{"CPUStat", func() error { _, err := g.CPUStat(); return err }},
		{"MemoryCurrent", func() error { _, err := g.MemoryCurrent(); return err }},
		{"MemoryEvents", func() error { _, err := g.MemoryEvents(); return err }},
		{"PidsEvents", func() error { _, err := g.PidsEvents(); return err }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				if err := bc.read(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func newBenchGroup(b *testing.B, tree *Tree) *Group {
	b.Helper()
	g, err := tree.New("bench-" + unsafeName.ReplaceAllString(b.Name(), "_") + "-" + itoa(osGetpid()))
	if err != nil {
		b.Skip(err)
	}
	b.Cleanup(func() {
		if err := g.Remove(); err != nil {
			b.Error(err)
		}
	})
	return g
}
