package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestSmallMemoryLimits runs run and demo -data, with their default flags, under
// real cgroup memory limits (psiflow cgroup run -memory-max, the v1 memory
// controller on hybrid hosts): under a limit that cannot hold the loader's floor
// each refuses at once, naming the limit, the floor and the limit that would do;
// under one that can, every sample is read. Neither is OOM-killed, and the group
// is gone afterwards. The bounds are loose: the floor is about 30 MiB here (two
// batches of 224×224 output and decode scratch) and the kernel decides the rest.
func TestSmallMemoryLimits(t *testing.T) {
	needCgroups(t)
	bin := psiflowBinary(t)  // without -race: its shadow memory alone exceeds these limits
	data := genFolder(t, 50) // 100 samples
	for _, tt := range []struct {
		limit   string
		cmd     []string
		refused bool
	}{
		{"4MiB", []string{"run", "-every", "0", "-set", "source.dir=" + data, "imagefolder"}, true},
		{"24MiB", []string{"run", "-every", "0", "-set", "source.dir=" + data, "imagefolder"}, true},
		{"24MiB", []string{"demo", "-data", data}, true},
		{"96MiB", []string{"run", "-every", "0", "-set", "source.dir=" + data, "imagefolder"}, false},
		{"96MiB", []string{"demo", "-data", data}, false},
	} {
		t.Run(tt.cmd[0]+"/"+tt.limit, func(t *testing.T) {
			name := fmt.Sprintf("smalllimit-%d-%s-%s", os.Getpid(), tt.cmd[0], tt.limit)
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, append([]string{"cgroup", "run", "-name", name, "-memory-max", tt.limit, "--", bin}, tt.cmd...)...)
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			err := cmd.Run()
			text := out.String()
			noStackDump(t, text)
			if ctx.Err() != nil {
				t.Fatalf("still running after 3 minutes (a pause without end?):\n%s", text)
			}
			if !strings.Contains(text, "oom kills 0") {
				t.Fatalf("not 'oom kills 0' (%v):\n%s", err, text)
			}
			if left := existing(groupDirs(t, name)); len(left) > 0 {
				t.Fatalf("group left behind: %v", left)
			}
			if tt.refused {
				lim := strings.TrimSuffix(tt.limit, "MiB") + " MiB"
				re := regexp.MustCompile(`the memory limit of ` + lim + ` \(.*memory.limit_in_bytes\) is too small for this loader: .* floor of [0-9.]+ MiB .* Raise the limit to at least ([0-9.]+) MiB`)
				if err == nil || !re.MatchString(text) || !strings.Contains(text, "exit status 3") || cmd.ProcessState.ExitCode() != 3 {
					t.Fatalf("exit %v: want the start refused (exit status 3) naming the limit, the floor and the limit that would do:\n%s", err, text)
				}
				if strings.Contains(text, "NaN") || strings.Contains(text, "Inf") {
					t.Fatalf("the summary of a run that never started shows NaN or Inf:\n%s", text)
				}
				return
			}
			if err != nil || !strings.Contains(text, "\n100 samples in ") {
				t.Fatalf("exit %v: want all 100 samples:\n%s", err, text)
			}
		})
	}
}

// TestServeRefusesBeforeItsConsumer: a serve that cannot run (a memory limit below
// its floor, a rank with no samples) says so at start, with its exit status,
// instead of waiting for a consumer to connect (here no consumer ever does, and
// the accept timeout is ten minutes: serve used to wait for it), and never says
// it is listening (it used to, before its checks, then fail), nor makes its
// socket before they passed.
func TestServeRefusesBeforeItsConsumer(t *testing.T) {
	bin := psiflowBinary(t) // without -race: its shadow memory alone exceeds the limit
	data := genFolder(t, 10)
	empty := t.TempDir()
	for _, tc := range []struct {
		name    string
		cgroup  []string // the cgroup run that serve runs under (nil: none)
		env     []string
		code    int
		message string
		data    string // the folder served; "": the 10 images of each class
	}{
		{"empty folder", nil, nil, 1, "empty dataset", empty},
		{"memory limit below the floor", []string{"cgroup", "run", "-memory-max", "24MiB", "-name", fmt.Sprintf("serve-refused-%d", os.Getpid()), "--"}, nil,
			3, "the memory limit of 24 MiB", ""},
		{"rank without samples", nil, []string{"RANK=25", "WORLD_SIZE=30"},
			1, "rank 25 of world size 30 gets no samples of its own: the dataset has 20", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.cgroup != nil {
				needCgroups(t)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			// bin [cgroup run ... -- bin] serve ...
			dir := data
			if tc.data != "" {
				dir = tc.data
			}
			// The socket's path holds a regular file: serve must fail its checks
			// without touching it (the socket is made only once they passed; it
			// used to be made first, so a client could connect to a server about
			// to fail, and this file was refused before any check ran).
			sock := filepath.Join(t.TempDir(), "s.sock")
			if err := os.WriteFile(sock, []byte("not a socket"), 0o644); err != nil {
				t.Fatal(err)
			}
			args := append(append([]string(nil), tc.cgroup...), "serve", "-data", dir, "-socket", sock, "-accept-timeout", "10m")
			if tc.cgroup != nil {
				args = append(append(append([]string(nil), tc.cgroup...), bin), args[len(tc.cgroup):]...)
			}
			cmd := exec.CommandContext(ctx, bin, args...)
			cmd.Env = append(os.Environ(), tc.env...)
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			err := cmd.Run()
			if ctx.Err() != nil {
				t.Fatalf("still waiting after 2 minutes (for a consumer?):\n%s", out.String())
			}
			if code := cmd.ProcessState.ExitCode(); code != tc.code || !strings.Contains(out.String(), tc.message) {
				t.Fatalf("exit %d (%v), want %d and %q:\n%s", code, err, tc.code, tc.message, out.String())
			}
			if strings.Contains(out.String(), "listening") {
				t.Fatalf("a serve that failed its start-up checks said it was listening:\n%s", out.String())
			}
			if b, err := os.ReadFile(sock); err != nil || string(b) != "not a socket" {
				t.Fatalf("serve touched its socket's path before its checks passed: %q, %v", b, err)
			}
		})
	}
}
