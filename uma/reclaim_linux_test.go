//go:build linux

package uma

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/psiflow/psiflow/cgroup"
	"golang.org/x/sys/unix"

	"github.com/psiflow/psiflow/internal/kerneltest"
)

func init() { helpers["reclaim"] = reclaimChild }

// nonResident counts chunk i's pages that mincore reports absent.
func nonResident(t testing.TB, a *Arena, i int) int {
	t.Helper()
	r, pages := a.residentPages(a.span(i))
	if r < 0 {
		t.Fatalf("mincore on chunk %d failed", i)
	}
	return pages - r
}

func TestReclaimedChunkIsRehydrated(t *testing.T) {
	t.Run("deterministic", testReclaimDeterministic)
	t.Run("cgroup", testReclaimCgroup)
}

// testReclaimDeterministic makes "the kernel took it" happen at once (MADV_FREE,
// then takeByKernel), including the case mincore cannot see: a page read after
// reclaim maps the zero page and reads as resident.
func testReclaimDeterministic(t *testing.T) {
	ctx := context.Background()
	u := newTestUMA(t, testConfig())
	var src patternRehydrate
	a, err := u.NewArena("shard-0", 8*u.ChunkSize(), ArenaOptions{Rehydrate: src.fn})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.Hydrate(ctx, 0, a.Size()); err != nil {
		t.Fatal(err)
	}
	if src.calls != 8 {
		t.Fatalf("lazy hydration read %d chunks, want 8", src.calls)
	}
	res, err := a.MarkPreemptible(ctx, 1)
	if err != nil || res.Marked != 8 {
		t.Fatalf("MarkPreemptible(1) = %+v, %v; want 8 marked", res, err)
	}
	page := u.page
	// Chunks 0-2: reclaimed whole; chunk 3: half its pages; chunks 4-7 untouched.
	for i := 0; i < 3; i++ {
		takeByKernel(t, u, a.span(i))
	}
	takeByKernel(t, u, a.span(3)[:len(a.span(3))/2])
	if n := nonResident(t, a, 0); n == 0 {
		t.Fatal("chunk 0 is still resident after the kernel took it")
	}
	// Read chunk 2 after reclaim: every page now maps the zero page and mincore
	// says resident, the case a residency check alone gets wrong.
	var sink byte
	for off := 0; off < len(a.span(2)); off += page {
		sink |= a.span(2)[off]
	}
	if sink != 0 {
		t.Fatalf("reclaimed chunk read non-zero (%d): the kernel did not drop it", sink)
	}
	if n := nonResident(t, a, 2); n != 0 {
		t.Logf("chunk 2: %d pages non-resident after the read (expected 0: zero page mapped)", n)
	}

	before := src.calls
	l, err := a.Lease(ctx, 0, a.Size(), nil)
	if err != nil {
		t.Fatalf("Lease after reclaim: %v", err)
	}
	defer l.Release()
	if off := checkPattern(a, 0, l.Bytes()); off >= 0 {
		t.Fatalf("byte at offset %d is not the original: reclaimed bytes were served", off)
	}
	if got := u.Faults(); got != 4 {
		t.Errorf("faults = %d, want 4 (chunks 0-3)", got)
	}
	if got := src.calls - before; got != 4 {
		t.Errorf("re-hydrated %d chunks, want 4", got)
	}
	for _, c := range u.Snapshot().Arenas[0].Chunks {
		if c.State != Hot {
			t.Errorf("chunk %s is %s after re-acquire, want HOT", c.ID, c.State)
		}
	}
}

// testReclaimCgroup lets the kernel reclaim for real: a child process in a
// memory-limited cgroup marks its chunks preemptible and then allocates
// until the kernel takes lazily freed pages.
func testReclaimCgroup(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skipping the child process in a memory-limited cgroup")
	}
	name := fmt.Sprintf("uma-TestReclaimedChunkIsRehydrated-%d", os.Getpid())
	g, err := cgroup.New(name)
	if err != nil {
		kerneltest.Skip(t, kerneltest.Cgroups, "kernel refuses a child cgroup here: %v", err)
	}
	t.Cleanup(func() {
		if err := g.Remove(); err != nil {
			t.Errorf("removing cgroup %s: %v", name, err)
		}
	})
	const limit = 192 << 20
	if err := g.SetMemoryMax(limit); err != nil {
		kerneltest.Skip(t, kerneltest.Cgroups, "kernel refuses a memory limit on cgroup %s: %v", name, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=reclaim")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := g.Start(cmd); err != nil {
		t.Fatalf("starting the child in cgroup %s: %v", name, err)
	}
	err = cmd.Wait()
	ev, _ := g.MemoryEvents()
	if err != nil {
		t.Fatalf("child: %v (memory events %+v)\n%s", err, ev, out.String())
	}
	m := regexp.MustCompile(`faults=(\d+) rehydrated=(\d+) chunks=(\d+) mismatch=(-?\d+)`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("child output has no result line:\n%s", out.String())
	}
	faults, _ := strconv.Atoi(m[1])
	mismatch, _ := strconv.Atoi(m[4])
	t.Logf("child: %s", m[0])
	if mismatch != -1 {
		t.Errorf("child served a wrong byte at offset %d", mismatch)
	}
	if faults == 0 {
		t.Errorf("child saw no faults: the kernel reclaimed nothing (memory events %+v)\n%s", ev, out.String())
	}
}

// reclaimChild runs in the memory-limited cgroup. It prints one result line.
func reclaimChild(ctx context.Context, out io.Writer) error {
	limit, src, err := cgroup.SelfMemoryLimit()
	if err != nil {
		return err
	}
	u, err := New(Config{ChunkSize: 1 << 20, MemoryLimit: cgroup.SelfMemoryLimit})
	if err != nil {
		return err
	}
	var rs patternRehydrate
	a, err := u.NewArena("child", 64<<20, ArenaOptions{Rehydrate: rs.fn})
	if err != nil {
		return err
	}
	if err := a.Hydrate(ctx, 0, a.Size()); err != nil {
		return err
	}
	if _, err := a.MarkPreemptible(ctx, 1); err != nil {
		return err
	}
	// Allocate ballast in steps until the kernel has reclaimed a quarter of
	// the chunks, staying 48 MiB under the limit.
	var ballast [][]byte
	freeBallast := func() {
		for _, b := range ballast {
			_ = unix.Munmap(b)
		}
	}
	defer freeBallast()
	reclaimed := 0
	for total := int64(0); total+8<<20 <= limit-48<<20 && reclaimed < a.Chunks()/4; total += 8 << 20 {
		b, err := unix.Mmap(-1, 0, 8<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
		if err != nil {
			return fmt.Errorf("ballast: %w", err)
		}
		ballast = append(ballast, b)
		for k := 0; k < len(b); k += 4096 {
			b[k] = 1
		}
		reclaimed = 0
		for i := 0; i < a.Chunks(); i++ {
			if r, pages := a.residentPages(a.span(i)); r >= 0 && r < pages {
				reclaimed++
			}
		}
	}
	fmt.Fprintf(out, "limit=%d (%s) ballast=%d MiB reclaimed chunks=%d\n", limit, src, len(ballast)*8, reclaimed)
	// Give the ballast back before re-acquiring: re-hydration needs the room.
	freeBallast()
	ballast = nil
	l, err := a.Lease(ctx, 0, a.Size(), nil)
	if err != nil {
		return err
	}
	mismatch := checkPattern(a, 0, l.Bytes())
	l.Release()
	fmt.Fprintf(out, "faults=%d rehydrated=%d chunks=%d mismatch=%d\n", u.Faults(), rs.calls-int64(a.Chunks()), a.Chunks(), mismatch)
	if err := a.Close(); err != nil {
		return err
	}
	return errors.Join(u.Close())
}
