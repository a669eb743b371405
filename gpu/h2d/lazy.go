package h2d

import (
	"context"
	"fmt"
	"sync"

	"github.com/psiflow/psiflow/stage"
	"github.com/psiflow/psiflow/tensor"
)

// Lazy is a staging ring made when the first batch arrives, its slots sized
// by it: for graphs built before the size of a sample is known (a pipeline
// file says the batch size and the transform, not the bytes of a decoded
// image). Its stages ([Lazy.Pin], [Lazy.H2D]) use the one ring it makes, for
// every graph it serves. It is safe for concurrent use.
type Lazy struct {
	cfg     Config
	samples int
	made    func(*Ring)

	mu     sync.Mutex
	r      *Ring
	closed bool
}

// NewLazy returns a ring made on the first batch: each slot holds samples
// samples of the first batch's sample size (cfg.SlotBytes is ignored; the
// rest of cfg is as for [NewRing]). made, when not nil, is called with the
// ring once it is made (to register its metrics, say what it is).
func NewLazy(cfg Config, samples int, made func(*Ring)) (*Lazy, error) {
	if samples < 1 {
		return nil, fmt.Errorf("gpu staging ring: %d samples a slot must be positive", samples)
	}
	if cfg.UMA == nil || cfg.Device == nil {
		return nil, fmt.Errorf("gpu staging ring: Config.UMA and Config.Device are required")
	}
	return &Lazy{cfg: cfg, samples: samples, made: made}, nil
}

// Ring returns the ring, making it for samples of sampleBytes bytes on the
// first call. A later batch of larger samples does not fit its slots: Pin
// then names both sizes.
func (l *Lazy) Ring(sampleBytes int64) (*Ring, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, fmt.Errorf("gpu staging ring: closed")
	}
	if l.r != nil {
		return l.r, nil
	}
	if sampleBytes <= 0 {
		return nil, fmt.Errorf("gpu staging ring: an empty sample (%d bytes)", sampleBytes)
	}
	cfg := l.cfg
	cfg.SlotBytes = sampleBytes * int64(l.samples)
	r, err := NewRing(cfg)
	if err != nil {
		return nil, err
	}
	l.r = r
	if l.made != nil {
		l.made(r)
	}
	return r, nil
}

// Made returns the ring once the first batch made it, else nil.
func (l *Lazy) Made() *Ring {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.r
}

// Shed is [Ring.Shed] on the ring once the first batch made it (nothing
// before).
func (l *Lazy) Shed() (int64, error) {
	r := l.Made()
	if r == nil {
		return 0, nil
	}
	return r.Shed()
}

// Close closes the ring if one was made ([Ring.Close]); later batches are
// refused.
func (l *Lazy) Close() error {
	l.mu.Lock()
	r := l.r
	l.closed = true
	l.mu.Unlock()
	if r == nil {
		return nil
	}
	return r.Close()
}

// Pin is [Pin] on the lazily made ring: the first batch makes it.
func (l *Lazy) Pin(name string) stage.Stage[[]*tensor.Sample, *Staged] {
	sized := fmt.Sprintf("%d samples of the first batch's size: every sample must have one size, such as a decode's crop", l.samples)
	return pin(name, sized, func(_ context.Context, sampleBytes int64) (*Ring, error) { return l.Ring(sampleBytes) })
}

// H2D is [H2D] on the lazily made ring (made by the batches Pin staged).
func (l *Lazy) H2D(name string) stage.Stage[*Staged, *DeviceBatch] {
	return h2d(name, func() *Ring { return l.Made() })
}
