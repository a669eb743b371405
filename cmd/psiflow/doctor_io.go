package main

import (
	"context"
	"fmt"

	"github.com/psiflow/psiflow/source"
)

func init() {
	registerCheck(hostCheck{order: 410, name: "reader backend", probe: probeReaderBackend})
}

// probeReaderBackend reports which backend source's readers use here and,
// when it is not io_uring, why (ENOSYS, seccomp, io_uring_disabled, PSIFLOW_IO).
func probeReaderBackend(context.Context) (bool, string) {
	return describeReader(source.IOStatus())
}

func describeReader(st source.Status) (bool, string) {
	switch {
	case st.Err != nil:
		return false, st.Err.Error()
	case st.Backend == source.BackendURing && st.Reason == "":
		if st.Forced {
			return true, "io_uring (forced by " + source.EnvIO + ")"
		}
		return true, "io_uring (one ring per worker, registered buffers; " + st.SmallFiles() + ")"
	case st.Backend == source.BackendURing:
		return false, fmt.Sprintf("io_uring forced by %s but unavailable: %s", source.EnvIO, st.Reason)
	default:
		return true, "pread fallback: " + st.Reason
	}
}
