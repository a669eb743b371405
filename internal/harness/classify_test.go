package harness

import (
	"os/exec"
	"testing"
	"time"

	"github.com/psiflow/psiflow/internal/harness/protocol"
)

func TestClassifyOutcomes(t *testing.T) {
	exit := func(code string) error {
		err := exec.Command("sh", "-c", "exit "+code).Run()
		if err == nil && code != "0" {
			t.Fatalf("sh exit %s: no error", code)
		}
		return err
	}
	done := &protocol.Event{Event: "done"}
	failed := &protocol.Event{Event: "done", Error: "stopped: the cgroup leaves the loader 20.0 MiB"}
	tests := []struct {
		name     string
		timedOut bool
		oomKills uint64
		waitErr  error
		done     *protocol.Event
		want     Outcome
	}{
		{"clean", false, 0, nil, done, Finished},
		{"timeout wins", true, 0, nil, done, TimedOut},
		{"stopped below its floor", false, 0, exit("3"), failed, Stopped},
		{"status 3 with an OOM kill is a kill", false, 1, exit("3"), failed, OOMKilled},
		{"other failure", false, 0, exit("1"), failed, Failed},
	}
	for _, tt := range tests {
		got, why := classify(tt.timedOut, false, tt.oomKills, tt.waitErr, tt.done, time.Minute, "")
		if got != tt.want {
			t.Errorf("%s: outcome %s (%s), want %s", tt.name, got, why, tt.want)
		}
	}
}
