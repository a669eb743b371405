package harness

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/psiflow/psiflow/internal/bytesize"
	"github.com/psiflow/psiflow/internal/harness/protocol"
)

// pageSize is the granularity at which the co-tenant touches its memory.
var pageSize = int64(os.Getpagesize())

// coTenantTick is how often a ramping co-tenant touches its next pages.
const coTenantTick = 5 * time.Millisecond

// CoTenantConfig is what the co-tenant process does: touch Bytes of anonymous memory,
// evenly over Ramp, and hold it; a spike (Hold > 0) then gives memory back down to
// After once it has held Bytes for Hold, and holds that.
type CoTenantConfig struct {
	// Bytes is the anonymous memory to touch (rounded up to whole pages); it must be
	// positive.
	Bytes int64
	// Ramp is how long the touching takes: after t of Ramp, t/Ramp of Bytes is touched.
	// Zero touches everything at once; negative is an error.
	Ramp time.Duration
	// Hold, when positive, makes a spike: Bytes is held for Hold, then everything
	// above After is given back at once (MADV_DONTNEED: uncharged before the call
	// returns). Zero holds Bytes until the end.
	Hold time.Duration
	// After is what a spike holds after its fall, in [0, Bytes); it is rounded up to
	// whole pages.
	After int64
}

// Validate names the first field that cannot work.
func (c CoTenantConfig) Validate() error {
	switch {
	case c.Bytes <= 0:
		return fmt.Errorf("harness: co-tenant: bytes %d, want > 0", c.Bytes)
	case c.Ramp < 0:
		return fmt.Errorf("harness: co-tenant: ramp %v, want ≥ 0", c.Ramp)
	case c.Hold < 0:
		return fmt.Errorf("harness: co-tenant: hold %v, want ≥ 0", c.Hold)
	case c.Hold == 0 && c.After != 0:
		return fmt.Errorf("harness: co-tenant: after %d bytes without a hold: a fall needs -hold", c.After)
	case c.Hold > 0 && (c.After < 0 || c.After >= c.Bytes):
		return fmt.Errorf("harness: co-tenant: after %d bytes: want 0 ≤ after < bytes %d", c.After, c.Bytes)
	}
	return nil
}

// RunCoTenant is the co-tenant process, the stand-in for a trainer that shares the
// loader's memory cgroup. It maps cfg.Bytes of private anonymous memory and writes one
// byte in each page, paced so that the share touched grows linearly over cfg.Ramp,
// which charges the pages to its cgroup one by one (without swap they cannot be
// reclaimed: the limit must be met by others). It reports its progress on out as
// protocol lines: a [protocol.Ramp] event at every tenth of the ramp and a
// [protocol.Held] event when all bytes are touched. A spike (cfg.Hold > 0) holds
// them for cfg.Hold, gives back everything above cfg.After at once and reports a
// [protocol.Fell] event. It then holds what it has until hold reaches end of file or
// fails (the harness closes the co-tenant's standard input when the loader has ended)
// or ctx is done, and returns nil. A stop that comes during the ramp or the spike also
// ends it with nil: the co-tenant was asked to stop, it did not fail.
func RunCoTenant(ctx context.Context, cfg CoTenantConfig, hold io.Reader, out io.Writer) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	pages := (cfg.Bytes + pageSize - 1) / pageSize
	mem, free, err := anonMemory(pages * pageSize)
	if err != nil {
		return fmt.Errorf("harness: co-tenant: map %d bytes: %w", pages*pageSize, err)
	}
	defer free()
	stop := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, hold)
		close(stop)
	}()
	em := protocol.NewEmitter(out)
	start := time.Now()
	var touched int64 // pages
	nextReport := int64(1)
	tick := time.NewTicker(coTenantTick)
	defer tick.Stop()
	for touched < pages {
		want := pages
		if el := time.Since(start); el < cfg.Ramp {
			want = int64(float64(pages) * float64(el) / float64(cfg.Ramp))
		}
		touched = touchPages(mem, touched, want)
		if touched == pages {
			break
		}
		// Report at every tenth of the ramp.
		if touched*10 >= nextReport*pages {
			if err := em.Emit(protocol.Event{Event: protocol.Ramp, Bytes: touched * pageSize}); err != nil {
				return err
			}
			nextReport = touched*10/pages + 1
		}
		select {
		case <-stop:
			return nil
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
	if err := em.Emit(protocol.Event{Event: protocol.Held, Bytes: pages * pageSize}); err != nil {
		return err
	}
	if cfg.Hold > 0 {
		t := time.NewTimer(cfg.Hold)
		defer t.Stop()
		select {
		case <-stop:
			return nil
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		keep := (cfg.After + pageSize - 1) / pageSize
		if err := releasePages(mem, keep, pages); err != nil {
			return fmt.Errorf("harness: co-tenant: give back %d bytes: %w", (pages-keep)*pageSize, err)
		}
		if err := em.Emit(protocol.Event{Event: protocol.Fell, Bytes: keep * pageSize}); err != nil {
			return err
		}
	}
	select {
	case <-stop:
	case <-ctx.Done():
	}
	// The pages stay touched until the mapping goes.
	return nil
}

// CoTenantMain parses the co-tenant's command line (-bytes N -ramp D [-hold D
// -after N], as [Run] passes them) and runs [RunCoTenant] with standard input as
// hold. It is what "psiflow cotenant" runs.
func CoTenantMain(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	cfg, err := ParseCoTenantArgs(args, stderr)
	if err != nil {
		return err
	}
	return RunCoTenant(ctx, cfg, stdin, stdout)
}

// ParseCoTenantArgs parses "-bytes N -ramp D [-hold D -after N]": N in bytes (a
// plain integer or with a K, M, G suffix, binary), D a Go duration. Usage and errors
// go to output.
func ParseCoTenantArgs(args []string, output io.Writer) (CoTenantConfig, error) {
	fs := flag.NewFlagSet("cotenant", flag.ContinueOnError)
	fs.SetOutput(output)
	bytesFlag := fs.String("bytes", "", "anonymous memory to touch and hold: bytes, or with a K, M, G suffix (binary; required)")
	ramp := fs.Duration("ramp", 5*time.Second, "time over which the memory is touched, evenly (0: at once)")
	hold := fs.Duration("hold", 0, "a spike: hold -bytes this long, then give back all but -after (0: hold -bytes until the end)")
	afterFlag := fs.String("after", "0", "with -hold: the memory kept after the fall, bytes or with a K, M, G suffix")
	if err := fs.Parse(args); err != nil {
		return CoTenantConfig{}, err
	}
	if fs.NArg() > 0 {
		return CoTenantConfig{}, fmt.Errorf("harness: co-tenant: unexpected arguments %q", fs.Args())
	}
	if *bytesFlag == "" {
		return CoTenantConfig{}, errors.New("harness: co-tenant: -bytes is required")
	}
	n, err := bytesize.Parse(*bytesFlag)
	if err != nil || n <= 0 {
		return CoTenantConfig{}, fmt.Errorf("harness: co-tenant: -bytes %q: want a positive size like 150M", *bytesFlag)
	}
	if *ramp < 0 {
		return CoTenantConfig{}, fmt.Errorf("harness: co-tenant: -ramp %v: want ≥ 0", *ramp)
	}
	after, err := bytesize.Parse(*afterFlag)
	if err != nil || after < 0 {
		return CoTenantConfig{}, fmt.Errorf("harness: co-tenant: -after %q: want a size like 100M", *afterFlag)
	}
	cfg := CoTenantConfig{Bytes: n, Ramp: *ramp, Hold: *hold, After: after}
	if err := cfg.Validate(); err != nil {
		return CoTenantConfig{}, err
	}
	return cfg, nil
}

// touchPages writes one byte in each page from page from to page to (exclusive) and
// returns to. It is not instrumented by the race detector, whose shadow memory would
// otherwise grow with every page and be charged to the cgroup too.
//
//go:norace
func touchPages(mem []byte, from, to int64) int64 {
	for p := from; p < to; p++ {
		mem[p*pageSize] = 1
	}
	return to
}
