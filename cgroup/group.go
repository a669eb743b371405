package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Group is one logical cgroup: its cgroup2 directory (absent on [LayoutV1]) and, on v1
// and hybrid hosts, its directory in each v1 hierarchy this package uses (memory, cpu,
// cpuacct, pids, blkio). Each operation picks the file that exists: the v2 spelling when
// the controller is enabled on the cgroup2 side, else the v1 one, so one API serves both
// layouts. A Group is safe for concurrent use; it holds no open files.
type Group struct {
	tree  *Tree
	name  string            // path relative to the hierarchy roots, for messages
	v2    string            // cgroup2 directory, "" when none
	v1    map[string]string // v1 controller -> directory
	owned bool              // created by New: Remove may delete it
	// enableErr records why controllers could not be enabled for a new v2 group, to
	// explain a later ErrNoController.
	enableErr error
}

// Name returns the group's path relative to the hierarchy roots, e.g. "psiflow/job1".
func (g *Group) Name() string { return g.name }

// Layout returns the layout of the tree the group lives in.
func (g *Group) Layout() Layout { return g.tree.layout }

// V2Dir returns the group's cgroup2 directory, or "" on [LayoutV1].
func (g *Group) V2Dir() string { return g.v2 }

// V1Dir returns the group's directory in a v1 controller's hierarchy (for
// memory.pressure_level and cgroup.event_control). It fails with [ErrNoController] when
// the controller has no v1 hierarchy (always so on [LayoutV2]).
func (g *Group) V1Dir(controller string) (string, error) {
	if d, ok := g.v1[controller]; ok {
		return d, nil
	}
	return "", fmt.Errorf("cgroup %s: no v1 %s hierarchy on this %s host: %w", g.name, controller, g.tree.layout, ErrNoController)
}

// dirs returns every distinct directory of the group, v2 first.
func (g *Group) dirs() []string {
	seen := map[string]bool{}
	var out []string
	add := func(d string) {
		if d == "" {
			return
		}
		key := d
		if r, err := filepath.EvalSymlinks(d); err == nil {
			key = r
		}
		if !seen[key] {
			seen[key] = true
			out = append(out, d)
		}
	}
	add(g.v2)
	keys := make([]string, 0, len(g.v1))
	for k := range g.v1 {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		add(g.v1[k])
	}
	return out
}

// readInt reads a file holding one integer (v2file on v2, v1ctl/v1file on v1),
// with errors that name the group and the file.
func (g *Group) readInt(v2file, v1ctl, v1file string) (int64, error) {
	p, _, err := g.file(v2file, v1ctl, v1file)
	if err != nil {
		return 0, err
	}
	v, err := ReadInt(p)
	if err != nil {
		return 0, fmt.Errorf("cgroup %s: %w", g.name, err)
	}
	return v, nil
}

// File returns the path of the group's first interface file that exists: v2file in
// its cgroup2 directory, else v1file in the v1 directory of controller v1ctl; v2
// reports which. v2file or v1file may be empty when a layout has no such file. When
// neither exists the error wraps [ErrNoController] and names both. Read the file with
// the reader of its format ([ReadInt], [ReadLimit], [ReadKeyed], [ReadMemoryStat],
// [ReadPSI]).
func (g *Group) File(v2file, v1ctl, v1file string) (path string, v2 bool, err error) {
	return g.file(v2file, v1ctl, v1file)
}

func (g *Group) file(v2file, v1ctl, v1file string) (path string, v2 bool, err error) {
	if v2file != "" && g.v2 != "" {
		p := filepath.Join(g.v2, v2file)
		if exists(p) {
			return p, true, nil
		}
	}
	if v1file != "" {
		if d, ok := g.v1[v1ctl]; ok {
			p := filepath.Join(d, v1file)
			if exists(p) {
				return p, false, nil
			}
		}
	}
	what := v2file
	if what == "" {
		what = v1file
	} else if v1file != "" {
		what += " or " + v1ctl + "/" + v1file
	}
	err = fmt.Errorf("cgroup %s: no %s on this %s host: %w", g.name, what, g.tree.layout, ErrNoController)
	if g.enableErr != nil {
		err = fmt.Errorf("%w (enabling v2 controllers failed: %v)", err, g.enableErr)
	}
	return "", false, err
}

// Self returns the calling process's cgroup(s) in the default tree.
func Self() (*Group, error) {
	t, err := DefaultTree()
	if err != nil {
		return nil, err
	}
	return t.Self()
}

// Self returns the calling process's cgroup(s), read from <proc>/self/cgroup. When the
// listed path does not exist under a hierarchy's mount (a container that sees only its
// own cgroup mounted at the root), the mount root is used. The group cannot be removed.
func (t *Tree) Self() (*Group, error) { return t.pidGroup("self") }

// Process returns the cgroup(s) of process pid, read from <proc>/<pid>/cgroup.
func (t *Tree) Process(pid int) (*Group, error) { return t.pidGroup(strconv.Itoa(pid)) }

func (t *Tree) pidGroup(pid string) (*Group, error) {
	p := filepath.Join(t.proc, pid, "cgroup")
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("cgroup of process %s: %w", pid, err)
	}
	lines, err := parseProcCgroup(p, string(b))
	if err != nil {
		return nil, fmt.Errorf("cgroup of process %s: %w", pid, err)
	}
	g := &Group{tree: t, v1: map[string]string{}}
	resolve := func(mount, rel string) string {
		d := filepath.Join(mount, rel)
		if !exists(d) {
			return mount
		}
		return d
	}
	for _, l := range lines {
		if l.hierarchy == 0 && len(l.controllers) == 0 {
			if t.v2 != "" {
				g.v2 = resolve(t.v2, l.path)
				if _, ok := g.v1["memory"]; !ok { // the memory group names a hybrid group
					g.name = l.path
				}
			}
			continue
		}
		for _, c := range l.controllers {
			if mount, ok := t.v1[c]; ok {
				g.v1[c] = resolve(mount, l.path)
				if c == "memory" || g.name == "" {
					g.name = l.path
				}
			}
		}
	}
	if g.v2 == "" && len(g.v1) == 0 {
		return nil, fmt.Errorf("cgroup of process %s: %s names no hierarchy mounted under %s", pid, p, t.root)
	}
	return g, nil
}

// Open returns the existing group at path (relative to the hierarchy roots, e.g.
// "psiflow/job1" or "/system.slice/x.service"), in every hierarchy where it exists. The
// group cannot be removed through the returned value.
func (t *Tree) Open(path string) (*Group, error) {
	rel := filepath.Clean("/" + path)
	g := &Group{tree: t, name: strings.TrimPrefix(rel, "/"), v1: map[string]string{}}
	if t.v2 != "" {
		if d := filepath.Join(t.v2, rel); exists(d) {
			g.v2 = d
		}
	}
	for c, mount := range t.v1 {
		if d := filepath.Join(mount, rel); exists(d) {
			g.v1[c] = d
		}
	}
	if g.v2 == "" && len(g.v1) == 0 {
		return nil, fmt.Errorf("cgroup %s: not found under %s", path, t.root)
	}
	return g, nil
}

// New creates a child cgroup in the default tree; see [Tree.New].
func New(name string) (*Group, error) {
	t, err := DefaultTree()
	if err != nil {
		return nil, err
	}
	return t.New(name)
}

// New creates the group <parent>/<name> (parent is [DefaultParent] unless set with
// [WithParent]) in every hierarchy the layout needs: the cgroup2 directory, with the
// memory, cpu, io and pids controllers enabled where the parent offers them, and on v1
// and hybrid hosts a directory in the memory, cpu, cpuacct, pids and blkio hierarchies.
// name must be unique among live groups (include a test name and PID, or a job ID); an
// existing group is an error. On failure nothing created is left behind. Each
// directory records this process as the group's owner ([OwnerXattr]), so that
// [Tree.RemoveOrphans] can sweep it if this process dies without removing it.
//
// On a pure v2 host whose root cgroup has processes of its own (a container without a
// delegated subtree), the kernel refuses to enable controllers below it; New still
// creates the group and the reason is reported by the operations that need them.
func (t *Tree) New(name string) (*Group, error) {
	clean := filepath.Clean(name)
	if name == "" || clean != name || filepath.IsAbs(name) || strings.HasPrefix(clean, "..") || strings.ContainsAny(name, "\n") {
		return nil, fmt.Errorf("cgroup %q: name must be a clean relative path", name)
	}
	rel := filepath.Join(filepath.Clean(t.parent), name)
	g := &Group{tree: t, name: rel, v1: map[string]string{}, owned: true}
	var created []string
	fail := func(err error) (*Group, error) {
		for i := len(created) - 1; i >= 0; i-- {
			_ = os.Remove(created[i])
		}
		return nil, fmt.Errorf("cgroup %s: create: %w", rel, err)
	}
	if t.v2 != "" {
		dir, enableErr, err := t.mkdirV2(rel)
		if err != nil {
			return fail(err)
		}
		created = append(created, dir)
		g.v2, g.enableErr = dir, enableErr
	}
	seen := map[string]string{}
	for _, c := range v1Controllers {
		mount, ok := t.v1[c]
		if !ok {
			continue
		}
		key := mount
		if r, err := filepath.EvalSymlinks(mount); err == nil {
			key = r
		}
		if d, dup := seen[key]; dup { // co-mounted (cpu,cpuacct): one directory
			g.v1[c] = d
			continue
		}
		dir := filepath.Join(mount, rel)
		if err := mkdirLeaf(dir); err != nil {
			return fail(err)
		}
		created = append(created, dir)
		seen[key] = dir
		g.v1[c] = dir
	}
	g.setOwner()
	return g, nil
}

// mkdirLeaf creates the parents of dir (tolerating a concurrent remover of an empty
// parent) and then dir itself, which must not exist.
func mkdirLeaf(dir string) error {
	var err error
	for range 5 {
		if err = os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
			return err
		}
		err = os.Mkdir(dir, 0o755)
		if !isNotExist(err) { // a parent removed under us: try again
			break
		}
	}
	if errors.Is(err, os.ErrExist) {
		return fmt.Errorf("%s already exists (group names must be unique): %w", dir, err)
	}
	return err
}

// mkdirV2 creates the v2 directory rel with every parent on the way, enabling in each
// ancestor (from the mount root down) the controllers it offers from v2Controllers.
func (t *Tree) mkdirV2(rel string) (dir string, enableErr, err error) {
	parts := strings.Split(rel, string(filepath.Separator))
	cur := t.v2
	for i, p := range parts {
		if e := enableControllers(cur); e != nil && enableErr == nil {
			enableErr = e
		}
		cur = filepath.Join(cur, p)
		if i == len(parts)-1 {
			if err := mkdirLeaf(cur); err != nil {
				return "", nil, err
			}
			break
		}
		if err := os.Mkdir(cur, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return "", nil, err
		}
	}
	return cur, enableErr, nil
}

// enableControllers writes "+c" to dir/cgroup.subtree_control for each wanted controller
// that dir offers and has not enabled yet.
func enableControllers(dir string) error {
	avail, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		return err
	}
	enabled, err := os.ReadFile(filepath.Join(dir, "cgroup.subtree_control"))
	if err != nil {
		return err
	}
	have := strings.Fields(string(enabled))
	var errs []error
	for _, c := range v2Controllers {
		if !contains(strings.Fields(string(avail)), c) || contains(have, c) {
			continue
		}
		if err := writeFile(filepath.Join(dir, "cgroup.subtree_control"), "+"+c); err != nil {
			errs = append(errs, fmt.Errorf("enable %s: %w", c, err))
		}
	}
	return errors.Join(errs...)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// writeFile writes s to an existing interface file (never creating one).
func writeFile(path, s string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(s)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %q to %s: %w", s, path, err)
	}
	return nil
}

func readFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}
