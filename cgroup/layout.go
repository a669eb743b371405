package cgroup

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
)

// Layout is how the cgroup file systems of a host are arranged.
type Layout int

const (
	// LayoutUnknown is the zero value: no cgroup file system was found.
	LayoutUnknown Layout = iota
	// LayoutV2 is the pure unified hierarchy: one cgroup2 file system at the root
	// (what most current distributions and container runtimes use).
	LayoutV2
	// LayoutHybrid has the v1 controllers in their own hierarchies under the root and a
	// cgroup2 file system at <root>/unified, which carries the per-cgroup PSI files
	// (memory.pressure) but usually no memory, cpu, io or pids controller.
	LayoutHybrid
	// LayoutV1 has v1 hierarchies only (no cgroup2 mount, hence no per-cgroup PSI).
	LayoutV1
)

// String returns "v2", "hybrid", "v1" or "unknown".
func (l Layout) String() string {
	switch l {
	case LayoutV2:
		return "v2"
	case LayoutHybrid:
		return "hybrid"
	case LayoutV1:
		return "v1"
	}
	return "unknown"
}

// DefaultRoot is where cgroup file systems are mounted on Linux.
const DefaultRoot = "/sys/fs/cgroup"

// DefaultParent is the directory, directly under each hierarchy's root, in which [New]
// creates groups.
const DefaultParent = "psiflow"

// v1Controllers are the v1 controllers this package uses; others (cpuset, freezer,
// devices, named hierarchies) are left alone.
var v1Controllers = []string{"memory", "cpu", "cpuacct", "pids", "blkio"}

// v2Controllers are the controllers [Tree.New] enables for its groups on cgroup2, where
// the parent offers them.
var v2Controllers = []string{"memory", "cpu", "io", "pids"}

// ErrUnsupported is returned on systems without cgroups (anything but Linux).
var ErrUnsupported = errors.New("cgroups are Linux-only")

// ErrNoController is wrapped by operations whose controller is not available to a group
// (for example memory.max on the cgroup2 side of a hybrid host, or io weight on a v1
// blkio hierarchy without a proportional-weight scheduler).
var ErrNoController = errors.New("controller not available")

// Tree is a host's cgroup file systems: the mount root, the layout found there and the
// mount directory of each hierarchy. The zero value is not usable; call [OpenTree] or
// [DefaultTree]. Tests point a Tree at a fake tree built in a temporary directory.
type Tree struct {
	root   string
	proc   string
	parent string
	layout Layout
	v2     string            // mount directory of cgroup2, "" when LayoutV1
	v1     map[string]string // v1 controller -> mount directory
}

// TreeOption configures [OpenTree].
type TreeOption func(*Tree)

// WithProc sets the proc file system used for /proc/self/cgroup and /proc/meminfo
// (default "/proc").
func WithProc(dir string) TreeOption { return func(t *Tree) { t.proc = dir } }

// WithParent sets the directory, under each hierarchy's root, in which [Tree.New] creates
// groups (default [DefaultParent]). It may contain slashes; it is created when missing.
func WithParent(name string) TreeOption { return func(t *Tree) { t.parent = name } }

// OpenTree inspects the cgroup file systems mounted under root and returns the tree.
// The layout is found from the files present: <root>/cgroup.controllers means a pure v2
// mount; <root>/unified/cgroup.controllers beside v1 controller directories means hybrid;
// v1 controller directories alone mean v1. Co-mounted v1 hierarchies ("cpu,cpuacct") are
// found by splitting their directory names.
func OpenTree(root string, opts ...TreeOption) (*Tree, error) {
	t := &Tree{root: root, proc: "/proc", parent: DefaultParent}
	for _, o := range opts {
		o(t)
	}
	if clean := filepath.Clean(t.parent); clean == "." || strings.HasPrefix(clean, "..") || filepath.IsAbs(clean) {
		return nil, fmt.Errorf("cgroup tree %s: parent %q must be a relative directory name", root, t.parent)
	}
	if exists(filepath.Join(root, "cgroup.controllers")) {
		t.layout, t.v2 = LayoutV2, root
		return t, nil
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, fmt.Errorf("cgroup tree %s: %w", root, err)
	}
	t.v1 = make(map[string]string)
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	// Exact names ("cpu") win over co-mounted ones ("cpu,cpuacct"): visit longer names first
	// so that exact names overwrite them.
	sort.Slice(names, func(i, j int) bool { return len(names[i]) > len(names[j]) })
	for _, name := range names {
		dir := filepath.Join(root, name)
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			continue
		}
		for _, c := range strings.Split(name, ",") {
			for _, want := range v1Controllers {
				if c == want {
					t.v1[c] = dir
				}
			}
		}
	}
	hasV2 := exists(filepath.Join(root, "unified", "cgroup.controllers"))
	switch {
	case len(t.v1) > 0 && hasV2:
		t.layout, t.v2 = LayoutHybrid, filepath.Join(root, "unified")
	case len(t.v1) > 0:
		t.layout = LayoutV1
	default:
		return nil, fmt.Errorf("cgroup tree %s: no cgroup2 mount and none of the v1 controllers %v", root, v1Controllers)
	}
	return t, nil
}

// DefaultTree opens the tree at [DefaultRoot]. It fails with [ErrUnsupported] on
// anything but Linux.
func DefaultTree() (*Tree, error) {
	if runtime.GOOS != "linux" {
		return nil, fmt.Errorf("cgroup tree %s: %w", DefaultRoot, ErrUnsupported)
	}
	return OpenTree(DefaultRoot)
}

// Layout returns the layout found by [OpenTree].
func (t *Tree) Layout() Layout { return t.layout }

// Root returns the mount root the tree was opened at.
func (t *Tree) Root() string { return t.root }

// V2Root returns the cgroup2 mount directory, or "" on [LayoutV1].
func (t *Tree) V2Root() string { return t.v2 }

// V1Root returns the mount directory of a v1 controller's hierarchy, or "" when the
// controller has no v1 hierarchy.
func (t *Tree) V1Root(controller string) string { return t.v1[controller] }

// DetectLayout returns the layout of the cgroup file systems under [DefaultRoot].
func DetectLayout() (Layout, error) {
	t, err := DefaultTree()
	if err != nil {
		return LayoutUnknown, err
	}
	return t.layout, nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func isNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }
