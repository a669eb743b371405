//go:build linux

package imagefolder

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/psiflow/psiflow/cgroup"
	"github.com/psiflow/psiflow/pipelines"
	"github.com/psiflow/psiflow/pipelines/progress"
	"github.com/psiflow/psiflow/uma/umacache"
)

func init() { helpers["cache-reclaim"] = cacheReclaimChild }

// cacheResult is what the child prints as its last line.
type cacheResult struct {
	Epochs    []map[string]uint64
	Dups      []string
	Stats     umacache.Stats
	Taken     int
	BallastMB int
	Hits      []float64
}

// TestCacheReclaimedByTheKernel runs the pipeline with a decoded cache in a
// memory-limited cgroup. Between the epochs the child allocates anonymous memory
// until the kernel has reclaimed part of the cache (lazily freed pages are taken
// first); epoch 2 must still deliver every sample once, byte for byte equal to
// the uncached epoch 1.
func TestCacheReclaimedByTheKernel(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skipping the child process in a memory-limited cgroup")
	}
	name := fmt.Sprintf("imagefolder-TestCacheReclaimed-%d", os.Getpid())
	g, err := cgroup.New(name)
	if err != nil {
		t.Skipf("kernel refuses a child cgroup here: %v", err)
	}
	t.Cleanup(func() {
		if err := g.Remove(); err != nil {
			t.Errorf("removing cgroup %s: %v", name, err)
		}
	})
	const limit = 256 << 20
	if err := g.SetMemoryMax(limit); err != nil {
		t.Skipf("kernel refuses a memory limit on cgroup %s: %v", name, err)
	}
	root := t.TempDir()
	writeBigFolder(t, root, 160)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=cache-reclaim", "PSIFLOW_TEST_DATA="+root)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := g.Start(cmd); err != nil {
		t.Fatalf("starting the child in cgroup %s: %v", name, err)
	}
	err = cmd.Wait()
	ev, _ := g.MemoryEvents()
	if err != nil {
		t.Fatalf("child: %v (memory events %+v)\n%s", err, ev, tail(out.String()))
	}
	var res cacheResult
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil {
		t.Fatalf("child's last line is not its result: %v\n%s", err, tail(out.String()))
	}
	t.Logf("child: ballast %d MiB, %d entries taken before epoch 2, stats %+v, hit rates %v", res.BallastMB, res.Taken, res.Stats, res.Hits)
	if ev.OOMKill > 0 {
		t.Fatalf("the kernel OOM-killed %d processes: the cache did not give its memory back", ev.OOMKill)
	}
	if len(res.Dups) > 0 {
		t.Fatalf("samples delivered twice in one epoch: %v", res.Dups)
	}
	if len(res.Epochs) != 2 {
		t.Fatalf("%d epochs recorded", len(res.Epochs))
	}
	sameSamples(t, "epoch 2 against the uncached epoch 1", res.Epochs[1], res.Epochs[0])
	if res.Stats.Reclaimed < 1 {
		t.Fatalf("the kernel reclaimed no cache entry (taken %d, ballast %d MiB): the test did not exercise reclaim", res.Taken, res.BallastMB)
	}
}

func tail(s string) string {
	if len(s) > 4000 {
		return "…" + s[len(s)-4000:]
	}
	return s
}

// writeBigFolder writes n 256×256 JPEGs (224×224 after the crop: 147 KiB tensors).
func writeBigFolder(t *testing.T, root string, n int) {
	t.Helper()
	dir := filepath.Join(root, "class0")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	m := image.NewRGBA(image.Rect(0, 0, 256, 256))
	for i := range n {
		for y := 0; y < 256; y++ {
			for x := 0; x < 256; x++ {
				m.SetRGBA(x, y, color.RGBA{uint8(x + i), uint8(y * i), uint8(x ^ y), 255})
			}
		}
		var b bytes.Buffer
		if err := jpeg.Encode(&b, m, &jpeg.Options{Quality: 80}); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%04d.jpg", i)), b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// cacheReclaimChild runs in the limited cgroup and prints a cacheResult.
func cacheReclaimChild() error {
	self, err := cgroup.Self()
	if err != nil {
		return err
	}
	limit, limited, err := self.MemoryLimit()
	if err != nil || !limited {
		return fmt.Errorf("child has no memory limit (%v)", err)
	}
	p, err := New(os.Getenv("PSIFLOW_TEST_DATA"), "decode.workers=2", "epochs=2", "resources.budget=16MiB",
		"decode.resize=224", "decode.center_crop=224", "resources.cache=decoded", "resources.cache_max=96MiB")
	if err != nil {
		return err
	}
	var rec epochRecord
	rec.next()
	var cache *umacache.Cache
	var res cacheResult
	var ballast [][]byte
	defer func() {
		for _, b := range ballast {
			_ = unix.Munmap(b)
		}
	}()
	var childErr error
	sum, err := pipelines.Run(context.Background(), p, pipelines.Hooks{
		Batches: rec.consume,
		OnCache: func(c *umacache.Cache) { cache = c },
		OnEpoch: func(n int, _ progress.Epoch) {
			if n != 0 {
				return
			}
			// Allocate until a quarter of the entries are taken, keeping the
			// rest of the group (counted generously: page cache included)
			// 8 MiB under the limit so nothing needs an OOM kill.
			cur, err := self.MemoryCurrent()
			if err != nil {
				childErr = err
				return
			}
			room := limit - (cur - cache.Stats().Bytes) - 8<<20
			for total := int64(0); total+4<<20 <= room; total += 4 << 20 {
				b, err := unix.Mmap(-1, 0, 4<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
				if err != nil {
					childErr = err
					return
				}
				ballast = append(ballast, b)
				for k := 0; k < len(b); k += 4096 {
					b[k] = 1
				}
				if res.Taken, err = cache.Taken(); err != nil {
					childErr = err
					return
				}
				if res.Taken >= int(cache.Stats().Entries)/4 {
					break
				}
			}
			res.BallastMB = len(ballast) * 4
			for _, b := range ballast { // give it back: epoch 2 re-decodes what was taken
				_ = unix.Munmap(b)
			}
			ballast = nil
			rec.next()
		},
	})
	if err != nil {
		return err
	}
	if childErr != nil {
		return childErr
	}
	res.Epochs, res.Dups, res.Stats = rec.epochs, rec.dups, cache.Stats()
	for _, e := range sum.Epochs {
		res.Hits = append(res.Hits, e.HitRate())
	}
	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	return json.NewEncoder(w).Encode(res)
}
