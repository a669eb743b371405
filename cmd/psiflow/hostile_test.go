package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/psiflow/psiflow/cgroup"
)

// envLauncher makes the test binary run dispatch on the arguments it holds
// (separated by \x1f) instead of the tests: a launcher the tests can SIGKILL.
const envLauncher = "PSIFLOW_TEST_LAUNCHER_ARGS"

// TestFlagsRejectBadValues runs every command with hostile flag values: each
// must exit 2 with an error naming the flag, and run nothing.
func TestFlagsRejectBadValues(t *testing.T) {
	tests := [][]string{
		{"cgroup", "run", "-memory-max", "NaN"}, {"cgroup", "run", "-memory-max", "Inf"}, {"cgroup", "run", "-memory-max", "1e30"},
		{"cgroup", "run", "-memory-max", "9999999999G"}, {"cgroup", "run", "-memory-max", "-7"}, {"cgroup", "run", "-memory-high", "lots"},
		{"cgroup", "run", "-cpus", "NaN"}, {"cgroup", "run", "-cpus", "-1"}, {"cgroup", "run", "-cpus", "1e12"}, {"cgroup", "run", "-cpus", "Inf"},
		{"cgroup", "run", "-pids-max", "-7"}, {"cgroup", "run", "-pids-max", "99999999999999999999"},
		{"cgroup", "run", "-cpu-weight", "-1"}, {"cgroup", "run", "-cpu-weight", "10001"},
		{"cgroup", "show", "-pid", "-1"},
		{"demo", "-items", "-1"}, {"demo", "-workers", "-1"}, {"demo", "-batch", "0"},
		{"demo", "-budget", "9999999999G"}, {"demo", "-budget", "NaN"}, {"demo", "-budget", "-5"}, {"demo", "-epochs", "0"}, {"demo", "-size", "1e30"},
		{"gen", "jpeg", "-n", "-1"}, {"gen", "jpeg", "-width", "0"}, {"gen", "jpeg", "-width", "100000"}, {"gen", "jpeg", "-quality", "101"},
		{"gen", "tar", "-shards", "NaN"}, {"gen", "parquet", "-rows", "99999999999999999999"},
		{"bench", "-rounds", "0"}, {"bench", "-rounds", "NaN"}, {"bench", "-timeout", "-1s"}, {"bench", "-warmup", "-1"},
		{"pressure", "watch", "-interval", "0s"}, {"pressure", "watch", "-interval", "2h"}, {"pressure", "watch", "-duration", "-1s"},
	}
	for _, args := range tests {
		name := strings.Join(args, " ")
		t.Run(name, func(t *testing.T) {
			flagName := args[len(args)-2]
			full := append([]string(nil), args...)
			switch args[0] {
			case "cgroup":
				full = append(full, "--", "/bin/true")
			case "gen":
				full = append(full, "-out", t.TempDir())
			}
			var out, errOut bytes.Buffer
			code := dispatch(context.Background(), &out, &errOut, full)
			if code != 2 || !strings.Contains(errOut.String(), "flag "+flagName) {
				t.Fatalf("exit %d, stderr %q: want exit 2 and an error naming %s", code, errOut.String(), flagName)
			}
		})
	}
	var out, errOut bytes.Buffer
	if code := dispatch(context.Background(), &out, &errOut, []string{"cgroup", "run", "-adaptive-cpus", "NaN:4", "--", "/bin/true"}); code != 2 || !strings.Contains(errOut.String(), "-adaptive-cpus") {
		t.Fatalf("-adaptive-cpus NaN:4: exit %d, %s", code, errOut.String())
	}
}

func TestShardingIsAnnounced(t *testing.T) {
	t.Setenv("RANK", "1")
	t.Setenv("WORLD_SIZE", "4")
	var out, errOut bytes.Buffer
	dir := t.TempDir() // empty: the run fails, but only after saying how it is sharded
	code := dispatch(context.Background(), &out, &errOut, []string{"demo", "-data", dir, "-pressure=false"})
	lines := strings.SplitN(out.String(), "\n", 4)
	if code == 0 || len(lines) < 2 || !strings.Contains(lines[1], "sharding: rank 1 of 4") {
		t.Fatalf("exit %d, stdout %q: want the sharding in the first lines", code, out.String())
	}
	if !strings.Contains(errOut.String(), "empty dataset") || !strings.Contains(errOut.String(), dir) {
		t.Fatalf("stderr %q: want the empty dataset named", errOut.String())
	}
	t.Setenv("RANK", "4")
	out.Reset()
	errOut.Reset()
	if code := dispatch(context.Background(), &out, &errOut, []string{"demo", "-data", dir}); code != 2 || !strings.Contains(errOut.String(), "RANK=4") {
		t.Fatalf("RANK=4 of 4: exit %d, %s", code, errOut.String())
	}
}

func TestBenchExitsNonZeroWhenALoaderFails(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("creating cgroups needs root")
	}
	dir := t.TempDir()
	good := filepath.Join(dir, "good.sh")
	if err := os.WriteFile(good, []byte("#!/bin/sh\necho '{\"event\":\"batch\",\"n\":10,\"t\":1}'\necho '{\"event\":\"done\",\"samples\":10,\"t\":2}'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	code := dispatch(context.Background(), &out, &out, []string{"bench", "-rounds", "1", "-warmup", "0", "-timeout", "30s",
		"--", "good=" + good, "--", "bad=/bin/sh", "-c", "exit 3"})
	if code != 1 || !strings.Contains(out.String(), "not every run finished") || !strings.Contains(out.String(), "bad at") {
		t.Fatalf("exit %d: %s", code, out.String())
	}
}

// TestKilledLauncherLeavesNothing SIGKILLs a `psiflow cgroup run` whose command has
// a child of its own, then waits (bounded) until the command, its child and the
// group's directories are all gone.
func TestKilledLauncherLeavesNothing(t *testing.T) {
	needCgroups(t)
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pids")
	name := "test-killed-launcher-" + itoaPid()
	script := fmt.Sprintf("sleep 600 & echo $! $$ > %s.tmp && mv %s.tmp %s; wait", pidFile, pidFile, pidFile)
	launcher := exec.Command(os.Args[0])
	launcher.Env = append(os.Environ(), envLauncher+"="+strings.Join([]string{"cgroup", "run", "-name", name, "-memory-max", "256MiB", "--", "/bin/sh", "-c", script}, "\x1f"))
	// A file, not a pipe: a surviving grandchild holding a pipe would block Wait.
	logf, err := os.Create(filepath.Join(dir, "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	launcher.Stderr = logf
	if err := launcher.Start(); err != nil {
		t.Fatal(err)
	}
	tree, err := cgroup.DefaultTree()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = tree.RemoveOrphans() })

	var pids []int
	waitFor(t, 30*time.Second, "the command to start", func() bool {
		b, err := os.ReadFile(pidFile)
		if err != nil {
			return false
		}
		for _, f := range strings.Fields(string(b)) {
			p, err := strconv.Atoi(f)
			if err != nil {
				t.Fatal(err)
			}
			pids = append(pids, p)
		}
		return true
	})
	g, err := tree.Open(filepath.Join(cgroup.DefaultParent, name))
	if err != nil {
		t.Fatal(err)
	}
	dirs := []string{g.V2Dir()}
	if d, err := g.V1Dir("memory"); err == nil {
		dirs = append(dirs, d)
	}
	for _, d := range dirs {
		if _, err := os.Stat(d); err != nil {
			t.Fatalf("group directory %s: %v", d, err)
		}
	}
	if err := launcher.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = launcher.Wait()
	waitFor(t, 30*time.Second, "the command and its child to die and the group to go", func() bool {
		for _, p := range pids {
			if alive(p) {
				return false
			}
		}
		for _, d := range dirs {
			if _, err := os.Stat(d); err == nil {
				return false
			}
		}
		return true
	})
}

// waitFor polls cond every 10 ms until it holds, failing the test after limit.
func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up after %v waiting for %s", limit, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}
