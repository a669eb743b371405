package stage_test

import (
	"testing"

	"github.com/psiflow/psiflow/stage"
)

type counter struct{ released int64 }

func (c *counter) Release(n int64) { c.released += n }

func TestClaims(t *testing.T) {
	tests := []struct {
		name string
		run  func(c *counter)
		want int64
	}{
		{"drop returns bytes", func(c *counter) { stage.NewClaim(c, 10).Drop() }, 10},
		{"retained needs two drops", func(c *counter) {
			cl := stage.NewClaim(c, 10).Retain()
			cl.Drop()
		}, 0},
		{"join drops all parts", func(c *counter) {
			stage.JoinClaims([]*stage.Claim{stage.NewClaim(c, 1), nil, stage.NewClaim(c, 2)}).Drop()
		}, 3},
		{"join of one is itself", func(c *counter) {
			one := stage.NewClaim(c, 5)
			if j := stage.JoinClaims([]*stage.Claim{one}); j != one {
				panic("not the same claim")
			}
			one.Drop()
		}, 5},
		{"nil is free", func(c *counter) {
			var cl *stage.Claim
			cl.Retain().Drop()
			if stage.JoinClaims(nil) != nil || cl.Bytes() != 0 {
				panic("nil claim holds bytes")
			}
		}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var c counter
			tc.run(&c)
			if c.released != tc.want {
				t.Fatalf("released %d, want %d", c.released, tc.want)
			}
		})
	}
}

func TestDoubleDropPanics(t *testing.T) {
	var c counter
	cl := stage.NewClaim(&c, 1)
	cl.Drop()
	defer func() {
		if recover() == nil {
			t.Fatal("second Drop did not panic")
		}
		if c.released != 1 {
			t.Fatalf("released %d", c.released)
		}
	}()
	cl.Drop()
}

type res struct{ n *int }

func (r res) Release() { *r.n++ }

func TestDiscardReleasesValue(t *testing.T) {
	n := 0
	var c counter
	stage.Discard(stage.Envelope[res]{Value: res{&n}, Claim: stage.NewClaim(&c, 4)})
	stage.Discard(stage.Envelope[int]{Value: 1})
	if n != 1 || c.released != 4 {
		t.Fatalf("released value %d times, %d bytes", n, c.released)
	}
	if !stage.MayRelease[res]() || stage.MayRelease[int]() || !stage.MayRelease[any]() {
		t.Fatal("MayRelease is wrong")
	}
}

func TestProtect(t *testing.T) {
	err := stage.Protect("s", func() error { panic("x") })
	pe, ok := err.(*stage.PanicError)
	if !ok || pe.Stage != "s" || pe.Value != "x" || len(pe.Stack) == 0 {
		t.Fatalf("Protect returned %#v", err)
	}
	if err := stage.Protect("s", func() error { return nil }); err != nil {
		t.Fatal(err)
	}
}
