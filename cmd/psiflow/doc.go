// Command psiflow is the launcher for psiflow data-loading pipelines.
//
// Each subcommand lives in its own file and registers itself in an init
// function with [register]; main dispatches on the first argument.
//
// With PSIFLOW_CPUPROFILE=FILE in the environment, any command writes a CPU profile
// of its run to FILE, for `go tool pprof` (psiflow serve started by the Python
// package inherits the variable).
package main
