package harness

import (
	"bufio"
	"io"
	"time"

	"github.com/psiflow/psiflow/internal/harness/protocol"
)

// loaderLog is what a loader wrote on its standard output: its protocol events, when
// each batch arrived by the harness's clock, and the lines that were not protocol.
type loaderLog struct {
	events  []protocol.Event
	arrived []float64 // seconds since the run's start at which each batch event arrived
	perrs   []error   // protocol lines with impossible values
	ignored int       // lines that were not protocol lines
}

// read collects r's lines until it ends or fails; start is the run's start.
func (l *loaderLog) read(r io.Reader, start time.Time) {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, rerr := br.ReadBytes('\n')
		if len(line) > 0 {
			ev, ok, perr := protocol.Parse(line)
			switch {
			case perr != nil:
				l.perrs = append(l.perrs, perr)
			case ok:
				l.events = append(l.events, ev)
				if ev.Event == protocol.Batch {
					l.arrived = append(l.arrived, time.Since(start).Seconds())
				}
			default:
				l.ignored++
			}
		}
		if rerr != nil {
			return
		}
	}
}

// done returns the loader's last done event (nil without one).
func (l *loaderLog) done() *protocol.Event {
	var d *protocol.Event
	for i := range l.events {
		if l.events[i].Event == protocol.Done {
			d = &l.events[i]
		}
	}
	return d
}

// Pauses counts the loader's pauses ([protocol.Pause] events) and adds up the time
// from each to the next [protocol.Resume], by the loader's clock. A pause the run
// ended in lasts until the loader's last event.
func Pauses(events []protocol.Event) (n int, paused time.Duration) {
	var since float64
	open := false
	last := 0.0
	for _, ev := range events {
		last = max(last, ev.T)
		switch ev.Event {
		case protocol.Pause:
			if !open {
				open, since = true, ev.T
				n++
			}
		case protocol.Resume:
			if open {
				open = false
				paused += secs(ev.T - since)
			}
		}
	}
	if open {
		paused += secs(last - since)
	}
	return n, paused
}

func secs(s float64) time.Duration { return time.Duration(max(s, 0) * float64(time.Second)) }
