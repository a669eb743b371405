//go:build linux

package cuda

import "runtime"

// thread is one goroutine locked to its OS thread with the device's context
// current on it. A CUDA context is current per OS thread, so every driver
// call that needs one runs here: the goroutine never unlocks, and when it
// returns the thread exits with it, taking its context binding along.
type thread struct {
	work chan func()
	done chan struct{}
}

// startThread starts a thread and makes ctx current on it.
func startThread(l *lib, ctx uintptr) (*thread, error) {
	t := &thread{work: make(chan func()), done: make(chan struct{})}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		defer close(t.done)
		if err := l.check("cuCtxSetCurrent", call(l.ctxSetCurrent, ctx)); err != nil {
			errc <- err
			return
		}
		errc <- nil
		for f := range t.work {
			f()
		}
	}()
	if err := <-errc; err != nil {
		<-t.done
		return nil, err
	}
	return t, nil
}

// do runs f on the thread and returns when it has run. The caller makes sure
// the thread was not stopped (the owners hold a read lock that stop's caller
// takes for writing).
func (t *thread) do(f func()) {
	ch := make(chan struct{})
	t.work <- func() { f(); close(ch) }
	<-ch
}

// stop ends the thread after the work queued so far.
func (t *thread) stop() {
	close(t.work)
	<-t.done
}
