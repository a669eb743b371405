//go:build !linux

package cgroup

import "errors"

// Watchdog is unavailable off Linux.
type Watchdog struct{}

// Watch is unavailable off Linux.
func (g *Group) Watch() (*Watchdog, error) { return nil, errors.New("cgroup: watchdog needs Linux") }

// Stop does nothing off Linux.
func (d *Watchdog) Stop() error { return nil }

// PID returns 0 off Linux.
func (d *Watchdog) PID() int { return 0 }
