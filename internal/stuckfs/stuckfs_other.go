//go:build !linux

package stuckfs

import "errors"

// Options configure a mount.
type Options struct {
	Files            map[string][]byte
	Stuck            []string
	HonourInterrupts bool
}

// FS is a mounted file system.
type FS struct{ Dir string }

// Mount returns an error: FUSE mounts are made on Linux only.
func Mount(string, Options) (*FS, error) { return nil, errors.New("stuckfs: Linux only") }

// ReadStarted returns nil.
func (*FS) ReadStarted() <-chan string { return nil }

// Hanging returns 0.
func (*FS) Hanging() int { return 0 }

// Unblock does nothing.
func (*FS) Unblock() {}

// Close does nothing.
func (*FS) Close() error { return nil }
