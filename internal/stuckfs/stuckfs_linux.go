//go:build linux

package stuckfs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// Options configure a mount.
type Options struct {
	// Files maps a path relative to the mount ("a.jpg", "cls/b.jpg") to its contents.
	Files map[string][]byte
	// Stuck names the files whose reads hang until [FS.Unblock].
	Stuck []string
	// HonourInterrupts makes a hanging read answer EINTR when the kernel
	// interrupts it (a well-behaved daemon); otherwise it keeps hanging, as
	// a dead NFS server or a stuck daemon does.
	HonourInterrupts bool
}

// FS is a mounted file system. Close it.
type FS struct {
	// Dir is the mount point.
	Dir string

	srv      *fuse.Server
	release  chan struct{}
	once     sync.Once
	started  chan string
	mu       sync.Mutex
	pending  int
	watchdog *exec.Cmd
}

// Mount mounts a file system with opts at dir (an empty folder).
func Mount(dir string, opts Options) (*FS, error) {
	f := &FS{Dir: dir, release: make(chan struct{}), started: make(chan string, 1024)}
	stuck := map[string]bool{}
	for _, n := range opts.Stuck {
		if _, ok := opts.Files[n]; !ok {
			return nil, fmt.Errorf("stuckfs: stuck file %q is not among the files", n)
		}
		stuck[n] = true
	}
	root := &dirNode{fs: f, files: opts.Files, stuck: stuck, honour: opts.HonourInterrupts}
	timeout := time.Duration(0)
	srv, err := fs.Mount(dir, root, &fs.Options{
		MountOptions: fuse.MountOptions{
			DirectMount:       true,
			DirectMountStrict: true,
			FsName:            "stuckfs",
			Name:              "stuckfs",
			DisableXAttrs:     true,
		},
		EntryTimeout: &timeout,
		AttrTimeout:  &timeout,
	})
	if err != nil {
		return nil, fmt.Errorf("stuckfs: mount at %s: %w", dir, err)
	}
	f.srv = srv
	if err := f.watch(); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// watch starts a watchdog process that, once this process has exited (or
// only a thread stuck in a read of this file system is left of it), aborts
// the FUSE connection and detaches the mount. Without it a test process that
// dies with a read of its own file system in flight stays a zombie: the
// kernel waits for an answer from a server that is gone, and the server's
// descriptor is closed only when that last thread ends.
func (f *FS) watch() error {
	var st unix.Stat_t
	if err := unix.Stat(f.Dir, &st); err != nil {
		return fmt.Errorf("stuckfs: stat %s: %w", f.Dir, err)
	}
	conn := unix.Major(st.Dev)<<20 | unix.Minor(st.Dev) // the kernel's dev_t names the connection
	const ctl = "/sys/fs/fuse/connections"
	if entries, err := os.ReadDir(ctl); err == nil && len(entries) == 0 {
		_ = unix.Mount("fusectl", ctl, "fusectl", 0, "") // where systemd has not mounted it
	}
	script := `p=$1; while [ -e /proc/$p ] && [ "$(cut -d' ' -f3 /proc/$p/stat 2>/dev/null)" != Z ]; do sleep 0.2; done
echo 1 > ` + ctl + `/$2/abort 2>/dev/null; umount -l "$3" 2>/dev/null; exit 0`
	cmd := exec.Command("sh", "-c", script, "stuckfs-watchdog", strconv.Itoa(os.Getpid()), strconv.FormatUint(uint64(conn), 10), f.Dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // a signal to the test's process group leaves it running
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("stuckfs: starting the watchdog: %w", err)
	}
	f.watchdog = cmd
	return nil
}

// ReadStarted receives the name of a stuck file each time one of its reads
// reaches the file system and hangs.
func (f *FS) ReadStarted() <-chan string { return f.started }

// Hanging returns the number of reads hanging now.
func (f *FS) Hanging() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.pending
}

// Unblock lets every hanging read, and every later one, answer with the
// file's bytes.
func (f *FS) Unblock() { f.once.Do(func() { close(f.release) }) }

// Close unblocks the reads and unmounts; a mount still in use is detached
// (MNT_DETACH) and goes when its last user does. It waits for the server.
func (f *FS) Close() error {
	f.Unblock()
	err := f.srv.Unmount()
	if err != nil {
		err = errors.Join(err, unix.Unmount(f.Dir, unix.MNT_DETACH))
		if errors.Is(err, unix.EINVAL) { // already gone
			err = nil
		}
	}
	f.srv.Wait()
	if f.watchdog != nil {
		_ = f.watchdog.Process.Kill()
		_ = f.watchdog.Wait()
	}
	return err
}

type dirNode struct {
	fs.Inode
	fs     *FS
	files  map[string][]byte
	stuck  map[string]bool
	honour bool
}

var _ = (fs.NodeOnAdder)((*dirNode)(nil))

func (d *dirNode) OnAdd(ctx context.Context) {
	names := make([]string, 0, len(d.files))
	for n := range d.files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		parent := &d.Inode
		parts := strings.Split(n, "/")
		for _, dir := range parts[:len(parts)-1] {
			child := parent.GetChild(dir)
			if child == nil {
				child = parent.NewPersistentInode(ctx, &fs.Inode{}, fs.StableAttr{Mode: syscall.S_IFDIR})
				parent.AddChild(dir, child, false)
			}
			parent = child
		}
		node := &fileNode{fs: d.fs, name: n, data: d.files[n], stuck: d.stuck[n], honour: d.honour}
		parent.AddChild(parts[len(parts)-1], parent.NewPersistentInode(ctx, node, fs.StableAttr{Mode: syscall.S_IFREG}), false)
	}
}

type fileNode struct {
	fs.Inode
	fs     *FS
	name   string
	data   []byte
	stuck  bool
	honour bool
}

var (
	_ = (fs.NodeGetattrer)((*fileNode)(nil))
	_ = (fs.NodeOpener)((*fileNode)(nil))
	_ = (fs.NodeReader)((*fileNode)(nil))
)

func (n *fileNode) Getattr(ctx context.Context, _ fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	out.Mode = syscall.S_IFREG | 0o444
	out.Size = uint64(len(n.data))
	return 0
}

func (n *fileNode) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	// Direct I/O: every read reaches the file system, none is served from the page cache.
	return nil, fuse.FOPEN_DIRECT_IO, 0
}

func (n *fileNode) Read(ctx context.Context, _ fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	if n.stuck {
		select {
		case <-n.fs.release:
		default:
			n.fs.mu.Lock()
			n.fs.pending++
			n.fs.mu.Unlock()
			select {
			case n.fs.started <- n.name:
			default:
			}
			var interrupted <-chan struct{}
			if n.honour {
				interrupted = ctx.Done()
			}
			var errno syscall.Errno
			select {
			case <-n.fs.release:
			case <-interrupted:
				errno = syscall.EINTR
			}
			n.fs.mu.Lock()
			n.fs.pending--
			n.fs.mu.Unlock()
			if errno != 0 {
				return nil, errno
			}
		}
	}
	if off >= int64(len(n.data)) {
		return fuse.ReadResultData(nil), 0
	}
	end := min(off+int64(len(dest)), int64(len(n.data)))
	return fuse.ReadResultData(n.data[off:end]), 0
}
