//go:build !linux

package sink

import (
	"context"
	"errors"

	"github.com/psiflow/psiflow/flow"
	"github.com/psiflow/psiflow/tensor"
)

// Torch hands batches to Python through shared memory; it needs Linux (memfd).
type Torch struct{}

// ProtocolVersion is the wire format's version, sent in the hello message.
const ProtocolVersion = 1

var errTorchLinux = errors.New("sink torch: needs Linux (memfd and SCM_RIGHTS)")

// NewTorch fails: the PyTorch consumer needs Linux.
func NewTorch(TorchConfig) (*Torch, error) { return nil, errTorchLinux }

// Listen returns an error: the torch sink needs Linux.
func (t *Torch) Listen() error { return errTorchLinux }

// Socket returns "".
func (t *Torch) Socket() string { return "" }

// Budget returns nil.
func (t *Torch) Budget() *flow.Budget { return nil }

// Slots returns 0: there is no ring off Linux.
func (t *Torch) Slots() int { return 0 }

// Counts returns zeros.
func (t *Torch) Counts() (sent, released int64) { return 0, 0 }

// Accept fails.
func (t *Torch) Accept(context.Context) error { return errTorchLinux }

// Announce fails.
func (t *Torch) Announce(context.Context, string, any) error { return errTorchLinux }

// Next fails.
func (t *Torch) Next(context.Context) (EpochRequest, error) { return EpochRequest{}, errTorchLinux }

// Consume fails.
func (t *Torch) Consume(context.Context, *tensor.Batch) error { return errTorchLinux }

// Close does nothing.
func (t *Torch) Close(error) error { return nil }

// Stop is [Torch.Close] for a stream stopped from outside.
func (t *Torch) Stop(error) error { return nil }

// Lend fails on this platform.
func (t *Torch) Lend(context.Context, int64) ([]byte, func(), error) { return nil, nil, errTorchLinux }
