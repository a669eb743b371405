//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/psiflow/psiflow/internal/stopsig"
)

// TestStopSignal sends SIGINT or SIGTERM to psiflow-imagefolder once its first
// batch is out: it ends with exit status 128 + the signal's number (130, 143;
// it was 1, with "context canceled"), says once on stderr which signal stopped
// it, and its protocol's done event carries the same words. The bound on the
// exit is a hang check, generous for a loaded machine and -race.
func TestStopSignal(t *testing.T) {
	root := writeFolder(t, 21)
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(stopsig.Name(sig), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0], "-data", root, "-epochs", "1000000", "-batch", "4")
			cmd.Env = append(os.Environ(), envAsMain+"=1")
			cmd.WaitDelay = 10 * time.Second
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			sc := bufio.NewScanner(stdout)
			sc.Buffer(make([]byte, 1<<20), 1<<20)
			var lines []string
			signalled := false
			for sc.Scan() {
				lines = append(lines, sc.Text())
				if !signalled && strings.Contains(sc.Text(), `"event":"batch"`) {
					if err := cmd.Process.Signal(sig); err != nil {
						t.Fatal(err)
					}
					signalled = true
				}
			}
			err = cmd.Wait()
			if !signalled {
				t.Fatalf("no batch before exit (%v):\n%s", err, stderr.String())
			}
			want := 128 + int(sig)
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != want {
				t.Fatalf("exit %v after %s, want status %d:\n%s", err, sig, want, stderr.String())
			}
			msg := "stopped by " + stopsig.Name(sig)
			if n := strings.Count(stderr.String(), "stopped by"); n != 1 || !strings.Contains(stderr.String(), "psiflow-imagefolder: "+msg+"\n") {
				t.Errorf("stderr says what stopped it %d times, want once %q:\n%s", n, msg, stderr.String())
			}
			if last := lines[len(lines)-1]; !strings.Contains(last, `"event":"done"`) || !strings.Contains(last, `"error":"`+msg+`"`) {
				t.Errorf("the last event is %s, want done with error %q", last, msg)
			}
			if all := strings.Join(lines, "\n") + stderr.String(); strings.Contains(all, "context canceled") || strings.Contains(all, "panic") {
				t.Errorf("output has context canceled or a panic:\n%s", stderr.String())
			}
		})
	}
}
