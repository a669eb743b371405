//go:build !linux

package cgroup

import (
	"fmt"
	"os/exec"
)

// Start starts cmd inside the group; see the Linux documentation. Elsewhere it fails with
// [ErrUnsupported].
func (g *Group) Start(cmd *exec.Cmd) error {
	return fmt.Errorf("cgroup %s: start %s: %w", g.name, cmd.Path, ErrUnsupported)
}
