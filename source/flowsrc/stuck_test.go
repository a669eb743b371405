//go:build linux

package flowsrc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/psiflow/psiflow/flow"
	"github.com/psiflow/psiflow/internal/stuckfs"
	"github.com/psiflow/psiflow/source"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestCancelledGraphEndsWithAReadInFlight cancels a graph while a real read
// of a regular file is held in the kernel (a FUSE file whose reads do not
// answer). The graph ends either way: io_uring cancels the read where the
// file system honours interrupts; where nothing can take the read back
// (pread, or a daemon that ignores interrupts) the source waits CloseGrace,
// names the file in the log and ends without it. Once the storage answers,
// the left-behind iterator gives back every byte of the budget.
func TestCancelledGraphEndsWithAReadInFlight(t *testing.T) {
	backends := []source.Backend{source.BackendPread}
	if st := source.IOStatus(); st.Backend == source.BackendURing {
		backends = append(backends, source.BackendURing)
	}
	for _, b := range backends {
		for _, honour := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/interrupts-honoured=%v", b, honour), func(t *testing.T) {
				files := map[string][]byte{}
				var paths []string
				for i := range 6 {
					name := fmt.Sprintf("%d.bin", i)
					files[name] = bytes.Repeat([]byte{byte(i)}, 20000+i)
				}
				fs := stuckfs.MountT(t, stuckfs.Options{Files: files, Stuck: []string{"3.bin"}, HonourInterrupts: honour})
				for i := range 6 {
					paths = append(paths, filepath.Join(fs.Dir, fmt.Sprintf("%d.bin", i)))
				}
				var logs syncBuffer
				logger := slog.New(slog.NewTextHandler(&logs, nil))
				g := flow.New("stuck", flow.WithBudget(64<<20))
				src := Files(g, "read", source.NewFiles(paths), source.Options{WorldSize: 1, Workers: 1,
					Reader: source.ReaderOptions{Backend: b, Logger: logger}})
				var got []string
				flow.Sink(src, "check", func(ctx context.Context, s *source.Sample) error {
					if !bytes.Equal(s.Field("bin"), files[filepath.Base(s.Key)]) {
						t.Errorf("%s: bytes differ", s.Key)
					}
					got = append(got, filepath.Base(s.Key))
					return nil
				})
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				ran := make(chan error, 1)
				go func() { ran <- g.Run(ctx) }()
				select {
				case <-fs.ReadStarted():
				case err := <-ran:
					t.Fatalf("the graph ended (%v) before the read of 3.bin reached the file system", err)
				case <-time.After(time.Minute):
					t.Fatal("the read of 3.bin never reached the file system")
				}
				cancel()
				start := time.Now()
				select {
				case err := <-ran:
					if !errors.Is(err, context.Canceled) {
						t.Fatalf("run: %v, want context.Canceled", err)
					}
				case <-time.After(time.Minute):
					fs.Unblock()
					t.Fatal("a cancelled graph did not end while a read was held in the kernel")
				}
				t.Logf("ended %v after the cancel; delivered %v", time.Since(start).Round(time.Millisecond), got)
				if strings.Join(got, " ") != strings.Join([]string{"0.bin", "1.bin", "2.bin"}[:len(got)], " ") {
					t.Fatalf("delivered %v, want a prefix of 0.bin 1.bin 2.bin", got)
				}
				interruptible := b == source.BackendURing && honour
				warned := strings.Contains(logs.String(), "still in the kernel")
				if !interruptible && (!warned || !strings.Contains(logs.String(), paths[3])) {
					t.Errorf("the log does not name %s as left in the kernel:\n%s", paths[3], logs.String())
				}
				fs.Unblock()
				deadline := time.Now().Add(time.Minute)
				for g.Budget().InUse() != 0 {
					if time.Now().After(deadline) {
						t.Fatalf("the budget still holds %d bytes a minute after the storage answered", g.Budget().InUse())
					}
					time.Sleep(10 * time.Millisecond)
				}
			})
		}
	}
}
