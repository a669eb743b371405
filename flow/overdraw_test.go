package flow_test

import (
	"context"
	"testing"
	"time"

	"github.com/psiflow/psiflow/flow"
)

// TestOverdraw: an overdraft is taken at once beyond the limit, and sources
// wait until it is paid back.
func TestOverdraw(t *testing.T) {
	b, err := flow.NewBudget(100)
	if err != nil {
		t.Fatal(err)
	}
	if !b.TryAcquire(60) {
		t.Fatal("60 of 100 refused")
	}
	b.Overdraw(150)
	if b.InUse() != 210 || b.MaxInUse() != 210 {
		t.Fatalf("in use %d, max %d after the overdraft", b.InUse(), b.MaxInUse())
	}
	got := make(chan error, 1)
	go func() { got <- b.Acquire(context.Background(), 10) }()
	select {
	case err := <-got:
		t.Fatalf("Acquire returned %v during the overdraft", err)
	case <-time.After(20 * time.Millisecond):
	}
	b.Release(150)
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Acquire still waits after the overdraft was paid back")
	}
	b.Release(70)
	if b.InUse() != 0 {
		t.Fatalf("%d in use at the end", b.InUse())
	}
}
