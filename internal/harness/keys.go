package harness

import (
	"github.com/psiflow/psiflow/internal/harness/protocol"
)

// KeyCheck says whether every sample a loader delivered arrived exactly once in its
// epoch: nothing twice, nothing skipped. It is computed from the keys of the batch
// events ([protocol.Event].Keys); a loader that sends none leaves it unreported.
//
// Batches are assigned to epochs by the loader's epoch events where it sends them;
// otherwise, where its start event says how many samples an epoch has (Files), by
// position: the first Files samples are epoch 1, the next Files epoch 2, and so on
// (a sample delivered twice then shows up as a duplicate in one epoch and a missing
// one in another); otherwise the k-th delivery of a key counts as epoch k, which
// finds only samples delivered more often than others.
type KeyCheck struct {
	// Reported is true when the loader sent keys with its batches.
	Reported bool `json:"reported"`
	// Delivered counts the samples delivered with keys; Unkeyed those of batch
	// events without keys (they cannot be checked).
	Delivered int64 `json:"delivered"`
	Unkeyed   int64 `json:"unkeyed,omitempty"`
	// Epochs is the number of epochs seen (complete or not); Complete those that
	// ended (an epoch event, the next epoch's first sample by position, or the done
	// event of a run that finished).
	Epochs   int `json:"epochs"`
	Complete int `json:"complete_epochs"`
	// Duplicates counts deliveries of a key already delivered in the same epoch.
	Duplicates int64 `json:"duplicates"`
	// Missing counts, over complete epochs, the keys an epoch should have had and
	// did not deliver: the start event's Files, else every key seen in any epoch.
	Missing int64 `json:"missing"`
	// FirstDuplicate and FirstMissing name one of each, for the report.
	FirstDuplicate string `json:"first_duplicate,omitempty"`
	FirstMissing   string `json:"first_missing,omitempty"`
	// By says how batches were assigned to epochs: "epoch events", "position" or
	// "occurrence".
	By string `json:"by,omitempty"`
}

// ExactlyOnce reports whether the keys show every sample exactly once; known is
// false when the loader sent no keys.
func (k KeyCheck) ExactlyOnce() (ok, known bool) {
	if !k.Reported {
		return false, false
	}
	return k.Duplicates == 0 && k.Missing == 0 && k.Unkeyed == 0, true
}

// CheckKeys computes the [KeyCheck] of a run's events; finished says whether the run
// finished, which completes its last epoch.
func CheckKeys(events []protocol.Event, finished bool) KeyCheck {
	var k KeyCheck
	var files int64
	byEvents := false
	for _, ev := range events {
		switch ev.Event {
		case protocol.Start:
			files = max(files, ev.Files)
		case protocol.Epoch:
			byEvents = true
		case protocol.Batch:
			if len(ev.Keys) > 0 {
				k.Reported = true
			}
		}
	}
	if !k.Reported {
		return k
	}
	var epochs []map[string]int // per epoch, deliveries of each key
	count := map[string]int{}   // deliveries of each key so far (by occurrence)
	all := map[string]bool{}
	cur := -1 // epoch of the next sample, by events or position
	var inEpoch int64
	switch {
	case byEvents:
		k.By = "epoch events"
		cur = 0
	case files > 0:
		k.By = "position"
		cur = 0
	default:
		k.By = "occurrence"
	}
	epoch := func(i int) map[string]int {
		for len(epochs) <= i {
			epochs = append(epochs, map[string]int{})
		}
		return epochs[i]
	}
	for _, ev := range events {
		switch ev.Event {
		case protocol.Epoch:
			if byEvents {
				epoch(cur)
				k.Complete = cur + 1
				cur++
			}
		case protocol.Batch:
			if len(ev.Keys) == 0 {
				k.Unkeyed += int64(ev.N)
				continue
			}
			for _, key := range ev.Keys {
				k.Delivered++
				all[key] = true
				e := cur
				switch k.By {
				case "occurrence":
					e = count[key]
					count[key]++
				case "position":
					if inEpoch == files {
						k.Complete = cur + 1
						cur++
						inEpoch = 0
					}
					e = cur
					inEpoch++
				}
				m := epoch(e)
				if m[key] > 0 {
					k.Duplicates++
					if k.FirstDuplicate == "" {
						k.FirstDuplicate = key
					}
				}
				m[key]++
			}
		}
	}
	switch k.By {
	case "position":
		if finished || inEpoch == files {
			k.Complete = len(epochs)
		}
	case "epoch events":
		// The last epoch ends with the done event of a finished run even where no
		// epoch event followed its last batch.
		if finished && len(epochs) > k.Complete && len(epochs[len(epochs)-1]) > 0 {
			k.Complete = len(epochs)
		}
	case "occurrence":
		if finished {
			k.Complete = len(epochs)
		}
	}
	k.Epochs = len(epochs)
	for i := 0; i < k.Complete && i < len(epochs); i++ {
		m := epochs[i]
		if files > 0 {
			if n := files - int64(len(m)); n > 0 {
				k.Missing += n
				if k.FirstMissing == "" {
					k.FirstMissing = firstAbsent(all, m)
				}
			}
			continue
		}
		for key := range all {
			if m[key] == 0 {
				k.Missing++
				if k.FirstMissing == "" || key < k.FirstMissing {
					k.FirstMissing = key
				}
			}
		}
	}
	return k
}

// firstAbsent returns the smallest key of all that m lacks ("" when m has them all:
// a key no epoch delivered).
func firstAbsent(all map[string]bool, m map[string]int) string {
	first := ""
	for key := range all {
		if m[key] == 0 && (first == "" || key < first) {
			first = key
		}
	}
	return first
}
