package sink

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"time"
)

// aLongTimeAgo is a deadline in the past: it makes a blocked Accept return.
var aLongTimeAgo = time.Unix(1, 0)

// listenUnix listens on path, replacing a stale socket file left by a dead
// process (but never any other kind of file).
func listenUnix(network, path string) (*net.UnixListener, error) {
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("%s exists and is not a socket", path)
		}
		if c, err := net.Dial(network, path); err == nil {
			c.Close()
			return nil, fmt.Errorf("%s: another process is listening there", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, err
		}
	}
	ln, err := net.ListenUnix(network, &net.UnixAddr{Name: path, Net: network})
	if err != nil {
		return nil, err
	}
	ln.SetUnlinkOnClose(true)
	return ln, nil
}

// acceptUnix accepts one connection on ln, giving up when ctx ends.
func acceptUnix(ctx context.Context, ln *net.UnixListener) (*net.UnixConn, error) {
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		select {
		case <-ctx.Done():
			_ = ln.SetDeadline(aLongTimeAgo)
		case <-done:
		}
	}()
	c, err := ln.AcceptUnix()
	close(done)
	<-stopped
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("waiting for a consumer to connect: %w", ctx.Err())
		}
		return nil, err
	}
	return c, nil
}

func closeListener(ln *net.UnixListener, path string) error {
	err := ln.Close()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	_ = os.Remove(path) // already unlinked by Close in the normal case
	return err
}
