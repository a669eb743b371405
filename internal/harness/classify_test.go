package harness

import (
	"os/exec"
	"strings"
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
	const floorMsg = "psiflow run: the memory limit of 24 MiB is too small for this loader: raise the limit to at least 44.6 MiB"
	tests := []struct {
		name     string
		timedOut bool
		oomKills uint64
		waitErr  error
		done     *protocol.Event
		stderr   string
		want     Outcome
		wantSaid string
	}{
		{"clean", false, 0, nil, done, "", Finished, ""},
		{"timeout wins", true, 0, nil, done, "", TimedOut, ""},
		{"stopped below its floor", false, 0, exit("3"), failed, "", Stopped, failed.Error},
		{"stopped, the done event's error wins over stderr", false, 0, exit("3"), failed, "noise\nlast line", Stopped, failed.Error},
		{"stopped without a done event: stderr's last line", false, 0, exit("3"), nil, "budget: 11 MiB\n" + floorMsg + "\n", Stopped, floorMsg},
		{"stopped and silent", false, 0, exit("3"), nil, "", Stopped, ""},
		{"status 3 with an OOM kill is a kill", false, 1, exit("3"), failed, "", OOMKilled, failed.Error},
		{"other failure", false, 0, exit("1"), failed, "", Failed, failed.Error},
	}
	for _, tt := range tests {
		got, why, said := classify(tt.timedOut, false, tt.oomKills, tt.waitErr, tt.done, time.Minute, tt.stderr)
		if got != tt.want {
			t.Errorf("%s: outcome %s (%s), want %s", tt.name, got, why, tt.want)
		}
		if said != tt.wantSaid {
			t.Errorf("%s: said %q, want %q", tt.name, said, tt.wantSaid)
		}
		if tt.wantSaid != "" && !strings.Contains(why, tt.wantSaid) {
			t.Errorf("%s: detail %q does not carry what the loader said", tt.name, why)
		}
	}
}
