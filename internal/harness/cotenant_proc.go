package harness

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/psiflow/psiflow/cgroup"
	"github.com/psiflow/psiflow/internal/harness/protocol"
)

// coStopGrace is how long a co-tenant may take to exit after its standard input was
// closed before the harness kills it.
const coStopGrace = 5 * time.Second

// CoTenant is the process a run starts next to the loader, in the same memory cgroup:
// the stand-in for the training process that shares the loader's limit.
type CoTenant struct {
	// Argv is the co-tenant command without its -bytes and -ramp flags, which the
	// harness appends: a program that runs [CoTenantMain], such as
	// {"/usr/local/bin/psiflow", "cotenant"}.
	Argv []string `json:"argv"`
	// Env is added to the harness's own environment ("KEY=value").
	Env []string `json:"env,omitempty"`
	// Bytes is the anonymous memory the co-tenant touches and holds. [Compare] sets it
	// to Share × the limit.
	Bytes int64 `json:"bytes"`
	// Share is Bytes as a share of the limit, for reports (set by [Compare]).
	Share float64 `json:"share"`
	// Ramp is the time over which the co-tenant touches Bytes, evenly.
	Ramp time.Duration `json:"ramp_ns"`
	// Hold and After make a spike ([Spike]): Bytes is held for Hold, then the
	// co-tenant falls to After bytes (AfterShare of the limit) at once. Zero Hold
	// holds Bytes until the loader ends.
	Hold       time.Duration `json:"hold_ns,omitempty"`
	After      int64         `json:"after_bytes,omitempty"`
	AfterShare float64       `json:"after_share,omitempty"`
}

// CoTenantFate is how a co-tenant's run ended.
type CoTenantFate string

// Co-tenant fates.
const (
	// CoSurvived: the co-tenant was alive when the loader ended and exited when the
	// harness asked it to (closing its standard input).
	CoSurvived CoTenantFate = "survived"
	// CoOOMKilled: the co-tenant died of SIGKILL that the harness did not send while the
	// group's OOM-kill counter rose: the kernel's OOM killer chose it.
	CoOOMKilled CoTenantFate = "oom-killed"
	// CoHarnessKilled: the harness killed it (the run timed out or was canceled, or the
	// co-tenant did not exit within coStopGrace of being asked).
	CoHarnessKilled CoTenantFate = "killed-by-harness"
	// CoFailed: it exited early or with an error, or was killed by a signal from
	// someone else.
	CoFailed CoTenantFate = "failed"
)

// CoTenantResult is what became of the co-tenant in one run.
type CoTenantResult struct {
	// Share and Bytes are its target; Ramp the time it had to reach it.
	Share float64       `json:"share"`
	Bytes int64         `json:"bytes"`
	Ramp  time.Duration `json:"ramp_ns"`
	// Hold and After repeat a spike's (see [CoTenant]).
	Hold  time.Duration `json:"hold_ns,omitempty"`
	After int64         `json:"after_bytes,omitempty"`
	// Touched is the last amount it reported touching; Held is when (since the run's
	// start, by the harness's clock) it reported holding all of Bytes, 0 if never.
	Touched int64         `json:"touched_bytes"`
	Held    time.Duration `json:"held_at_ns"`
	// Fell is when a spike reported its fall to After (since the run's start), 0 if
	// it never fell (the loader ended first, or no spike).
	Fell time.Duration `json:"fell_at_ns,omitempty"`
	// Fate is how it ended; Died when (since the run's start) it exited, and ExitCode
	// its status (-1 when killed by a signal).
	Fate     CoTenantFate  `json:"fate"`
	Died     time.Duration `json:"died_at_ns"`
	ExitCode int           `json:"exit_code"`
	// Detail says more when it did not survive; StderrTail is the end of its stderr.
	Detail     string `json:"detail,omitempty"`
	StderrTail string `json:"stderr_tail,omitempty"`
}

// coProc is a running co-tenant.
type coProc struct {
	cmd   *exec.Cmd
	start time.Time
	stdin *os.File // write end; closing it asks the co-tenant to stop
	res   CoTenantResult

	mu      sync.Mutex
	touched int64
	held    time.Duration
	fell    time.Duration

	exited   atomic.Bool
	died     time.Duration
	waitErr  error
	waitDone chan struct{}
	readers  sync.WaitGroup
	tail     tailBuffer

	// Set by the harness, in this order.
	deadBeforeStop bool // exited (or a zombie) when the harness began to stop it
	asked          bool // its standard input was closed
	sentKill       bool // the harness sent it SIGKILL
}

// startCoTenant starts c in g, blocked until it is in the group (charges do not move
// with a process), with its standard input a pipe whose closing stops it.
func startCoTenant(g *cgroup.Group, c CoTenant, start time.Time) (*coProc, error) {
	if len(c.Argv) == 0 {
		return nil, errors.New("co-tenant: empty command")
	}
	if _, err := exec.LookPath(c.Argv[0]); err != nil {
		return nil, fmt.Errorf("co-tenant: %w", err)
	}
	argv := append(append([]string(nil), c.Argv...), "-bytes", strconv.FormatInt(c.Bytes, 10), "-ramp", c.Ramp.String())
	if c.Hold > 0 {
		argv = append(argv, "-hold", c.Hold.String(), "-after", strconv.FormatInt(c.After, 10))
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), c.Env...)
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("co-tenant: stdin pipe: %w", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, fmt.Errorf("co-tenant: stdout pipe: %w", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		outR.Close()
		outW.Close()
		return nil, fmt.Errorf("co-tenant: stderr pipe: %w", err)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	err = g.Start(cmd)
	inR.Close()
	outW.Close()
	errW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		errR.Close()
		return nil, fmt.Errorf("co-tenant: %w", err)
	}
	p := &coProc{
		cmd: cmd, start: start, stdin: inW, waitDone: make(chan struct{}),
		res: CoTenantResult{Share: c.Share, Bytes: c.Bytes, Ramp: c.Ramp, Hold: c.Hold, After: c.After, ExitCode: -1},
	}
	p.readers.Add(2)
	go func() {
		defer p.readers.Done()
		defer outR.Close()
		br := bufio.NewReader(outR)
		for {
			line, rerr := br.ReadBytes('\n')
			if ev, ok, perr := protocol.Parse(line); ok && perr == nil {
				p.mu.Lock()
				switch ev.Event {
				case protocol.Ramp:
					p.touched = ev.Bytes
				case protocol.Held:
					p.touched = ev.Bytes
					p.held = time.Since(start)
				case protocol.Fell:
					p.fell = time.Since(start)
				}
				p.mu.Unlock()
			}
			if rerr != nil {
				return
			}
		}
	}()
	go func() {
		defer p.readers.Done()
		defer errR.Close()
		_, _ = io.Copy(&p.tail, errR)
	}()
	go func() {
		err := cmd.Wait()
		p.died = time.Since(start)
		p.waitErr = err
		p.exited.Store(true)
		close(p.waitDone)
	}()
	return p, nil
}

// heldAt returns when the co-tenant reported holding all its bytes (0: not yet).
func (p *coProc) heldAt() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.held
}

// markStopping records whether the co-tenant had already died when the harness began
// to stop it, by itself or at the kernel's hand. A process killed by the OOM killer
// may not be reaped yet: a zombie counts as dead.
func (p *coProc) markStopping() {
	p.deadBeforeStop = p.exited.Load() || isZombie(p.cmd.Process.Pid)
}

// markKilled records that the harness is about to SIGKILL the co-tenant (with the
// whole group).
func (p *coProc) markKilled() { p.sentKill = true }

// stop asks a living co-tenant to exit, kills it if it does not within coStopGrace,
// waits for it and its output, and fills in its result. groupOOMKills is the group's
// OOM-kill counter after the run.
func (p *coProc) stop() {
	if !p.exited.Load() {
		p.asked = true
	}
	p.stdin.Close()
	select {
	case <-p.waitDone:
	case <-time.After(coStopGrace):
		p.sentKill = true
		_ = p.cmd.Process.Kill()
		<-p.waitDone
	}
	p.readers.Wait()
}

// finish fills in the result once the co-tenant was reaped; groupOOMKills is the
// group's OOM-kill counter at the end of the run.
func (p *coProc) finish(groupOOMKills uint64) CoTenantResult {
	r := p.res
	p.mu.Lock()
	r.Touched, r.Held, r.Fell = p.touched, p.held, p.fell
	p.mu.Unlock()
	r.Died = p.died
	r.ExitCode = exitCode(p.waitErr)
	r.StderrTail = p.tail.String()
	r.Fate, r.Detail = coTenantFate(p.waitErr, p.deadBeforeStop, p.asked, p.sentKill, groupOOMKills)
	if r.Fate != CoSurvived && r.Fate != CoHarnessKilled {
		if last := lastLine(r.StderrTail); last != "" {
			r.Detail += "; stderr: " + last
		}
	}
	return r
}

// coTenantFate decides how a co-tenant ended from its wait status and what the harness
// did to it:
//
//   - killed by SIGKILL: by the harness if the harness sent SIGKILL while it was still
//     alive; else by the OOM killer if the group's OOM-kill counter is non-zero; else
//     by someone else (failed);
//   - exited with status 0 after being asked to stop: survived;
//   - anything else (an early exit, an error status, another signal): failed.
func coTenantFate(waitErr error, deadBeforeStop, asked, sentKill bool, groupOOMKills uint64) (CoTenantFate, string) {
	var ee *exec.ExitError
	if errors.As(waitErr, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			switch {
			case sentKill && !deadBeforeStop:
				return CoHarnessKilled, "killed by the harness"
			case groupOOMKills > 0:
				return CoOOMKilled, "killed by the kernel's OOM killer"
			default:
				return CoFailed, "killed by SIGKILL from outside the harness, with no OOM kill in the group"
			}
		}
	}
	switch {
	case waitErr == nil && asked && !deadBeforeStop:
		return CoSurvived, ""
	case waitErr == nil:
		return CoFailed, "exited before the loader ended"
	}
	return CoFailed, waitErr.Error()
}

// isZombie reports whether pid has exited but was not reaped yet (state Z or X in
// /proc/PID/stat). It is false where /proc cannot tell.
func isZombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return false
	}
	st := s[i+2]
	return st == 'Z' || st == 'X'
}
