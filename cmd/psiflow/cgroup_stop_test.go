package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/psiflow/psiflow/cgroup"
	"github.com/psiflow/psiflow/internal/stopsig"
)

// launcher is a psiflow process started by a test (the test binary acting as main),
// with its stdout read line by line.
type launcher struct {
	cmd    *exec.Cmd
	lines  chan string
	stderr bytes.Buffer
	out    []string
}

// startLauncher runs psiflow args as a process of its own (main, with its signal
// handling), outside any terminal's foreground (as a job scheduler runs it).
func startLauncher(t *testing.T, ctx context.Context, args ...string) *launcher {
	t.Helper()
	l := &launcher{lines: make(chan string, 64)}
	l.cmd = exec.CommandContext(ctx, os.Args[0], args...)
	l.cmd.Env = append(os.Environ(), envTestAsMain+"=1")
	l.cmd.Stderr = &l.stderr
	l.cmd.WaitDelay = 10 * time.Second
	l.cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // no controlling terminal
	out, err := l.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := l.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(l.lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			l.lines <- sc.Text()
		}
	}()
	return l
}

// waitLine reads lines until one starts with prefix and returns it.
func (l *launcher) waitLine(t *testing.T, ctx context.Context, prefix string) string {
	t.Helper()
	for {
		select {
		case s, ok := <-l.lines:
			if !ok {
				t.Fatalf("psiflow ended before a line %q:\n%s\nstderr: %s", prefix, strings.Join(l.out, "\n"), l.stderr.String())
			}
			l.out = append(l.out, s)
			if strings.HasPrefix(s, prefix) {
				return s
			}
		case <-ctx.Done():
			t.Fatalf("no line %q before the deadline:\n%s", prefix, strings.Join(l.out, "\n"))
		}
	}
}

// wait reads the rest of stdout and waits for the process; it returns the exit code.
func (l *launcher) wait(t *testing.T) int {
	t.Helper()
	for s := range l.lines {
		l.out = append(l.out, s)
	}
	err := l.cmd.Wait()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	} else if err != nil {
		t.Fatalf("wait: %v", err)
	}
	return 0
}

// groupDirs returns the directories of psiflow/<name> in the cgroup2 and v1 memory
// and pids hierarchies (existing or not).
func groupDirs(t *testing.T, name string) []string {
	t.Helper()
	tree, err := cgroup.DefaultTree()
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, root := range []string{tree.V2Root(), tree.V1Root("memory"), tree.V1Root("pids")} {
		if root != "" {
			dirs = append(dirs, filepath.Join(root, cgroup.DefaultParent, name))
		}
	}
	return dirs
}

func existing(dirs []string) []string {
	var out []string
	for _, d := range dirs {
		if _, err := os.Stat(d); err == nil {
			out = append(out, d)
		}
	}
	return out
}

// TestCgroupRunForwardsStopSignals sends a `psiflow cgroup run` (default flags but
// -grace) the signals a job scheduler or a user sends. A command that traps SIGTERM
// or SIGINT gets it, writes its checkpoint and exits 0, and so does the launcher; one
// that ignores SIGTERM is killed, with every process of its group, once the grace
// period is over. Nothing is left in any hierarchy.
func TestCgroupRunForwardsStopSignals(t *testing.T) {
	needCgroups(t)
	tests := []struct {
		name   string
		trap   string // the shell's trap for sig
		sig    syscall.Signal
		grace  time.Duration
		code   int
		ckpt   bool
		stderr []string
	}{
		{"SIGTERM trapped: the checkpoint is written", `echo saved > "$CK"; exit 0`, syscall.SIGTERM, 5 * time.Minute, 0, true,
			[]string{"SIGTERM forwarded to /bin/sh", "SIGKILL in 5m0s unless the command exits", "/bin/sh exited with status 0"}},
		{"SIGINT trapped: the checkpoint is written", `echo saved > "$CK"; exit 0`, syscall.SIGINT, 5 * time.Minute, 0, true,
			[]string{"SIGINT forwarded to /bin/sh", "/bin/sh exited with status 0"}},
		{"SIGTERM not trapped: the command's death by it is the exit status", `-`, syscall.SIGTERM, 5 * time.Minute, 128 + 15, false,
			[]string{"SIGTERM forwarded to /bin/sh", "stopped", "after SIGTERM: signal: terminated"}},
		{"SIGTERM ignored: killed after the grace period", ``, syscall.SIGTERM, time.Second, 128 + 9, false,
			[]string{"SIGTERM forwarded", "did not exit within 1s of SIGTERM: killing every process in cgroup", "did not exit within the grace period after SIGTERM: killed"}},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			ck := filepath.Join(t.TempDir(), "checkpoint")
			name := fmt.Sprintf("stop-%d-%d", os.Getpid(), i)
			dirs := groupDirs(t, name)
			sig := strings.TrimPrefix(stopsig.Name(tc.sig), "SIG")
			// The trap is set before "ready" is printed; the sleep is a grandchild that
			// only the group kill ends when the trap does not exit.
			script := fmt.Sprintf("trap '%s' %s; sleep 600 >/dev/null 2>&1 & echo ready $!; wait", tc.trap, sig)
			l := startLauncher(t, ctx, "cgroup", "run", "-name", name, "-grace", tc.grace.String(), "--",
				"/bin/sh", "-c", "CK="+ck+"; "+script)
			ready := l.waitLine(t, ctx, "ready ")
			sleeper, err := strconv.Atoi(strings.Fields(ready)[1])
			if err != nil {
				t.Fatal(err)
			}
			if got := existing(dirs); len(got) != len(dirs) {
				t.Fatalf("group directories %v, want all of %v", got, dirs)
			}
			signalled := time.Now()
			if err := l.cmd.Process.Signal(tc.sig); err != nil {
				t.Fatal(err)
			}
			code := l.wait(t)
			elapsed := time.Since(signalled)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tc.code, strings.Join(l.out, "\n"), l.stderr.String())
			}
			for _, want := range tc.stderr {
				if !strings.Contains(l.stderr.String(), want) {
					t.Errorf("stderr lacks %q:\n%s", want, l.stderr.String())
				}
			}
			b, err := os.ReadFile(ck)
			if tc.ckpt && (err != nil || string(b) != "saved\n") {
				t.Errorf("checkpoint %q, %v; want \"saved\"", b, err)
			}
			if !tc.ckpt {
				if err == nil {
					t.Errorf("checkpoint written by a command that ignores %s", stopsig.Name(tc.sig))
				}
				if tc.code == 128+9 && elapsed < tc.grace {
					t.Errorf("killed %v after the signal, before the %v grace period", elapsed, tc.grace)
				}
			}
			if alive(sleeper) {
				t.Errorf("the command's child %d outlived the group", sleeper)
			}
			if left := existing(dirs); len(left) > 0 {
				t.Errorf("group directories left: %v", left)
			}
		})
	}
}

// TestKilledLauncherGroupIsSwept kills launchers the way a scheduler or a closed
// terminal does. A launcher killed with SIGKILL together with its watchdog leaves its
// group (and the command's children) behind: the next start of the other launcher
// command removes it and says so. A `run -cgroup` killed alone is cleaned up by its
// watchdog; one sent SIGHUP forwards it and removes the group itself.
func TestKilledLauncherGroupIsSwept(t *testing.T) {
	needCgroups(t)
	file := filepath.Join(t.TempDir(), "endless.yaml")
	if err := os.WriteFile(file, []byte(`source: {kind: generate, config: {items: 1000000000, width: 16, height: 16}}
stages: [decode, batch, collate]
sink: discard
resources: {memory: 256MiB, budget: 16MiB, pressure: off}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	short := filepath.Join(t.TempDir(), "short.yaml")
	if err := os.WriteFile(short, []byte(`source: {kind: generate, config: {items: 8, width: 16, height: 16}}
stages: [decode, batch, collate]
sink: discard
resources: {memory: 256MiB, pressure: off}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	runCgroup := func(f string) []string { return []string{"run", "-cgroup", "-every", "0", f} }
	sweepName := "sweep-" + itoaPid()
	tests := []struct {
		name     string
		launcher []string
		ready    string // stdout prefix once the command runs in the group
		group    func(pid int) string
		sig      syscall.Signal
		watchdog bool // the watchdog is killed first
		next     []string
		removed  bool // the group is gone without a next start
	}{
		{"run -cgroup and its watchdog SIGKILLed, swept by cgroup run", runCgroup(file), "psiflow run " + file,
			func(pid int) string { return "run-" + strconv.Itoa(pid) }, syscall.SIGKILL, true,
			[]string{"cgroup", "run", "--", "/bin/true"}, false},
		{"cgroup run and its watchdog SIGKILLed, swept by run -cgroup", []string{"cgroup", "run", "-name", sweepName, "--", "/bin/sh", "-c", "sleep 600 >/dev/null 2>&1 & echo ready; wait"}, "ready",
			func(int) string { return sweepName }, syscall.SIGKILL, true,
			runCgroup(short), false},
		{"run -cgroup SIGKILLed: its watchdog removes the group", runCgroup(file), "psiflow run " + file,
			func(pid int) string { return "run-" + strconv.Itoa(pid) }, syscall.SIGKILL, false, nil, true},
		{"run -cgroup SIGHUP: forwarded, the group removed", runCgroup(file), "psiflow run " + file,
			func(pid int) string { return "run-" + strconv.Itoa(pid) }, syscall.SIGHUP, false, nil, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			l := startLauncher(t, ctx, tc.launcher...)
			l.waitLine(t, ctx, tc.ready)
			name := tc.group(l.cmd.Process.Pid)
			dirs := groupDirs(t, name)
			t.Cleanup(func() {
				if tree, err := cgroup.DefaultTree(); err == nil {
					_, _ = tree.RemoveOrphans()
				}
			})
			if got := existing(dirs); len(got) != len(dirs) {
				t.Fatalf("group directories %v, want all of %v", got, dirs)
			}
			if tc.watchdog {
				wd := watchdogOf(t, l.cmd.Process.Pid)
				if err := syscall.Kill(wd, syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
				waitFor(t, time.Minute, "the watchdog to die", func() bool { return !alive(wd) })
			}
			if err := l.cmd.Process.Signal(tc.sig); err != nil {
				t.Fatal(err)
			}
			_ = l.wait(t)
			if tc.removed {
				waitFor(t, time.Minute, "the group to be removed", func() bool { return len(existing(dirs)) == 0 })
				return
			}
			if got := existing(dirs); len(got) != len(dirs) {
				t.Fatalf("the killed launcher left %v of %v: nothing for the next start to sweep", got, dirs)
			}
			next := startLauncher(t, ctx, tc.next...)
			if code := next.wait(t); code != 0 {
				t.Fatalf("next start %v: exit %d\n%s\n%s", tc.next, code, strings.Join(next.out, "\n"), next.stderr.String())
			}
			if want := "removed groups left by processes that are gone: "; !strings.Contains(next.stderr.String(), want) || !strings.Contains(next.stderr.String(), name) {
				t.Errorf("next start's stderr does not name %s:\n%s", name, next.stderr.String())
			}
			if left := existing(dirs); len(left) > 0 {
				t.Errorf("group directories left after the next start: %v", left)
			}
		})
	}
}

// watchdogOf returns the PID of the cgroup watchdog that launcher pid started.
func watchdogOf(t *testing.T, pid int) int {
	t.Helper()
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range tasks {
		b, _ := os.ReadFile(f)
		for _, c := range strings.Fields(string(b)) {
			argv, _ := os.ReadFile("/proc/" + c + "/cmdline")
			if strings.HasPrefix(string(argv), "psiflow-cgroup-watchdog\x00") {
				n, _ := strconv.Atoi(c)
				return n
			}
		}
	}
	t.Fatalf("launcher %d has no watchdog child", pid)
	return 0
}

// TestCgroupRunCtrlCOnATerminal runs `psiflow cgroup run` as the foreground job of a
// pseudo-terminal and types Ctrl-C: the terminal sends SIGINT to the command itself
// (it shares the launcher's process group there, so that it can read the terminal), and
// the launcher does not send it a second one; the command's trap runs and all exit 0.
func TestCgroupRunCtrlCOnATerminal(t *testing.T) {
	needCgroups(t)
	master, slave, err := openPty()
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	defer master.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "cgroup", "run", "-name", "ctrlc-"+itoaPid(), "-grace", "5m", "--",
		"/bin/sh", "-c", "trap 'echo trapped; exit 0' INT; sleep 600 >/dev/null 2>&1 & echo ready; wait")
	cmd.Env = append(os.Environ(), envTestAsMain+"=1")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	slave.Close()
	var out bytes.Buffer
	typed := false
	buf := make([]byte, 4096)
	for {
		n, err := master.Read(buf) // EIO once every process holding the terminal has exited
		out.Write(buf[:n])
		if !typed && strings.Contains(out.String(), "ready") {
			if _, err := master.Write([]byte{3}); err != nil {
				t.Fatal(err)
			}
			typed = true
		}
		if err != nil {
			break
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%v:\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "trapped") {
		t.Errorf("terminal output lacks the command's trap:\n%s", out.String())
	}
	// The terminal's SIGINT reaches the command and the launcher at once; the command
	// may exit on it before the launcher's runtime has handed the signal over. When
	// the launcher saw it, it says so and reports the exit after it.
	if strings.Contains(out.String(), "SIGINT (the terminal sent it to the command too)") &&
		!strings.Contains(out.String(), "/bin/sh exited with status 0") {
		t.Errorf("the launcher saw the SIGINT but did not report the exit after it:\n%s", out.String())
	}
	if strings.Contains(out.String(), "forwarded") {
		t.Errorf("the launcher sent a second SIGINT:\n%s", out.String())
	}
}
