//go:build linux

package cgroup

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/psiflow/psiflow/internal/kerneltest"
)

// childMain runs the test binary as a helper child. Modes:
//
//	alloc:N     print /proc/self/cgroup, touch N MiB, print "ready", wait for stdin EOF
//	spin:D      burn CPU for duration D on every core, then exit
//	fork:N      start N children sleeping on stdin; print how many failed with EAGAIN
func childMain(mode string) int {
	kind, arg, _ := strings.Cut(mode, ":")
	switch kind {
	case "alloc":
		mib, _ := strconv.Atoi(arg)
		cg, _ := os.ReadFile("/proc/self/cgroup")
		os.Stdout.Write(cg)
		buf := make([]byte, mib<<20)
		for i := 0; i < len(buf); i += 4096 {
			buf[i] = 1
		}
		fmt.Println("ready")
		io.Copy(io.Discard, os.Stdin)
		runtime.KeepAlive(buf)
		return 0
	case "spin":
		d, _ := time.ParseDuration(arg)
		end := time.Now().Add(d)
		done := make(chan struct{})
		for range runtime.NumCPU() {
			go func() {
				for time.Now().Before(end) {
				}
				done <- struct{}{}
			}()
		}
		for range runtime.NumCPU() {
			<-done
		}
		return 0
	case "cpu":
		// Spin until the process has used d of CPU time, however long the
		// scheduler takes to grant it (a loaded machine gives a spinner of wall
		// time only a fraction of a core).
		// Eight spinning threads, so that even on a machine whose cores are
		// shared by many runnable threads the child asks for more than its quota.
		const threads = 8
		runtime.GOMAXPROCS(threads)
		d, _ := time.ParseDuration(arg)
		done := make(chan struct{})
		used := func() time.Duration {
			var ru syscall.Rusage
			_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
			return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		}
		for range threads {
			go func() {
				for used() < d {
				}
				done <- struct{}{}
			}()
		}
		for range threads {
			<-done
		}
		return 0
	case "fork":
		n, _ := strconv.Atoi(arg)
		failed := 0
		var cmds []*exec.Cmd
		for range n {
			c := exec.Command("/bin/sleep", "30")
			if err := c.Start(); err != nil {
				failed++
				continue
			}
			cmds = append(cmds, c)
		}
		for _, c := range cmds {
			c.Process.Kill()
			c.Wait()
		}
		fmt.Println("failed", failed)
		return 0
	}
	fmt.Fprintln(os.Stderr, "unknown child mode", mode)
	return 2
}

// helperCmd returns a command that runs the test binary in child mode.
func helperCmd(mode string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	// GORACE: the race runtime otherwise sleeps 1 s at exit in every child.
	cmd.Env = append(os.Environ(), envChild+"="+mode, "GORACE=atexit_sleep_ms=0")
	cmd.Stderr = os.Stderr
	return cmd
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// newTestGroup creates a uniquely named group in tree and removes it when the test ends,
// also on failure. It skips when not root.
func newTestGroup(t *testing.T, tree *Tree) *Group {
	t.Helper()
	if os.Geteuid() != 0 {
		kerneltest.Skip(t, kerneltest.Cgroups, "creating cgroups needs root")
	}
	name := fmt.Sprintf("test-%s-%d", unsafeName.ReplaceAllString(t.Name(), "_"), os.Getpid())
	g, err := tree.New(name)
	if err != nil {
		t.Fatalf("New(%q): %v", name, err)
	}
	t.Cleanup(func() {
		if err := g.Remove(); err != nil {
			t.Errorf("Remove: %v", err)
		}
	})
	return g
}

// realTree opens the host's tree or skips.
func realTree(t *testing.T) *Tree {
	t.Helper()
	tree, err := DefaultTree()
	if err != nil {
		kerneltest.Skip(t, kerneltest.Cgroups, "no cgroup file system: %v", err)
	}
	return tree
}

// startAlloc starts an alloc child in g and waits for it to be ready. It returns the
// child's /proc/self/cgroup text and a function that lets the child exit and waits.
func startAlloc(t *testing.T, g *Group, mib int) (cgroupText string, finish func() error) {
	t.Helper()
	cmd := helperCmd(fmt.Sprintf("alloc:%d", mib))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Start(cmd); err != nil {
		t.Fatalf("Start: %v", err)
	}
	waited := false
	finish = func() error {
		if waited {
			return nil
		}
		waited = true
		stdin.Close()
		io.Copy(io.Discard, stdout)
		return cmd.Wait()
	}
	t.Cleanup(func() { cmd.Process.Kill(); finish() })
	var sb strings.Builder
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if sc.Text() == "ready" {
			return sb.String(), finish
		}
		sb.WriteString(sc.Text() + "\n")
	}
	err = finish()
	t.Fatalf("child exited before ready: %v (output %q)", err, sb.String())
	return "", nil
}

func osGetpid() int { return os.Getpid() }

// blockingReader returns a reader that blocks until the test ends.
func blockingReader(t *testing.T) io.Reader {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close(); r.Close() })
	return r
}

func fmtSscan(s string, v *uint32) (int, error) { return fmt.Sscan(s, v) }
