// Package reexec is the one entry point of psiflow's re-executed helpers: the
// programs that a psiflow library starts by running its own binary again.
//
// Call [Init] first thing in main, and in TestMain of every test binary that starts
// cgroups or opens pressure sources:
//
//	func main() {
//		reexec.Init()
//		...
//	}
//
// # What it owns
//
// Nothing but the call: [Init] calls cgroup.RunHelper (the blocked-start trampoline
// of cgroup.Group.Start and the watchdog of cgroup.Group.Watch) and
// pressure.RunHelper (the user-namespace helper that arms PSI triggers with short
// windows). When the process is one of those helpers, Init runs it and the process
// exits; otherwise Init returns at once.
//
// # Why it is explicit
//
// The libraries used to do this from init functions, so every program that imported
// them could be taken over by an environment variable and exit before its main. Now
// nothing happens before main, and a program that never calls Init never runs a
// helper: cgroup.Group.Start's blocked path, cgroup.Group.Watch and short-window
// triggers refuse with cgroup.ErrNoHelper or pressure.ErrNoHelper instead of running
// the whole program a second time. Every binary under cmd/ and every test binary that
// needs it calls Init; the import-boundary test checks that they do.
//
// # What it does not own
//
// The helpers themselves live with the package that starts them (cgroup, pressure),
// and so does the environment they read.
package reexec
