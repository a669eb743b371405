// Package hostmem is the host-memory bookkeeping every gpu.Device shares: it
// checks that memory to be registered or copied asynchronously is UMA arena
// memory inside a live uma.Registration, and keeps the device's own table of
// registered ranges so that an asynchronous copy from memory the device did
// not register is refused before the driver sees it.
//
// It owns no device and makes no driver call.
package hostmem

import (
	"fmt"
	"sort"
	"sync"
	"unsafe"

	"github.com/psiflow/psiflow/uma"
)

// Check returns nil when b lies inside a live uma.Registration, else the
// reason it must not be handed to a device (the Go heap, arena memory not
// recorded as registered, an empty range).
func Check(b []byte) error {
	_, err := uma.FindRegistration(b)
	return err
}

// Addr is the address of b's first byte.
func Addr(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

type entry struct {
	lo uintptr
	n  int
	b  []byte
}

// Table is one device's registered host ranges.
type Table struct {
	mu      sync.Mutex
	entries []entry // sorted by lo, disjoint
}

// Add records b as registered after checking it: UMA memory inside a live
// registration, overlapping nothing registered before.
func (t *Table) Add(b []byte) error {
	if err := Check(b); err != nil {
		return err
	}
	lo := Addr(b)
	t.mu.Lock()
	defer t.mu.Unlock()
	k := sort.Search(len(t.entries), func(i int) bool { return t.entries[i].lo >= lo })
	if k > 0 {
		if p := t.entries[k-1]; p.lo+uintptr(p.n) > lo {
			return fmt.Errorf("host range %#x (+%d) overlaps the registration at %#x (+%d)", lo, len(b), p.lo, p.n)
		}
	}
	if k < len(t.entries) {
		if q := t.entries[k]; lo+uintptr(len(b)) > q.lo {
			return fmt.Errorf("host range %#x (+%d) overlaps the registration at %#x (+%d)", lo, len(b), q.lo, q.n)
		}
	}
	t.entries = append(t.entries, entry{})
	copy(t.entries[k+1:], t.entries[k:])
	t.entries[k] = entry{lo, len(b), b}
	return nil
}

// Remove forgets the registration that is exactly b.
func (t *Table) Remove(b []byte) error {
	lo := Addr(b)
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, e := range t.entries {
		if e.lo == lo {
			if e.n != len(b) {
				return fmt.Errorf("host range %#x was registered with %d bytes, not %d", lo, e.n, len(b))
			}
			t.entries = append(t.entries[:k], t.entries[k+1:]...)
			return nil
		}
	}
	return fmt.Errorf("host range %#x (+%d) is not registered with this device", lo, len(b))
}

// Contains checks that b lies inside one range registered with this device
// and still inside a live uma.Registration (released by its owner, the range
// could be preempted under the copy).
func (t *Table) Contains(b []byte) error {
	if len(b) == 0 {
		return fmt.Errorf("empty host range")
	}
	lo := Addr(b)
	t.mu.Lock()
	k := sort.Search(len(t.entries), func(i int) bool { return t.entries[i].lo > lo })
	in := k > 0 && lo+uintptr(len(b)) <= t.entries[k-1].lo+uintptr(t.entries[k-1].n)
	t.mu.Unlock()
	if !in {
		if err := Check(b); err != nil {
			return err
		}
		return fmt.Errorf("host range %#x (+%d) is UMA memory but not registered with this device (Device.Register)", lo, len(b))
	}
	return Check(b)
}

// Len is the number of registered ranges.
func (t *Table) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.entries)
}

// Ranges returns the registered ranges, for Close to unregister what was left.
func (t *Table) Ranges() [][]byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([][]byte, len(t.entries))
	for i, e := range t.entries {
		out[i] = e.b
	}
	return out
}
