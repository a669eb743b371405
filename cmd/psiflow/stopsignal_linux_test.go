//go:build linux

package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/psiflow/psiflow/internal/stopsig"
)

// TestEveryCommandStopsOnSignal sends SIGINT or SIGTERM to each long-running command
// as a process of its own (default flags but what keeps it running), once it has
// started its work: each ends, says which signal stopped it exactly once (not
// "context canceled", not twice as run -cgroup's launcher and child both did), and
// exits 128 + the signal's number (130, 143: what job schedulers look for; it used
// to be 1), or 0 for the live views. The bound on the exit is a hang check,
// generous for a loaded machine and -race; the times measured are in
// docs/HOSTILE-INPUT.md.
func TestEveryCommandStopsOnSignal(t *testing.T) {
	data := genFolder(t, 40)
	tests := []struct {
		name    string
		args    []string
		ready   string // a line containing this means the work has started
		sig     syscall.Signal
		code    int
		cgroups bool
		consume bool   // connect a consumer that takes the batches and never gives a slot back
		says    string // a line on stderr after the signal's contains this
		file    string // and then this file exists (OUT is the -out folder): the stop finds it
	}{
		{"demo synthetic", []string{"demo", "-items", "1000000000"}, "psiflow demo: ", syscall.SIGTERM, 143, false, false, "", ""},
		{"demo -data", []string{"demo", "-data", data, "-epochs", "100000"}, "  decode: ", syscall.SIGINT, 130, false, false, "", ""},
		{"run demo", []string{"run", "-every", "20ms", "-set", "source.items=1000000000", "demo"}, " samples ", syscall.SIGINT, 130, false, false, "", ""},
		{"run -cgroup demo", []string{"run", "-cgroup", "-every", "20ms", "-set", "source.items=1000000000", "demo"}, " samples ", syscall.SIGTERM, 143, true, false, "", ""},
		{"serve waiting for its consumer", []string{"serve", "-data", data, "-socket", "SOCK"}, "psiflow serve: listening on ", syscall.SIGTERM, 143, false, false, "", ""},
		{"serve, its consumer holding every slot", []string{"serve", "-data", data, "-socket", "SOCK", "-epochs", "100000"}, "psiflow serve: listening on ", syscall.SIGINT, 130, false, true, "", ""},
		{"gen jpeg", []string{"gen", "jpeg", "-out", "OUT", "-n", "10000000", "-bytes", "4KiB"}, "noise ", syscall.SIGINT, 130, false, false, "", ""},
		{"gen tar", []string{"gen", "tar", "-out", "OUT", "-shards", "1000", "-samples", "1000000", "-bytes", "4KiB"}, "noise ", syscall.SIGTERM, 143, false, false,
			"psiflow gen: removed the partial file OUT/shard-", "OUT/shard-000000.tar"}, // shard 0 or a later one,
		{"pressure watch", []string{"pressure", "watch"}, "watching memory pressure", syscall.SIGTERM, 0, false, false, "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.cgroups {
				needCgroups(t)
			}
			dir := t.TempDir()
			sock := filepath.Join(dir, "s.sock")
			args := append([]string(nil), tc.args...)
			for i, a := range args {
				switch a {
				case "SOCK":
					args[i] = sock
				case "OUT":
					args[i] = filepath.Join(dir, "out")
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			l := startLauncher(t, ctx, args...)
			l.waitContains(t, ctx, tc.ready)
			if tc.file != "" { // the progress line comes before the file is created
				waitFile(t, ctx, strings.ReplaceAll(tc.file, "OUT", filepath.Join(dir, "out")))
			}
			var c *torchClient
			if tc.consume {
				var err error
				if c, err = dialServe(ctx, sock); err != nil {
					t.Fatal(err)
				}
				defer c.close()
				for batches := 0; batches < 4; { // the ring's 4 slots, none released
					m, err := c.next()
					if err != nil {
						t.Fatalf("consumer: %v\nstderr: %s", err, l.stderr.String())
					}
					if m.T == "batch" {
						batches++
					}
				}
			}
			signalled := time.Now()
			if err := l.cmd.Process.Signal(tc.sig); err != nil {
				t.Fatal(err)
			}
			exited := make(chan int, 1)
			go func() { exited <- l.wait(t) }()
			var code int
			select {
			case code = <-exited:
			case <-time.After(30 * time.Second):
				t.Fatalf("still running 30 s after %s:\n%s\nstderr: %s", stopsig.Name(tc.sig), strings.Join(l.out, "\n"), l.stderr.String())
			}
			t.Logf("exit %d %v after %s", code, time.Since(signalled).Round(time.Millisecond), stopsig.Name(tc.sig))
			if c != nil { // the consumer is told why the stream ended, naming the signal
				for {
					m, err := c.next()
					if err != nil {
						t.Fatalf("consumer: no error message before %v", err)
					}
					if m.T == "error" {
						if want := "stopped by " + stopsig.Name(tc.sig); m.Message != want {
							t.Errorf("the consumer is told %q, want %q", m.Message, want)
						}
						break
					}
				}
			}
			all := strings.Join(l.out, "\n") + "\n" + l.stderr.String()
			if code != tc.code {
				t.Errorf("exit %d, want %d", code, tc.code)
			}
			want := "stopped by " + stopsig.Name(tc.sig)
			if n := strings.Count(all, "stopped by "); n != 1 || !strings.Contains(l.stderr.String(), want) {
				t.Errorf("%d lines say what stopped it, want one on stderr saying %q", n, want)
			}
			if tc.says != "" {
				if want := strings.ReplaceAll(tc.says, "OUT", filepath.Join(dir, "out")); !strings.Contains(l.stderr.String(), want) {
					t.Errorf("stderr does not say %q", want)
				}
			}
			for _, bad := range []string{"context canceled", "stopped by signal", "panic", "goroutine "} {
				if strings.Contains(all, bad) {
					t.Errorf("output has %q", bad)
				}
			}
			if t.Failed() {
				t.Logf("stdout:\n%s\nstderr:\n%s", strings.Join(l.out, "\n"), l.stderr.String())
			}
		})
	}
}

// waitContains reads lines until one contains s.
func (l *launcher) waitContains(t *testing.T, ctx context.Context, s string) {
	t.Helper()
	for {
		select {
		case line, ok := <-l.lines:
			if !ok {
				t.Fatalf("psiflow ended before a line with %q:\n%s\nstderr: %s", s, strings.Join(l.out, "\n"), l.stderr.String())
			}
			l.out = append(l.out, line)
			if strings.Contains(line, s) {
				return
			}
		case <-ctx.Done():
			t.Fatalf("no line with %q before the deadline:\n%s", s, strings.Join(l.out, "\n"))
		}
	}
}

// TestSummaryOfAFailedFileSink fills a small tmpfs under demo's Parquet sink: the
// run fails naming the part file and the full disk, and its summary, which counts
// the samples the sink accepted before the failure, says that none was kept (the
// sink removed the run's output): it used to read as if they were written.
func TestSummaryOfAFailedFileSink(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	disk := t.TempDir()
	if err := unix.Mount("tmpfs", disk, "tmpfs", 0, "size=2m"); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(disk, 0) })
	data := genFolder(t, 20)
	var out, errOut bytes.Buffer
	code := dispatch(context.Background(), &out, &errOut, []string{"demo", "-data", data, "-batch", "4", "-pressure=false", "-sink", "parquet:" + filepath.Join(disk, "pq")})
	if code != 1 || !strings.Contains(errOut.String(), "write "+filepath.Join(disk, "pq", "part-00000.parquet")+": no space left on device") {
		t.Fatalf("exit %d, want 1 naming the part file on a full disk:\n%s", code, errOut.String())
	}
	if !strings.Contains(out.String(), "none of these samples were kept: the sink failed and removed this run's output") {
		t.Fatalf("the summary does not say the output was removed:\n%s", out.String())
	}
	if ents, err := os.ReadDir(filepath.Join(disk, "pq")); err != nil || len(ents) != 0 {
		t.Fatalf("the folder holds %v (%v)", ents, err)
	}
}

// TestStoppedSinkSaysWhatWasNotWritten stops, with SIGTERM, a run whose batches go
// to a Parquet folder or an Arrow file, once the sink's temporary file is there:
// the sink removes this run's output (a run that did not finish leaves nothing
// half-written), and psiflow says so in one line naming the destination, after
// the signal's line (it used to remove it silently), and exits 143.
func TestStoppedSinkSaysWhatWasNotWritten(t *testing.T) {
	data := genFolder(t, 40)
	for _, tc := range []struct {
		name string
		args func(dest string) []string
		kind string
		file bool // dest is a file (Arrow), else a folder (Parquet)
	}{
		{"demo parquet", func(dest string) []string {
			return []string{"demo", "-data", data, "-epochs", "100000", "-sink", "parquet:" + dest}
		}, "parquet", false},
		{"demo arrow", func(dest string) []string {
			return []string{"demo", "-data", data, "-epochs", "100000", "-sink", "arrow:" + dest}
		}, "arrow", true},
		{"run parquet", func(dest string) []string {
			file := filepath.Join(filepath.Dir(dest), "p.yaml")
			yaml := "name: pq\nepochs: 100000\nsource: {kind: files, name: read, config: {dir: \"" + data + "\"}}\n" +
				"stages:\n  - {kind: decode, config: {label: folder, resize: 32, center_crop: 32}}\n  - {kind: batch, config: {size: 8}}\n  - collate\n" +
				"sink: {kind: parquet, name: out, config: {dir: \"" + dest + "\"}}\n"
			if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
				t.Fatal(err)
			}
			return []string{"run", file}
		}, "parquet", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			dest := filepath.Join(dir, "out")
			where := dest // the folder the sink writes its temporary files in
			if tc.file {
				where = dir
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			l := startLauncher(t, ctx, tc.args(dest)...)
			go func() { // the launcher's stdout must be read for it to go on
				for line := range l.lines {
					_ = line
				}
			}()
			// Wait (bounded) for the sink's hidden temporary file: a batch is in it.
			temp := func() bool {
				ents, _ := os.ReadDir(where)
				for _, e := range ents {
					if strings.Contains(e.Name(), ".tmp-") {
						return true
					}
				}
				return false
			}
			for deadline := time.Now().Add(2 * time.Minute); !temp(); time.Sleep(20 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("no temporary file of the sink after 2 minutes:\n%s", l.stderr.String())
				}
			}
			if err := l.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			code := l.wait(t)
			stderr := l.stderr.String()
			want := "sink " + tc.kind + ": " + dest + " was not written: the run did not finish"
			if code != 143 || strings.Count(stderr, want) != 1 || strings.Count(stderr, "stopped by SIGTERM") != 1 {
				t.Fatalf("exit %d, want 143 with one line %q and one saying SIGTERM:\n%s", code, want, stderr)
			}
			if tc.file {
				if _, err := os.Lstat(dest); !os.IsNotExist(err) {
					t.Errorf("the Arrow file is there (%v)", err)
				}
			}
			ents, _ := os.ReadDir(where)
			for _, e := range ents {
				if strings.Contains(e.Name(), ".tmp-") || strings.HasSuffix(e.Name(), ".parquet") || strings.HasSuffix(e.Name(), ".arrow") {
					t.Errorf("left behind: %s", e.Name())
				}
			}
		})
	}
}

// waitFile polls until path exists, failing the test when ctx ends first.
func waitFile(t *testing.T, ctx context.Context, path string) {
	t.Helper()
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s never appeared: %v", path, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}
