//go:build linux

package uma

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of testdata/ledger/*.txt")

// TestLedgerScripts runs the datadriven ledger scripts in testdata/ledger:
// blocks of commands, "----", and the expected output. Run with -rewrite to
// regenerate expectations after an intended change (then read the diff).
//
// Commands (chunk ranges are i or i..j; a lease name is given with id=):
//
//	new NAME chunks=N [source] [lossy]  arena of N chunks (source: re-hydrate
//	                               from a pattern; lossy: PreemptWithoutSource)
//	write NAME i[..j]              overwrite whole chunks with the pattern
//	hydrate NAME i[..j]
//	lease|pin|stable|tx ID NAME i[..j]
//	release ID                     (a transfer: Done(false))
//	done ID                        transfer completed
//	access NAME i                  record an access (ledger clock +1 per call)
//	mark NAME RATIO                MarkPreemptible
//	evict NAME CHUNKS              EvictTail of CHUNKS chunks' bytes
//	reclaim NAME i                 the kernel takes the chunk (Arena.PageOut)
//	cool NAME                      Cool(0)
//	postgpu NAME POLICY            PostGPULoad with POLICY
//	show NAME                      the ledger of NAME
//	stats                          faults, re-hydrations, leases, stable bytes
func TestLedgerScripts(t *testing.T) {
	files, err := filepath.Glob("testdata/ledger/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) { runScript(t, f) })
	}
}

type scriptEnv struct {
	u      *UMA
	arenas map[string]*Arena
	leases map[string]Releaser
	txs    map[string]*Transfer
	src    *patternRehydrate
}

func runScript(t *testing.T, path string) {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig()
	cfg.ChunkSize = 16 << 10
	cfg.StableBytes = 3 * cfg.ChunkSize
	u := newTestUMA(t, cfg)
	var tick int64
	u.clock = func() int64 { tick++; return tick }
	env := &scriptEnv{u: u, arenas: map[string]*Arena{}, leases: map[string]Releaser{}, txs: map[string]*Transfer{}, src: &patternRehydrate{}}
	defer func() {
		for _, l := range env.leases {
			l.Release()
		}
		for _, a := range env.arenas {
			_ = a.Close()
		}
	}()

	var out strings.Builder
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	line := 0
	var cmds []string
	var cmdLine int
	inExpect := false
	var expect []string
	flush := func() {
		if len(cmds) == 0 {
			return
		}
		var got strings.Builder
		for _, c := range cmds {
			got.WriteString(env.run(t, c))
		}
		g := strings.TrimRight(got.String(), "\n")
		w := strings.TrimRight(strings.Join(expect, "\n"), "\n")
		if !*rewrite && g != w {
			t.Errorf("%s:%d: %s\ngot:\n%s\nwant:\n%s", path, cmdLine, strings.Join(cmds, "; "), g, w)
		}
		out.WriteString(strings.Join(cmds, "\n") + "\n----\n" + g + "\n\n")
		cmds, expect, inExpect = nil, nil, false
	}
	for sc.Scan() {
		line++
		text := sc.Text()
		switch {
		case inExpect && text == "":
			flush()
		case inExpect:
			expect = append(expect, text)
		case strings.HasPrefix(text, "#"):
			if len(cmds) == 0 {
				out.WriteString(text + "\n")
			}
		case text == "----":
			inExpect = true
		case strings.TrimSpace(text) == "":
		default:
			if len(cmds) == 0 {
				cmdLine = line
			}
			cmds = append(cmds, text)
		}
	}
	flush()
	if *rewrite {
		if err := os.WriteFile(path, []byte(strings.TrimRight(out.String(), "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func chunkArg(a *Arena, s string) (off, n int64, err error) {
	lo, hi, ok := strings.Cut(s, "..")
	i, err := strconv.Atoi(lo)
	if err != nil {
		return 0, 0, err
	}
	j := i
	if ok {
		if j, err = strconv.Atoi(hi); err != nil {
			return 0, 0, err
		}
	}
	return int64(i) * a.ChunkSize(), int64(j-i+1) * a.ChunkSize(), nil
}

func (e *scriptEnv) run(t *testing.T, cmd string) string {
	ctx := context.Background()
	f := strings.Fields(cmd)
	res := func(err error) string {
		if err != nil {
			return "error: " + err.Error() + "\n"
		}
		return ""
	}
	arena := func(i int) *Arena {
		a := e.arenas[f[i]]
		if a == nil {
			t.Fatalf("%q: no arena %q", cmd, f[i])
		}
		return a
	}
	switch f[0] {
	case "new":
		n, _ := strconv.Atoi(strings.TrimPrefix(f[2], "chunks="))
		opts := ArenaOptions{}
		for _, flag := range f[3:] {
			switch flag {
			case "source":
				opts.Rehydrate = e.src.fn
			case "lossy":
				opts.PreemptWithoutSource = true
			}
		}
		a, err := e.u.NewArena(f[1], int64(n)*e.u.ChunkSize(), opts)
		if err == nil {
			e.arenas[f[1]] = a
		}
		return res(err)
	case "write", "hydrate":
		a := arena(1)
		off, n, err := chunkArg(a, f[2])
		if err != nil {
			t.Fatal(err)
		}
		if f[0] == "hydrate" {
			return res(a.Hydrate(ctx, off, n))
		}
		buf := make([]byte, n)
		for k := int64(0); k < n; k += a.ChunkSize() {
			fillPattern(ChunkID{a.Name(), int((off + k) / a.ChunkSize())}, buf[k:k+a.ChunkSize()])
		}
		return res(a.Write(ctx, off, buf))
	case "lease", "pin", "stable", "tx":
		a := arena(2)
		off, n, err := chunkArg(a, f[3])
		if err != nil {
			t.Fatal(err)
		}
		var r Releaser
		switch f[0] {
		case "lease":
			var l *ByteLease
			if l, err = a.Lease(ctx, off, n, nil); err == nil {
				if bad := checkPattern(a, off, l.Bytes()); bad >= 0 {
					t.Errorf("%q: served a wrong byte at %d", cmd, bad)
				}
				r = l
			}
		case "pin":
			var p *PinLease
			if p, err = a.Pin(ctx, off, n); err == nil {
				r = p
			}
		case "stable":
			var s *StableLease
			if s, err = a.AcquireStable(ctx, off, n); err == nil {
				r = s
			}
		case "tx":
			var x *Transfer
			if x, err = a.BeginTransfer(ctx, off, n); err == nil {
				r = x
				e.txs[f[1]] = x
			}
		}
		if err == nil {
			e.leases[f[1]] = r
		}
		return res(err)
	case "release":
		e.leases[f[1]].Release()
		delete(e.leases, f[1])
		delete(e.txs, f[1])
		return ""
	case "done":
		e.txs[f[1]].Done(true)
		delete(e.leases, f[1])
		delete(e.txs, f[1])
		return ""
	case "access":
		a := arena(1)
		off, _, _ := chunkArg(a, f[2])
		return res(a.RecordAccess(off, 1))
	case "mark":
		r, _ := strconv.ParseFloat(f[2], 64)
		m, err := arena(1).MarkPreemptible(ctx, r)
		return fmt.Sprintf("marked=%d evicted=%d skipped=%d nosource=%d\n", m.Marked, m.Evicted, m.Skipped, m.NoSource) + res(err)
	case "evict":
		a := arena(1)
		k, _ := strconv.Atoi(f[2])
		n, err := a.EvictTail(int64(k) * a.ChunkSize())
		return fmt.Sprintf("evicted=%d chunks\n", n/a.ChunkSize()) + res(err)
	case "reclaim":
		a := arena(1)
		i, _ := strconv.Atoi(f[2])
		_, err := a.PageOut(int64(i)*a.ChunkSize(), a.ChunkSize())
		return res(err)
	case "cool":
		return fmt.Sprintf("cooled=%d\n", arena(1).Cool(0))
	case "postgpu":
		a := arena(1)
		for _, p := range []Policy{PolicyEvictCPU, PolicyMarkPreemptible, PolicyKeep} {
			if p.String() == f[2] {
				a.SetPolicy(p)
			}
		}
		p, err := a.PostGPULoad(ctx)
		return fmt.Sprintf("applied=%s\n", p) + res(err)
	case "show":
		var b strings.Builder
		for _, as := range e.u.Snapshot().Arenas {
			if as.Name != f[1] {
				continue
			}
			for _, c := range as.Chunks {
				fmt.Fprintf(&b, "%s %s v%d refs=%d pins=%d stables=%d\n", c.ID, c.State, c.Version, c.Refs, c.Pins, c.Stables)
			}
		}
		return b.String()
	case "stats":
		s := e.u.Snapshot()
		return fmt.Sprintf("faults=%d rehydrations=%d leases=%+v stable=%d/%d\n", s.Faults, s.Rehydrations, s.Leases, s.StableUsed, s.StableTotal)
	}
	t.Fatalf("unknown command %q", cmd)
	return ""
}
