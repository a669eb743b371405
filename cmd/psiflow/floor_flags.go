package main

import (
	"flag"
	"fmt"
	"time"

	"github.com/psiflow/psiflow/internal/flagval"
	"github.com/psiflow/psiflow/memory"
	"github.com/psiflow/psiflow/memory/pause"
)

// floorFlags are -below-floor and -pause-timeout: what an elastic loader does when
// its cgroup leaves it less than its floor (the image front-ends share them; a
// pipeline file says it in resources.below_floor and resources.pause_timeout).
type floorFlags struct {
	policy  *string
	timeout *time.Duration
}

// addFloorFlags defines the flags on fs.
func addFloorFlags(fs *flag.FlagSet) floorFlags {
	return floorFlags{
		policy: fs.String("below-floor", string(memory.PauseBelowFloor), "with -memory elastic, when the cgroup leaves the loader less than its floor: pause (no reads until the memory is back; the consumer waits), stop (exit status 3, naming the memory left) or run (on at the floor)"),
		timeout: flagval.Duration(fs, "pause-timeout", pause.DefaultTimeout, 0, 24*time.Hour,
			"with -below-floor pause: a pause longer than this ends the run with exit status 3, naming the memory left; 0: wait without end"),
	}
}

// apply returns the policy and the runtime's pause timeout (pause.Forever for 0)
// once fs is parsed; -pause-timeout given with another policy is a usage error.
func (f floorFlags) apply(fs *flag.FlagSet) (memory.FloorPolicy, time.Duration, error) {
	p, err := memory.ParseFloorPolicy(*f.policy)
	if err != nil {
		return "", 0, fmt.Errorf("%w: -below-floor: %v", errUsage, err)
	}
	set := false
	fs.Visit(func(fl *flag.Flag) { set = set || fl.Name == "pause-timeout" })
	switch {
	case p != memory.PauseBelowFloor && set:
		return "", 0, fmt.Errorf("%w: -pause-timeout needs -below-floor pause, not %s", errUsage, p)
	case p != memory.PauseBelowFloor:
		return p, 0, nil
	case *f.timeout == 0:
		return p, pause.Forever, nil
	}
	return p, *f.timeout, nil
}
