package flow_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/psiflow/psiflow/flow"
)

// acquireAsync starts an Acquire of n bytes and returns the channel of its result.
func acquireAsync(ctx context.Context, b *flow.Budget, n int64) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- b.Acquire(ctx, n) }()
	return ch
}

// waitWaiting waits until the first waiter of b asks for n bytes.
func waitWaiting(t *testing.T, b *flow.Budget, n int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for b.Waiting() != n {
		if time.Now().After(deadline) {
			t.Fatalf("no waiter of %d bytes after 10s (first waiter wants %d)", n, b.Waiting())
		}
		time.Sleep(time.Millisecond)
	}
}

func TestBudgetSetLimitShrinkWaitsGrowWakes(t *testing.T) {
	ctx := context.Background()
	b := flow.NewBudget(100)
	if err := b.Acquire(ctx, 60); err != nil {
		t.Fatal(err)
	}
	if err := b.SetLimit(50); err != nil {
		t.Fatal(err)
	}
	if b.Limit() != 50 || b.InUse() != 60 {
		t.Fatalf("after shrink: limit %d in use %d, want 50 and 60 (nothing revoked)", b.Limit(), b.InUse())
	}
	if b.TryAcquire(1) {
		t.Fatal("TryAcquire(1) succeeded above a shrunken limit")
	}
	got := acquireAsync(ctx, b, 30)
	waitWaiting(t, b, 30)
	b.Release(60) // 0 in use: 30 fits under 50
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	got = acquireAsync(ctx, b, 30) // 60 > 50: waits
	waitWaiting(t, b, 30)
	if err := b.SetLimit(80); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if b.InUse() != 60 {
		t.Fatalf("in use %d, want 60", b.InUse())
	}
	b.Release(60)
}

func TestBudgetSetLimitLargeRequestRunsAlone(t *testing.T) {
	ctx := context.Background()
	b := flow.NewBudget(100)
	if err := b.SetLimit(10); err != nil {
		t.Fatal(err)
	}
	// 40 is above the current limit but within the ceiling: granted alone.
	if err := b.Acquire(ctx, 5); err != nil {
		t.Fatal(err)
	}
	got := acquireAsync(ctx, b, 40)
	waitWaiting(t, b, 40)
	b.Release(5)
	if err := <-got; err != nil {
		t.Fatalf("request within the ceiling failed: %v", err)
	}
	if b.TryAcquire(1) {
		t.Fatal("a second request was granted beside an over-limit one")
	}
	b.Release(40)
	var over *flow.ErrOversize
	if err := b.Acquire(ctx, 101); !errors.As(err, &over) || over.Limit != 100 {
		t.Fatalf("Acquire(101) = %v, want ErrOversize against the ceiling 100", err)
	}
	if err := b.SetLimit(0); err == nil {
		t.Fatal("SetLimit(0) accepted")
	}
}

func TestBudgetSetLimitConcurrentNeverExceedsCeiling(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b := flow.NewBudget(1000)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 2000 {
			_ = b.SetLimit(int64(100 + (i*37)%900))
		}
	}()
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			for range 500 {
				if err := b.Acquire(ctx, 50); err != nil {
					errs <- err
					return
				}
				if in := b.InUse(); in > 1000 {
					errs <- errors.New("in use above the ceiling")
					b.Release(50)
					return
				}
				b.Release(50)
			}
			errs <- nil
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	<-done
	if b.InUse() != 0 || b.MaxInUse() > 1000 {
		t.Fatalf("in use %d, max %d", b.InUse(), b.MaxInUse())
	}
}
