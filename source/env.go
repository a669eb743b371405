package source

import (
	"fmt"
	"os"
	"strconv"
)

// This file is the one place psiflow reads a process's place in a distributed
// job from the environment: RANK, WORLD_SIZE and LOCAL_RANK, as torchrun,
// torch.distributed.run and most schedulers' launch scripts set them. The
// library never reads them by itself ([Options] with WorldSize 0 is rank 0 of 1);
// the front-ends (psiflow run, demo, serve, psiflow-imagefolder) call
// [EnvSharding] and pass what it says, and python/psiflow passes
// torch.distributed's rank and world size when it is initialised.

// Sharding is this process's share of a dataset: rank Rank of WorldSize reads
// every WorldSize-th shard.
type Sharding struct {
	Rank, WorldSize int
	// FromEnv is true when RANK or WORLD_SIZE was set in the environment.
	FromEnv bool
}

// String says what the sharding means, for a launcher's first lines.
func (s Sharding) String() string {
	if s.WorldSize <= 1 {
		return "not sharded: this process reads the whole dataset"
	}
	from := ""
	if s.FromEnv {
		from = " (RANK and WORLD_SIZE from the environment)"
	}
	return fmt.Sprintf("rank %d of %d%s: this process reads 1/%d of each epoch (files: every %d-th entry of the epoch's order, the same count on every rank; tar shards and tables: every %d-th shard)", s.Rank, s.WorldSize, from, s.WorldSize, s.WorldSize, s.WorldSize)
}

// EnvSharding reads RANK and WORLD_SIZE (as torchrun sets them): unset (or
// empty) means rank 0 of 1; a value that is not an integer, or a rank outside
// [0, WORLD_SIZE), is an error. Pass the result in [Options.Rank] and
// [Options.WorldSize].
func EnvSharding() (Sharding, error) {
	sh := Sharding{WorldSize: 1}
	if v := os.Getenv("WORLD_SIZE"); v != "" {
		w, err := strconv.Atoi(v)
		if err != nil || w < 1 {
			return sh, fmt.Errorf("source: WORLD_SIZE=%q: want a positive integer", v)
		}
		sh.WorldSize, sh.FromEnv = w, true
	}
	if v := os.Getenv("RANK"); v != "" {
		k, err := strconv.Atoi(v)
		if err != nil {
			return sh, fmt.Errorf("source: RANK=%q: want an integer", v)
		}
		sh.Rank, sh.FromEnv = k, true
	}
	if sh.Rank < 0 || sh.Rank >= sh.WorldSize {
		return sh, fmt.Errorf("source: RANK=%d is out of range for WORLD_SIZE=%d", sh.Rank, sh.WorldSize)
	}
	return sh, nil
}

// LocalRank returns LOCAL_RANK from the environment (0 when unset or empty):
// the rank within this machine, for choosing a device. A value that is not a
// non-negative integer is an error, not a silent 0.
func LocalRank() (int, error) {
	v := os.Getenv("LOCAL_RANK")
	if v == "" {
		return 0, nil
	}
	k, err := strconv.Atoi(v)
	if err != nil || k < 0 {
		return 0, fmt.Errorf("source: LOCAL_RANK=%q: want a non-negative integer", v)
	}
	return k, nil
}
