package stage_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/psiflow/psiflow/stage"
)

// runStage feeds 0..n-1 (each with a claim of 1 byte on c) through st and
// returns what came out, in order, and the stage's counters.
func runStage(t *testing.T, st stage.Stage[int, int], n int, c *lockedCounter) ([]int, *stage.Metrics, error) {
	t.Helper()
	inCh := make(chan stage.Envelope[int], 8)
	outCh := make(chan stage.Envelope[int], 8)
	var mi, mo stage.Metrics
	go func() {
		for i := range n {
			inCh <- stage.Envelope[int]{Value: i, Claim: stage.NewClaim(c, 1)}
		}
		close(inCh)
	}()
	var got []int
	done := make(chan struct{})
	go func() {
		defer close(done)
		for e := range outCh {
			got = append(got, e.Value)
			e.Claim.Drop()
		}
	}()
	err := st.Run(context.Background(), stage.NewIn(inCh, &mi), stage.NewOut(outCh, &mo))
	if err != nil { // drain what the feeder still sends
		for e := range inCh {
			e.Claim.Drop()
		}
	}
	close(outCh)
	<-done
	return got, &mi, err
}

type lockedCounter struct {
	mu       sync.Mutex
	released int64
}

func (c *lockedCounter) Release(n int64) { c.mu.Lock(); c.released += n; c.mu.Unlock() }

func TestSkipKeepsOrderAndCounts(t *testing.T) {
	const n = 1000
	bad := func(i int) bool { return i%97 == 3 || i == n-1 }
	wantSkipped := 0
	for i := range n {
		if bad(i) {
			wantSkipped++
		}
	}
	var logged sync.Map
	mk := map[string]func(f func(context.Context, int) (int, error)) stage.Stage[int, int]{
		"Map":    func(f func(context.Context, int) (int, error)) stage.Stage[int, int] { return stage.Map("m", f) },
		"ParMap": func(f func(context.Context, int) (int, error)) stage.Stage[int, int] { return stage.ParMap("m", 4, f) },
		"OrderedParMap": func(f func(context.Context, int) (int, error)) stage.Stage[int, int] {
			return stage.OrderedParMap("m", 4, f)
		},
	}
	for name, build := range mk {
		t.Run(name, func(t *testing.T) {
			sk, err := stage.NewSkipper(stage.SkipPolicy{OnError: stage.Skip, Log: func(key string, err error) { logged.Store(name+"/"+key, err) }})
			if err != nil {
				t.Fatal(err)
			}
			f := func(_ context.Context, i int) (int, error) {
				sk.Seen()
				if bad(i) {
					return 0, sk.Handle(fmt.Sprint(i), errors.New("bad"))
				}
				return i, nil
			}
			c := &lockedCounter{}
			got, m, err := runStage(t, build(f), n, c)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != n-wantSkipped {
				t.Fatalf("got %d elements, want %d", len(got), n-wantSkipped)
			}
			seen := map[int]bool{}
			for _, v := range got {
				if bad(v) || seen[v] {
					t.Fatalf("element %d delivered wrongly (bad %v, twice %v)", v, bad(v), seen[v])
				}
				seen[v] = true
			}
			if name != "ParMap" {
				for i := 1; i < len(got); i++ {
					if got[i] <= got[i-1] {
						t.Fatalf("order broken at %d: %d after %d", i, got[i], got[i-1])
					}
				}
			}
			if m.Skipped.Load() != int64(wantSkipped) || sk.Skipped() != int64(wantSkipped) {
				t.Fatalf("skipped: metric %d, skipper %d, want %d", m.Skipped.Load(), sk.Skipped(), wantSkipped)
			}
			if c.released != n {
				t.Fatalf("%d claims returned, want %d", c.released, n)
			}
			for i := range n {
				if _, ok := logged.Load(fmt.Sprintf("%s/%d", name, i)); ok != bad(i) {
					t.Fatalf("element %d logged %v, bad %v", i, ok, bad(i))
				}
			}
		})
	}
}

func TestSkipLimits(t *testing.T) {
	cases := []struct {
		name    string
		p       stage.SkipPolicy
		bad     func(int) bool
		want    string // substring of the error, "" for success
		skipped int64
	}{
		{"stop is the default", stage.SkipPolicy{}, func(i int) bool { return i == 5 }, "element 5 is bad", 0},
		{"count within limit", stage.SkipPolicy{OnError: stage.Skip, MaxSkips: 3}, func(i int) bool { return i < 3 }, "", 3},
		{"count exceeded", stage.SkipPolicy{OnError: stage.Skip, MaxSkips: 3}, func(i int) bool { return i < 4 }, "the limit of 3 (SkipPolicy.MaxSkips)", 3},
		{"rate within limit", stage.SkipPolicy{OnError: stage.Skip, MaxRate: 0.1}, func(i int) bool { return i%20 == 0 }, "", 25},
		{"rate exceeded", stage.SkipPolicy{OnError: stage.Skip, MaxRate: 0.1}, func(i int) bool { return i%5 == 0 }, "more than 10%", -1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sk, err := stage.NewSkipper(tc.p)
			if err != nil {
				t.Fatal(err)
			}
			f := func(_ context.Context, i int) (int, error) {
				sk.Seen()
				if tc.bad(i) {
					return 0, sk.Handle(fmt.Sprint(i), fmt.Errorf("element %d is bad", i))
				}
				return i, nil
			}
			c := &lockedCounter{}
			_, m, err := runStage(t, stage.Map("m", f), 500, c)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
			if tc.skipped >= 0 && m.Skipped.Load() != tc.skipped {
				t.Fatalf("skipped %d, want %d", m.Skipped.Load(), tc.skipped)
			}
			if c.released != 500 {
				t.Fatalf("%d claims returned, want 500", c.released)
			}
		})
	}
}

func TestSkipPolicyValidate(t *testing.T) {
	for _, p := range []stage.SkipPolicy{{MaxSkips: -1}, {MaxRate: -0.5}, {MaxRate: 2}, {OnError: 7}} {
		if _, err := stage.NewSkipper(p); err == nil {
			t.Errorf("%+v accepted", p)
		}
	}
	for _, s := range []string{"stop", "skip"} {
		o, err := stage.ParseOnError(s)
		if err != nil || o.String() != s {
			t.Errorf("ParseOnError(%q) = %v, %v", s, o, err)
		}
	}
	if _, err := stage.ParseOnError("ignore"); err == nil {
		t.Error("ParseOnError accepted ignore")
	}
}
