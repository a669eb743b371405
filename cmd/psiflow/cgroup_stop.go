package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"

	"github.com/psiflow/psiflow/cgroup"
	"github.com/psiflow/psiflow/internal/stopsig"
)

// defaultGrace is how long a launcher waits, after forwarding SIGTERM or SIGINT to its
// command, before it kills every process in the command's cgroup: Kubernetes'
// terminationGracePeriodSeconds default, so a trainer can write its checkpoint.
const defaultGrace = 30 * time.Second

// forwardedSignals are the signals a launcher passes on to the command it runs in a
// cgroup (job schedulers stop jobs with SIGTERM; SIGHUP is a closed terminal or
// session).
var forwardedSignals = []os.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP}

// newLauncherGroup makes the cgroup a launcher command (cmdName) runs its command in:
// it first removes the groups left by launchers that are gone (killed before they
// could remove theirs), then creates psiflow/<name> and starts a watchdog that removes
// the group if this process is killed. The returned function stops the watchdog and
// removes the group, reporting a failure on stderr.
func newLauncherGroup(cmdName, name string) (*cgroup.Group, func(), error) {
	sweepOrphans(cmdName)
	g, err := cgroup.New(name)
	if err != nil {
		return nil, nil, err
	}
	// If this process is killed (SIGKILL included), the watchdog kills what runs in the
	// group and removes it; the child itself also gets SIGKILL (PR_SET_PDEATHSIG).
	wd, err := g.Watch()
	if err != nil {
		fmt.Fprintf(os.Stderr, "psiflow %s: no watchdog (the group is swept by the next start if this process is killed): %v\n", cmdName, err)
	}
	return g, func() {
		if err := g.Remove(); err != nil {
			fmt.Fprintf(os.Stderr, "psiflow %s: %v\n", cmdName, err)
		}
		_ = wd.Stop()
	}, nil
}

// groupedCommand is a command run in a cgroup by a launcher that forwards the
// signals it receives and kills the group when the command outlives its grace period.
type groupedCommand struct {
	cmdName string // the launcher command, for messages ("cgroup run")
	group   *cgroup.Group
	cmd     *exec.Cmd
	grace   time.Duration
	// sharedGroup: the command shares the launcher's process group because the
	// launcher is the foreground job of a terminal; the terminal then sends
	// SIGINT and SIGHUP to both, and forwarding them would deliver them twice.
	sharedGroup bool
	// quiet: the command is psiflow itself (run -cgroup's child), which says the
	// signal it stopped on; the forwarding and the grace period are not said.
	quiet bool
	sigs  chan os.Signal
}

// prepareGroupedCommand sets cmd up to be started by [groupedCommand.start]: outside a
// terminal's foreground the command gets a process group of its own, so that the
// signals a scheduler sends the launcher reach it once, from the launcher.
func prepareGroupedCommand(cmdName string, g *cgroup.Group, cmd *exec.Cmd, grace time.Duration) *groupedCommand {
	gc := &groupedCommand{cmdName: cmdName, group: g, cmd: cmd, grace: grace, sharedGroup: terminalForeground()}
	if !gc.sharedGroup {
		attr := &syscall.SysProcAttr{}
		if cmd.SysProcAttr != nil {
			*attr = *cmd.SysProcAttr
		}
		attr.Setpgid = true
		cmd.SysProcAttr = attr
	}
	return gc
}

// start starts the command in the group, listening for the forwarded signals first
// so that none arriving during the start is lost (or ends the launcher: SIGHUP).
func (gc *groupedCommand) start() error {
	gc.sigs = make(chan os.Signal, 8)
	signal.Notify(gc.sigs, forwardedSignals...)
	if err := gc.group.Start(gc.cmd); err != nil {
		signal.Stop(gc.sigs)
		return err
	}
	return nil
}

// stopReport says how a supervised command ended.
type stopReport struct {
	signal  os.Signal     // the first stop signal received (nil: none)
	after   time.Duration // from that signal to the command's exit
	killed  bool          // the grace period passed and the group was killed
	killErr error         // the group could not be emptied
}

// supervise forwards stop signals to the command until exited is closed: SIGTERM,
// SIGINT and SIGHUP received by the launcher go to the command's process; a
// cancellation of ctx that is not a signal (a caller stopping the launcher) counts as
// SIGTERM. The first one starts the grace period, after which every process in the
// group is killed. It returns when exited is closed.
func (gc *groupedCommand) supervise(ctx context.Context, exited <-chan struct{}, log io.Writer) stopReport {
	defer signal.Stop(gc.sigs)
	var rep stopReport
	var since time.Time
	var grace <-chan time.Time
	done := ctx.Done()
	stop := func(s os.Signal) {
		name := stopsig.Name(s)
		if gc.sharedGroup && s != syscall.SIGTERM {
			if !gc.quiet {
				fmt.Fprintf(log, "psiflow %s: %s (the terminal sent it to the command too)\n", gc.cmdName, name)
			}
		} else if err := gc.cmd.Process.Signal(s); err == nil && !gc.quiet {
			fmt.Fprintf(log, "psiflow %s: %s forwarded to %s (pid %d)\n", gc.cmdName, name, gc.cmd.Path, gc.cmd.Process.Pid)
		}
		if rep.signal != nil {
			return
		}
		rep.signal, since = s, time.Now()
		grace = time.After(gc.grace)
		if !gc.quiet {
			fmt.Fprintf(log, "psiflow %s: every process in cgroup %s gets SIGKILL in %v unless the command exits (-grace)\n", gc.cmdName, gc.group.Name(), gc.grace)
		}
	}
	for {
		select {
		case <-exited:
			// A signal that reached the command and the launcher together (a
			// terminal's Ctrl-C) may still wait here when the command has already
			// exited on it: select picks among ready cases at random, so take it.
			for drained := false; !drained; {
				select {
				case s := <-gc.sigs:
					stop(s)
				default:
					drained = true
				}
			}
			if rep.signal != nil {
				rep.after = time.Since(since)
			}
			return rep
		case s := <-gc.sigs:
			stop(s)
		case <-done:
			done = nil
			if !signalCancelled(ctx) { // a signal arrives on gc.sigs as well
				stop(syscall.SIGTERM)
			}
		case <-grace:
			grace = nil
			rep.killed = true
			fmt.Fprintf(log, "psiflow %s: the command did not exit within %v of %s: killing every process in cgroup %s\n", gc.cmdName, gc.grace, stopsig.Name(rep.signal), gc.group.Name())
			rep.killErr = gc.group.Kill(10 * time.Second)
		}
	}
}

// err turns the command's wait error and the stop report into the launcher's result:
// nil when the command exited with status 0 (after a forwarded signal too: it stopped
// as asked), else an error naming the group and what ended the command that carries
// the command's exit status (see [commandStatus]) when it has one.
func (rep stopReport) err(g *cgroup.Group, argv0 string, waitErr error) error {
	var err error
	switch {
	case rep.killed:
		err = fmt.Errorf("%s in cgroup %s did not exit within the grace period after %s: killed (%v)", argv0, g.Name(), stopsig.Name(rep.signal), errors.Join(waitErr, rep.killErr))
	case rep.signal != nil && waitErr != nil:
		err = fmt.Errorf("%s in cgroup %s stopped %v after %s: %w", argv0, g.Name(), rep.after.Round(time.Millisecond), stopsig.Name(rep.signal), waitErr)
	case waitErr != nil:
		err = fmt.Errorf("%s in cgroup %s: %w", argv0, g.Name(), waitErr)
	default:
		return nil
	}
	if code, ok := commandStatus(waitErr); ok {
		return &exitStatusError{code: code, err: err}
	}
	return err
}

// commandStatus is the exit status a launcher ends with for a command that ended
// with waitErr: the command's own status, or 128 plus the signal's number when a
// signal killed it (as a shell, timeout and env report it). ok is false when waitErr
// does not say how the command ended (nil, or a wait that failed).
func commandStatus(waitErr error) (code int, ok bool) {
	var ee *exec.ExitError
	if !errors.As(waitErr, &ee) {
		return 0, false
	}
	if ws, isWS := ee.Sys().(syscall.WaitStatus); isWS && ws.Signaled() {
		return 128 + int(ws.Signal()), true
	}
	if c := ee.ExitCode(); c >= 0 {
		return c, true
	}
	return 0, false
}

// exitedWith reports whether the command of waitErr exited by itself (not
// killed by a signal) with status code.
func exitedWith(waitErr error, code int) bool {
	var ee *exec.ExitError
	return errors.As(waitErr, &ee) && ee.ExitCode() == code
}

// signalCancelled reports whether ctx was cancelled by a stop signal (main's
// [stopsig.Context]), as opposed to a caller's cancel.
func signalCancelled(ctx context.Context) bool { return stopsig.Of(ctx) != nil }
