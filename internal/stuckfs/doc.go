// Package stuckfs mounts, for tests, a small read-only FUSE file system
// whose reads of chosen files do not answer: storage that hangs (an NFS
// server gone, a FUSE daemon stuck) made on purpose, so that tests can hold
// a real read of a regular file in the kernel and see what the readers,
// graphs and commands do with it.
//
// It owns the file system only: which files it serves, which reads hang,
// whether a hanging read answers the kernel's interrupt (FUSE_INTERRUPT,
// sent when the reading thread is signalled or an io_uring request is
// cancelled), and the events saying that a read reached it. Tests decide
// what to assert.
//
// Mounting needs root and /dev/fuse (the mount(2) system call is made
// directly, without fusermount); kerneltest.FUSE says whether this host has
// them. On systems other than Linux [Mount] returns an error.
package stuckfs
