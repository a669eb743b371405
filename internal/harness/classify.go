package harness

import (
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/psiflow/psiflow/internal/harness/protocol"
)

// classify decides a run's outcome; detail says more when the run did not
// finish, and said is what the loader itself said ([Result.Said]).
func classify(timedOut, canceled bool, oomKills uint64, waitErr error, done *protocol.Event, timeout time.Duration, stderr string) (out Outcome, detail, said string) {
	switch {
	case timedOut:
		return TimedOut, fmt.Sprintf("did not finish within %v; the group was killed", timeout), ""
	case canceled:
		return Failed, "canceled; the group was killed", ""
	}
	clean := waitErr == nil && done != nil && done.Error == ""
	if clean {
		return Finished, "", ""
	}
	var why []string
	if waitErr != nil {
		why = append(why, waitErr.Error())
	}
	switch {
	case done == nil:
		why = append(why, "no done event")
	case done.Error != "":
		why = append(why, "loader error: "+done.Error)
		said = done.Error
	}
	if last := lastLine(stderr); last != "" {
		why = append(why, "stderr: "+last)
		if said == "" {
			said = last
		}
	}
	if oomKills > 0 {
		return OOMKilled, fmt.Sprintf("%d OOM kills; %s", oomKills, strings.Join(why, "; ")), said
	}
	if exitCode(waitErr) == protocol.ExitBelowFloor {
		return Stopped, strings.Join(why, "; "), said
	}
	return Failed, strings.Join(why, "; "), said
}

func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return -1
		}
		return ee.ExitCode()
	}
	return -1
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return s
}

// killedBySIGKILL reports whether a wait status is a death by SIGKILL.
func killedBySIGKILL(err error) bool {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			return true
		}
	}
	return false
}
