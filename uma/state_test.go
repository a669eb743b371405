package uma

import (
	"bufio"
	"errors"
	"os"
	"strings"
	"testing"
)

// TestTransitionTable checks Transitions against testdata/transitions.txt, a
// full matrix written by hand: every (from, to) pair is listed as allowed or
// illegal, so an edge added to or dropped from the table fails here.
func TestTransitionTable(t *testing.T) {
	f, err := os.Open("testdata/transitions.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	seen := map[[2]State]bool{}
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		fields := strings.Fields(text)
		if len(fields) != 3 {
			t.Fatalf("transitions.txt:%d: want FROM TO allowed|illegal, got %q", line, text)
		}
		from, err1 := ParseState(fields[0])
		to, err2 := ParseState(fields[1])
		if err := errors.Join(err1, err2); err != nil {
			t.Fatalf("transitions.txt:%d: %v", line, err)
		}
		want := fields[2] == "allowed"
		if !want && fields[2] != "illegal" {
			t.Fatalf("transitions.txt:%d: verdict %q", line, fields[2])
		}
		seen[[2]State{from, to}] = true
		if got := Allowed(from, to); got != want {
			t.Errorf("transitions.txt:%d: Allowed(%s, %s) = %v, want %v", line, from, to, got, want)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for _, from := range States() {
		for _, to := range States() {
			if !seen[[2]State{from, to}] {
				t.Errorf("transitions.txt does not list %s -> %s", from, to)
			}
		}
	}
}

func TestTransitionsHaveReasons(t *testing.T) {
	dup := map[[2]State]bool{}
	for _, tr := range Transitions {
		if tr.Why == "" {
			t.Errorf("%s -> %s has no reason", tr.From, tr.To)
		}
		if tr.From == tr.To {
			t.Errorf("%s -> %s: self edges are implicit", tr.From, tr.To)
		}
		k := [2]State{tr.From, tr.To}
		if dup[k] {
			t.Errorf("%s -> %s listed twice", tr.From, tr.To)
		}
		dup[k] = true
	}
}

func TestStateStrings(t *testing.T) {
	tests := []struct {
		s    State
		want string
	}{
		{Hot, "HOT"}, {Stable, "STABLE"}, {Cold, "COLD"}, {LockedTx, "LOCKED_TX"},
		{CopiedGPU, "COPIED_GPU"}, {Preemptible, "PREEMPTIBLE"}, {Evicted, "EVICTED"}, {State(42), "State(42)"},
	}
	for _, tt := range tests {
		if got := tt.s.String(); got != tt.want {
			t.Errorf("State(%d).String() = %q, want %q", tt.s, got, tt.want)
		}
		if tt.s < numStates {
			if p, err := ParseState(strings.ToLower(tt.want)); err != nil || p != tt.s {
				t.Errorf("ParseState(%q) = %v, %v", tt.want, p, err)
			}
		}
	}
	if _, err := ParseState("WARM"); err == nil {
		t.Error("ParseState(WARM) succeeded")
	}
}

func TestIllegalTransitionNamesChunkAndStates(t *testing.T) {
	u := newTestUMA(t, testConfig())
	a, err := u.NewArena("tx", 4*u.ChunkSize(), ArenaOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	u.mu.Lock()
	err = a.setLocked(2, CopiedGPU, "test") // HOT -> COPIED_GPU is not an edge
	v := u.version
	u.mu.Unlock()
	var te *TransitionError
	if !errors.As(err, &te) {
		t.Fatalf("HOT -> COPIED_GPU: got %v, want *TransitionError", err)
	}
	if te.Chunk != (ChunkID{"tx", 2}) || te.From != Hot || te.To != CopiedGPU {
		t.Errorf("error fields = %+v", te)
	}
	for _, part := range []string{"tx#2", "HOT", "COPIED_GPU", "test"} {
		if !strings.Contains(err.Error(), part) {
			t.Errorf("error %q does not name %q", err, part)
		}
	}
	if s := u.Snapshot(); s.Arenas[0].Chunks[2].State != Hot || s.Version != v {
		t.Errorf("refused transition changed the ledger: %+v", s.Arenas[0].Chunks[2])
	}
}
