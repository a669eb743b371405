package main

import (
	"bytes"
	"context"
	"os"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/psiflow/psiflow/internal/kerneltest"
)

func needCgroups(t *testing.T) {
	t.Helper()
	if runtime.GOOS != "linux" || os.Geteuid() != 0 {
		kerneltest.Skip(t, kerneltest.Cgroups, "needs Linux and root to create cgroups")
	}
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip("no /bin/sh")
	}
}

func TestCgroupRun(t *testing.T) {
	needCgroups(t)
	tests := []struct {
		name    string
		args    []string
		code    int
		out     string
		errPart string
		// minOOM > 0: the kernel decides how many processes it kills (the
		// shell, tr, or both), so assert at least this many.
		minOOM int
	}{
		{"ok", []string{"cgroup", "run", "-memory-max", "256MiB", "-cpus", "1", "-pids-max", "64", "-cpu-weight", "200", "--", "/bin/sh", "-c", "echo hello"}, 0, "hello\ncgroup psiflow/test-TestCgroupRun_ok-", "", 0},
		// The command's exit status is psiflow's, as timeout and env pass it through.
		{"exit status", []string{"cgroup", "run", "--", "/bin/sh", "-c", "exit 3"}, 3, "oom kills 0", "exit status 3", 0},
		{"exit status 255", []string{"cgroup", "run", "--", "/bin/sh", "-c", "exit 255"}, 255, "oom kills 0", "exit status 255", 0},
		{"killed by a signal: 128+signal", []string{"cgroup", "run", "--", "/bin/sh", "-c", "kill -TERM $$"}, 128 + 15, "oom kills 0", "signal: terminated", 0},
		{"not found", []string{"cgroup", "run", "--", "psiflow-no-such-command"}, 127, "", "executable file not found", 0},
		{"not executable", []string{"cgroup", "run", "--", "/dev/null"}, 127, "", "/dev/null", 0},
		{"oom", []string{"cgroup", "run", "-memory-max", "32MiB", "--", "/bin/sh", "-c", "x=$(head -c 100000000 /dev/zero | tr '\\0' a); echo done"}, 128 + 9, "oom kills ", "killed", 1},
		{"no command", []string{"cgroup", "run", "-memory-max", "1GiB"}, 2, "", "no command", 0},
		{"bad size", []string{"cgroup", "run", "-memory-max", "lots", "--", "/bin/true"}, 2, "", "size \"lots\"", 0},
		{"bad adaptive", []string{"cgroup", "run", "-adaptive-cpus", "2", "--", "/bin/true"}, 2, "", "MIN:MAX", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			args := append([]string(nil), tc.args...)
			if i := indexOf(args, "run"); i >= 0 {
				name := "-name=test-" + strings.ReplaceAll(t.Name(), "/", "_") + "-" + itoaPid()
				args = append(args[:i+1], append([]string{name}, args[i+1:]...)...)
			}
			code := dispatch(context.Background(), &out, &errOut, args)
			if code != tc.code || !strings.Contains(out.String(), tc.out) || !strings.Contains(errOut.String(), tc.errPart) {
				t.Fatalf("exit %d (want %d)\nstdout: %s\nstderr: %s", code, tc.code, out.String(), errOut.String())
			}
			if tc.minOOM > 0 {
				m := regexp.MustCompile(`oom kills (\d+)`).FindStringSubmatch(out.String())
				if m == nil {
					t.Fatalf("no oom kill count in %q", out.String())
				}
				if n, _ := strconv.Atoi(m[1]); n < tc.minOOM {
					t.Fatalf("%d oom kills, want at least %d\nstdout: %s", n, tc.minOOM, out.String())
				}
			}
		})
	}
}

func TestCgroupShow(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("Linux-only")
	}
	var out, errOut bytes.Buffer
	if code := dispatch(context.Background(), &out, &errOut, []string{"cgroup", "show"}); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	for _, want := range []string{"layout: ", "group: ", "effective memory limit: ", "memory.pressure: "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("show lacks %q:\n%s", want, out.String())
		}
	}
}

func indexOf(list []string, s string) int {
	for i, x := range list {
		if x == s {
			return i
		}
	}
	return -1
}

func itoaPid() string { return strconv.Itoa(os.Getpid()) }
