package harness

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/psiflow/psiflow/cgroup"
)

// loaderProc is the loader's process with its two output pipes, read into a
// [loaderLog] and a tail of its standard error.
type loaderProc struct {
	cmd        *exec.Cmd
	outR, errR *os.File
	outW, errW *os.File

	readers sync.WaitGroup
	log     loaderLog
	tail    tailBuffer
}

// newLoaderProc makes the pipes and the command for l, with argv (l's arguments after
// substitutions); nothing runs yet.
func newLoaderProc(l Loader, argv []string) (*loaderProc, error) {
	p := &loaderProc{}
	var err error
	if p.outR, p.outW, err = os.Pipe(); err != nil {
		return nil, fmt.Errorf("stdout pipe: %w", err)
	}
	if p.errR, p.errW, err = os.Pipe(); err != nil {
		p.outR.Close()
		p.outW.Close()
		return nil, fmt.Errorf("stderr pipe: %w", err)
	}
	p.cmd = exec.Command(argv[0], argv[1:]...)
	p.cmd.Env = append(os.Environ(), l.Env...)
	p.cmd.Dir = l.Dir
	p.cmd.Stdout, p.cmd.Stderr = p.outW, p.errW
	return p, nil
}

// start starts the loader in g (blocked until it is in the group) and, once it runs,
// reads its output: protocol lines with times since start, standard error into the
// tail and into stderr if set. The write ends are closed here either way.
func (p *loaderProc) start(g *cgroup.Group, start time.Time, stderr io.Writer) error {
	err := g.Start(p.cmd)
	p.outW.Close()
	p.errW.Close()
	if err != nil {
		return err
	}
	p.readers.Add(2)
	go func() {
		defer p.readers.Done()
		p.log.read(p.outR, start)
	}()
	go func() {
		defer p.readers.Done()
		var w io.Writer = &p.tail
		if stderr != nil {
			w = io.MultiWriter(&p.tail, stderr)
		}
		_, _ = io.Copy(w, p.errR)
	}()
	return nil
}

// close closes the read ends (after drain, or when the loader never started).
func (p *loaderProc) close() {
	p.outR.Close()
	p.errR.Close()
}

// abort closes everything of a loader that was never started.
func (p *loaderProc) abort() {
	p.outW.Close()
	p.errW.Close()
	p.close()
}

// drain waits for the output readers: the pipes close when the last process holding
// them is gone; if something outside the group still holds them, it stops reading
// after grace.
func (p *loaderProc) drain(grace time.Duration) {
	done := make(chan struct{})
	go func() { p.readers.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace):
		p.close()
		<-done
	}
}

// loaderEnd is how waiting for the loader ended.
type loaderEnd struct {
	waitErr  error // the loader's wait status
	killErr  error // from killing the group, if it was killed
	ctxErr   error // ctx's error when ctx ended the run
	timedOut bool
}

// await waits for the loader to exit, for the deadline or for ctx, whichever comes
// first. ended runs the moment the loader is gone or about to be killed (to read what
// must be read then); kill kills the group at the deadline or when ctx is done.
func (p *loaderProc) await(ctx context.Context, deadline time.Time, ended func(), kill func() error) loaderEnd {
	waited := make(chan error, 1)
	go func() { waited <- p.cmd.Wait() }()
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	var e loaderEnd
	select {
	case e.waitErr = <-waited:
		ended()
	case <-timer.C:
		e.timedOut = true
		ended()
		e.killErr = kill()
		e.waitErr = <-waited
	case <-ctx.Done():
		e.ctxErr = ctx.Err()
		ended()
		e.killErr = kill()
		e.waitErr = <-waited
	}
	return e
}

// argv returns l's command with [BallastArg] replaced by ballast (bytes).
func loaderArgv(l Loader, ballast int64) []string {
	out := make([]string, len(l.Argv))
	for i, a := range l.Argv {
		out[i] = strings.ReplaceAll(a, BallastArg, fmt.Sprint(ballast))
	}
	return out
}

// hasBallastArg reports whether l's arguments take a trainer's ballast.
func hasBallastArg(l Loader) bool {
	for _, a := range l.Argv {
		if strings.Contains(a, BallastArg) {
			return true
		}
	}
	return false
}

// tailBuffer keeps the last stderrTail bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > stderrTail {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-stderrTail:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
