package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// DataFiles returns the regular files under dir (recursively, symbolic links not
// followed), sorted: the list to pass as Options.Data.
func DataFiles(dir string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("harness: list data %s: %w", dir, err)
	}
	slices.Sort(out)
	return out, nil
}

// WarmCache reads every file through once, so that its pages are in the page cache
// (charged to the caller's cgroup). Pages may be reclaimed again later: under memory
// pressure, or by a host's proactive reclaim (DAMON on the project's machines evicts
// unmapped file pages after about a minute), so warm right before each run.
func WarmCache(paths []string) error {
	buf := make([]byte, 1<<20)
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return fmt.Errorf("harness: warm cache: %w", err)
		}
		for {
			_, err = f.Read(buf)
			if err != nil {
				break
			}
		}
		f.Close()
		if !errors.Is(err, io.EOF) {
			return fmt.Errorf("harness: warm cache: read %s: %w", p, err)
		}
	}
	return nil
}

// Prewarm runs argv to its end in the caller's cgroup (see Options.Prewarm), within
// timeout (none when it is zero or less). A command that cannot start, fails or runs
// past timeout is an error naming it, with the end of its standard error.
func Prewarm(ctx context.Context, argv []string, timeout time.Duration) error {
	if len(argv) == 0 {
		return fmt.Errorf("harness: prewarm: empty command")
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	if err == nil {
		return nil
	}
	if ctx.Err() != nil && timeout > 0 && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		err = fmt.Errorf("did not end within %v", timeout)
	}
	msg := strings.TrimSpace(stderr.String())
	if len(msg) > stderrTail {
		msg = "…" + msg[len(msg)-stderrTail:]
	}
	if msg != "" {
		return fmt.Errorf("harness: prewarm %q: %w: %s", strings.Join(argv, " "), err, msg)
	}
	return fmt.Errorf("harness: prewarm %q: %w", strings.Join(argv, " "), err)
}
