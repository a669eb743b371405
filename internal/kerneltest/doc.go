// Package kerneltest lets tests that need the kernel (PSI, memory reclaim,
// cgroups, io_uring) say so in one way, so that a test run cannot pass
// without running them on a host that has them.
//
// A test that cannot run calls [Skip] instead of t.Skip, naming the
// [Feature] it lacks. Normally that skips. With PSIFLOW_REQUIRE_KERNEL=1 in the
// environment (make test sets it), a skip of a feature that this host
// supports, judged by [Supported]'s own probe, is a failure: the test was
// meant to run here and did not. A feature the host lacks still skips, so a
// pure cgroup v2 host, a container without io_uring or a non-root run stays
// green, and says why.
//
// Skips that depend on the layout rather than on the kernel (a cgroup v1
// test on a pure v2 host, a privilege the test must not have) keep using
// t.Skip.
//
// It owns no kernel interface itself: the probes are minimal reads and
// system calls, and the tests keep their own set-up.
package kerneltest
