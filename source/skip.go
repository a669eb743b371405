package source

import (
	"errors"
	"fmt"

	"github.com/psiflow/psiflow/stage"
)

// Skipped is one bad input passed over under [Options.Skip], as [Options.OnSkip]
// receives it: what was skipped, where, how many bytes of the file it lost, and
// why.
type Skipped struct {
	// Path is the file or shard.
	Path string
	// What was skipped: `member "k1.jpg"`, "the rest of the shard", "the file".
	What string
	// Off is where the skipped part starts; -1 when it is the whole file.
	Off int64
	// Lost is how many bytes of the file were passed over; -1 when unknown (a file
	// that could not be opened). Samples cut off by a truncation are beyond the
	// file's end and cannot be counted: What says the rest of the shard is lost.
	Lost int64
	// Err is why.
	Err error
}

// Error says what was skipped, where, and why, without repeating the path and
// offset when the cause is a [*ReadError] at the same place.
func (s *Skipped) Error() string {
	var cause any = s.Err
	var re *ReadError
	if errors.As(s.Err, &re) && re.Path == s.Path {
		switch {
		case re.Off == s.Off || re.Off < 0:
			cause = re.Err
		case s.Off < 0: // the whole file was skipped: say where its read failed
			cause = fmt.Sprintf("%s at offset %d: %v", re.Op, re.Off, re.Err)
		}
	}
	where := s.Path
	if s.Off >= 0 {
		where = fmt.Sprintf("%s at offset %d", s.Path, s.Off)
	}
	lost := ""
	if s.Lost >= 0 {
		lost = fmt.Sprintf(" (%d bytes lost)", s.Lost)
	}
	return fmt.Sprintf("skipped %s of %s%s: %v", s.What, where, lost, cause)
}

// Unwrap returns the cause.
func (s *Skipped) Unwrap() error { return s.Err }

// skipper applies the bad-input policy: Options.Skip and MaxSkips, or
// Options.SkipPolicy (through a stage.Skipper).
type skipper struct {
	skip    bool
	max     int64
	skipped int64
	report  func(error)
	policy  *stage.Skipper // set under SkipPolicy
}

func newSkipper(r resolved) skipper {
	s := skipper{skip: r.Skip, max: r.MaxSkips, report: r.OnSkip}
	if p := r.SkipPolicy; p.OnError == stage.Skip {
		if s.report == nil && p.Log != nil {
			log := p.Log
			s.report = func(err error) {
				key := ""
				var sk *Skipped
				if errors.As(err, &sk) {
					key = sk.Path
				}
				log(key, err)
			}
		}
		p.Log = nil                       // skips are named once, through report
		s.policy, _ = stage.NewSkipper(p) // resolve validated p
		s.skip = true
	}
	return s
}

// seen counts one sample taken for delivery, good or bad (SkipPolicy's
// MaxRate is measured against it).
func (s *skipper) seen() {
	if s.policy != nil {
		s.policy.Seen()
	}
}

// allow returns nil when err may be skipped (and counts it), else the error.
func (s *skipper) allow(err error) error {
	if !s.skip {
		return err
	}
	if s.policy != nil {
		key := "input"
		var re *ReadError
		var sk *Skipped
		switch {
		case errors.As(err, &sk):
			key = sk.Path
		case errors.As(err, &re):
			key = re.Path
		}
		var se *stage.SkipError
		if e := s.policy.Handle(key, err); !errors.As(e, &se) {
			return e
		}
		s.skipped++
		return nil
	}
	s.skipped++
	if s.max > 0 && s.skipped > s.max {
		return fmt.Errorf("%w (%d > %d); last: %w", ErrTooManySkips, s.skipped, s.max, err)
	}
	return nil
}

// told reports one skip that allow let pass.
func (s *skipper) told(sk *Skipped) {
	if s.report != nil {
		s.report(sk)
	}
}

// handle is allow, then told with sk's cause set to err.
func (s *skipper) handle(err error, sk Skipped) error {
	if err := s.allow(err); err != nil {
		return err
	}
	sk.Err = err
	s.told(&sk)
	return nil
}
