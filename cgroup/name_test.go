package cgroup

import "testing"

// On a hybrid host a process's v2 group is often the root while its memory group is a
// real one (a container runtime's): the group is named by its memory group.
func TestSelfNameOnHybridIsTheMemoryGroup(t *testing.T) {
	f := fakeFiles{}
	for k, v := range fakeHybrid {
		f[k] = v
	}
	f["proc/self/cgroup"] = "9:name=systemd:/\n8:pids:/\n4:memory:/app\n2:cpuacct:/\n1:cpu:/\n0::/\n"
	tree, _, _ := openFake(t, f)
	g, err := tree.Self()
	if err != nil {
		t.Fatal(err)
	}
	if g.Name() != "/app" {
		t.Errorf("Name() = %q, want the memory group /app", g.Name())
	}
}
