package main

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/psiflow/psiflow/reexec"
)

// TestMain lets the test binary stand in for the launcher in child processes:
// with envTestAsMain it runs main (the -cgroup child, the signal test), with
// envLauncher it dispatches the arguments it holds (a launcher the tests can
// SIGKILL), with envRunMain it dispatches its own command line (the co-tenant of
// TestBenchCoTenantEndToEnd); otherwise it runs the tests.
func TestMain(m *testing.M) {
	reexec.Init()
	if os.Getenv(envRunMain) != "" {
		os.Exit(dispatch(context.Background(), os.Stdout, os.Stderr, os.Args[1:]))
	}
	if os.Getenv(envTestAsMain) == "1" {
		main()
		return
	}
	if a, ok := os.LookupEnv(envLauncher); ok {
		os.Exit(dispatch(context.Background(), os.Stdout, os.Stderr, strings.Split(a, "\x1f")))
	}
	os.Exit(m.Run())
}
