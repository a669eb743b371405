// Package addrspace knows the process's virtual-memory limit (RLIMIT_AS, what
// `ulimit -v` sets, common on HPC schedulers) and what the process has mapped, so
// that psiflow sizes and refuses its mappings against the limit instead of letting
// the Go runtime die in pthread_create or a heap growth with a stack dump.
//
// # What it owns
//
//   - Reading the limit ([Current]: RLIMIT_AS soft limit, VmSize of /proc/self/status,
//     RLIMIT_STACK for the stacks of threads still to come).
//   - The address space kept free for the Go runtime's own growth ([Status.Reserve]:
//     heap arenas and the stacks of the threads it may still start), and the check
//     that a mapping fits beside it ([Status.Fit], [FitError]).
//   - The start-up check of a command against the address space it needs
//     ([Status.CheckStart]), capping a memory limit at the address space left
//     ([CapMemoryLimit]), and capping the C library's malloc arenas under a limit
//     ([ReexecWithMallocArenas], [CapMallocArenas]: glibc reserves 64 MiB of address
//     space per arena, one per thread that calls malloc, up to eight per core).
//
// # Environment
//
// [ReexecWithMallocArenas] is the one place that reads and sets MALLOC_ARENA_MAX and
// PSIFLOW_ADDRSPACE_REEXEC, and only when main calls it under a limit.
//
// # What it does not own
//
// Memory limits that bound real memory (cgroup memory.max, memory.limit_in_bytes)
// belong to package cgroup; budgets that follow them belong to the memory runtime.
// Below the Go runtime's own floor (about 800 MiB of address space on linux/amd64:
// it reserves 512 MiB for its page summary alone, before any psiflow code runs) the
// runtime's fatal error comes first and nothing here can replace it: a parent that
// starts psiflow (the Python package) checks the limit before it does.
package addrspace
