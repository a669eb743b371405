package main

import (
	"fmt"
	"io"

	"github.com/psiflow/psiflow/internal/addrspace"
)

// mallocArenasUnderLimit is how many malloc arenas the C library may keep under a
// virtual-memory limit: each reserves 64 MiB of address space.
const mallocArenasUnderLimit = 2

// checkAddressSpace runs before anything else in main: under a virtual-memory limit
// (RLIMIT_AS, ulimit -v) it caps the C library's malloc arenas, and refuses to start
// a command whose address space (measured, see addressSpaceNeed) does not fit, with
// the figures, instead of a Go fatal error and stack dump later. It returns the exit
// status: 0 to go on.
func checkAddressSpace(stderr io.Writer, args []string) int {
	st, err := addrspace.Current()
	if err != nil {
		fmt.Fprintf(stderr, "psiflow: %v (the virtual-memory limit is not checked)\n", err)
		return 0
	}
	if !st.Limited() {
		return 0
	}
	if err := addrspace.ReexecWithMallocArenas(mallocArenasUnderLimit); err != nil {
		fmt.Fprintf(stderr, "psiflow: %v\n", err)
	}
	name, need := addressSpaceNeed(args, st)
	if err := st.CheckStart(name, need); err != nil {
		fmt.Fprintf(stderr, "psiflow: %v\n", err)
		return 1
	}
	return 0
}

// Address space a command maps beyond what psiflow holds when main starts, measured
// with `ulimit -v` and VmPeak (docs/HOSTILE-INPUT.md, "Virtual-memory limits"):
// commands that read and decode (run, demo, serve) grew by 180–256 MiB over the run
// of pipelines/imagefolder.yaml (thread stacks, the 64 MiB read pool, the Go heap),
// the others by at most 48 MiB.
const (
	pipelineAddressSpace = 320 << 20
	commandAddressSpace  = 64 << 20
)

// addressSpaceNeed returns the command args name and the address space it needs
// beyond what the process holds at start: for commands that run a pipeline, the
// larger of the measured figure and the runtime's reserve plus the smallest read
// pool.
func addressSpaceNeed(args []string, st addrspace.Status) (string, int64) {
	name := "help"
	if len(args) > 0 {
		name = args[0]
		if len(args) > 1 {
			if _, ok := commands[args[0]+" "+args[1]]; ok {
				name += " " + args[1]
			}
		}
	}
	switch name {
	case "run", "demo", "serve":
		return name, max(pipelineAddressSpace, st.Reserve()+64<<20)
	}
	return name, commandAddressSpace
}
