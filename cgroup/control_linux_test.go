//go:build linux

package cgroup

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRealCPUThrottle runs a child that spins on eight threads until it has used 300 ms of CPU under a
// 20 ms / 100 ms quota (so at least fifteen periods, most of them throttled, however
// loaded the machine is) and expects throttling in cpu.stat.
func TestRealCPUThrottle(t *testing.T) {
	g := newTestGroup(t, realTree(t))
	if err := g.SetCPUMax(20*time.Millisecond, 100*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	q, p, limited, err := g.CPUMax()
	if err != nil || !limited || q != 20*time.Millisecond || p != 100*time.Millisecond {
		t.Fatalf("CPUMax = %v, %v, %v, %v", q, p, limited, err)
	}
	if err := g.SetCPUWeight(200); err != nil {
		t.Fatal(err)
	}
	if w, err := g.CPUWeight(); err != nil || w != 200 {
		t.Errorf("CPUWeight = %d, %v; want 200", w, err)
	}
	cmd := helperCmd("cpu:300ms")
	if err := g.Start(cmd); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	st, err := g.CPUStat()
	if err != nil {
		t.Fatal(err)
	}
	if st.Throttled == 0 || st.ThrottledTime <= 0 || st.Periods < st.Throttled {
		t.Errorf("CPUStat = %+v; want throttling", st)
	}
	if st.Usage <= 0 {
		t.Errorf("CPUStat.Usage = %v; want > 0", st.Usage)
	}
	if err := g.SetCPUMax(0, 0); err != nil {
		t.Fatal(err)
	}
	if _, _, limited, err := g.CPUMax(); err != nil || limited {
		t.Errorf("after removing the quota: limited %v, %v", limited, err)
	}
}

// TestRealPidsMax lets a shell fork past pids.max and expects the failure counted in
// pids.events.
func TestRealPidsMax(t *testing.T) {
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip("no /bin/sh")
	}
	g := newTestGroup(t, realTree(t))
	if err := g.SetPidsMax(4); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/bin/sh", "-c", "for i in 1 2 3 4 5 6 7 8; do sleep 0.1 & done; wait")
	if err := g.Start(cmd); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait() // the shell reports the failed forks; its status does not matter
	n, err := g.PidsEvents()
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Error("pids.events max = 0 after forking past pids.max")
	}
	// The shell may give up at the first failed fork and leave its sleeps running.
	if cur, err := g.PidsCurrent(); err != nil || cur > 4 {
		t.Errorf("PidsCurrent = %d, %v; want at most pids.max 4", cur, err)
	}
}

// TestRealIOLimit throttles the first virtual or physical disk and reads the setting back.
func TestRealIOLimit(t *testing.T) {
	g := newTestGroup(t, realTree(t))
	dev := firstDisk(t)
	maj, min, _ := strings.Cut(dev, ":")
	var l IOLimit
	if _, err := fmtSscan(maj, &l.Major); err != nil {
		t.Fatal(err)
	}
	if _, err := fmtSscan(min, &l.Minor); err != nil {
		t.Fatal(err)
	}
	l.ReadBPS, l.ReadIOPS = 10<<20, 1000
	if err := g.SetIOLimit(l); err != nil {
		t.Fatal(err)
	}
	var got string
	if d, err := g.V1Dir("blkio"); err == nil {
		got = readFake(t, filepath.Join(d, "blkio.throttle.read_bps_device"))
	} else {
		got = readFake(t, filepath.Join(g.V2Dir(), "io.max"))
	}
	if !strings.Contains(got, dev) || !strings.Contains(got, "10485760") {
		t.Errorf("throttle file = %q; want %s at 10485760", got, dev)
	}
	if err := g.SetIOLimit(IOLimit{Major: l.Major, Minor: l.Minor}); err != nil {
		t.Errorf("removing the limit: %v", err)
	}
	if err := g.SetIOWeight(300); err != nil {
		t.Logf("io weight not settable here: %v", err)
	} else if w, err := g.IOWeight(); err != nil || w != 300 {
		t.Errorf("IOWeight = %d, %v; want 300", w, err)
	}
}

// firstDisk returns "MAJ:MIN" of the first block device that is not a loop, ram or zram
// device.
func firstDisk(t *testing.T) string {
	t.Helper()
	entries, _ := os.ReadDir("/sys/block")
	for _, e := range entries {
		n := e.Name()
		if strings.HasPrefix(n, "loop") || strings.HasPrefix(n, "ram") || strings.HasPrefix(n, "zram") {
			continue
		}
		if b, err := os.ReadFile(filepath.Join("/sys/block", n, "dev")); err == nil {
			return strings.TrimSpace(string(b))
		}
	}
	t.Skip("no disk in /sys/block")
	return ""
}
