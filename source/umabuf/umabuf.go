package umabuf

import (
	"context"
	"fmt"

	"github.com/psiflow/psiflow/source"
	"github.com/psiflow/psiflow/uma"
)

// Provider is a source.BufferProvider over a registered uma.Pool.
type Provider struct {
	pool   *uma.Pool
	region []byte
}

var _ source.BufferProvider = (*Provider)(nil)

// New returns a provider of buffers from pool, which must be registered
// (uma.ArenaOptions.Registered) and dedicated to this provider.
func New(pool *uma.Pool) (*Provider, error) {
	region, err := pool.Region()
	if err != nil {
		return nil, fmt.Errorf("umabuf: %w", err)
	}
	if len(region) < source.Align {
		return nil, fmt.Errorf("umabuf: pool %q of %d bytes is smaller than one aligned buffer (%d bytes)", pool.Arena().Name(), len(region), source.Align)
	}
	return &Provider{pool: pool, region: region}, nil
}

// Alloc leases n bytes (rounded up to source.Align) from the pool, waiting
// while it is full. The buffer's length is n, its capacity the rounded size.
func (p *Provider) Alloc(ctx context.Context, n int) (source.Buffer, error) {
	if n < 0 {
		return nil, fmt.Errorf("umabuf: alloc of %d bytes", n)
	}
	size := (max(n, 1) + source.Align - 1) / source.Align * source.Align
	l, err := p.pool.Alloc(ctx, size, nil)
	if err != nil {
		return nil, err
	}
	return buffer{l: l, n: n}, nil
}

// Regions is the pool's memory, registered with each io_uring ring once.
func (p *Provider) Regions() [][]byte { return [][]byte{p.region} }

// buffer is a byte lease seen as a source.Buffer.
type buffer struct {
	l *uma.ByteLease
	n int
}

func (b buffer) Bytes() []byte {
	full := b.l.Bytes()
	return full[:b.n:len(full)]
}

func (b buffer) Release() { b.l.Release() }
