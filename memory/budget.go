package memory

import (
	"fmt"

	"github.com/psiflow/psiflow/cgroup"
	"github.com/psiflow/psiflow/internal/addrspace"
)

// DefaultBudgetFraction is the share of the process's effective memory limit that a
// graph's byte budget (bytes in flight) gets by default: one quarter.
//
// Why a quarter: the budget counts only the loader's own buffers, but the same cgroup
// limit also has to hold the training process (framework, model and optimizer state kept
// on the host, CUDA's pinned staging memory), the page cache of the files being read
// (charged to the reader's cgroup), batches already handed to the trainer, and the Go
// heap's headroom (with GOGC=100 the heap may reach twice the live bytes before a
// collection). A quarter in flight, which the collector may stretch towards a half,
// leaves the other half for the trainer and the cache, and keeps the cgroup below the
// point where reclaim turns into PSI "full" stalls before the gate has a chance to act.
// Loaders that run alone in their container can ask for more.
const DefaultBudgetFraction = 0.25

// budgetAlign is the granularity of a derived budget: a page.
const budgetAlign = 4096

// DefaultByteBudget derives a graph's default byte budget from the calling process's
// effective memory limit ([cgroup.SelfMemoryLimit]: the smallest memory.max or
// memory.limit_in_bytes of its cgroup and ancestors, else MemTotal), capped at the
// address space a virtual-memory limit leaves ([addrspace.CapMemoryLimit]), so that a
// loader sizes itself to its container and not to the host. fraction is the share of the limit
// (0 means [DefaultBudgetFraction]); the result is rounded down to a 4 KiB page. source
// says where the limit came from, for logs.
func DefaultByteBudget(fraction float64) (bytes int64, source string, err error) {
	tree, err := cgroup.DefaultTree()
	if err != nil {
		return 0, "", fmt.Errorf("default byte budget: %w", err)
	}
	return ByteBudgetIn(tree, fraction)
}

// ByteBudgetIn is [DefaultByteBudget] for the process's groups in tree (tests pass a
// fake tree).
func ByteBudgetIn(tree *cgroup.Tree, fraction float64) (bytes int64, source string, err error) {
	limit, source, err := memoryLimitIn(tree)
	if err != nil {
		return 0, "", fmt.Errorf("default byte budget: %w", err)
	}
	bytes, err = ByteBudget(limit, fraction)
	if err != nil {
		return 0, "", fmt.Errorf("default byte budget from %s: %w", source, err)
	}
	return bytes, source, nil
}

// SelfMemoryLimit is the memory the calling process may use: the effective memory
// limit of its cgroups ([cgroup.SelfMemoryLimit]: the smallest memory.max or
// memory.limit_in_bytes of its cgroup and ancestors, else MemTotal), capped at the
// address space a virtual-memory limit leaves ([addrspace.CapMemoryLimit]). source
// names where the figure came from. It is what uma.Config.MemoryLimit wants.
func SelfMemoryLimit() (bytes int64, source string, err error) {
	tree, err := cgroup.DefaultTree()
	if err != nil {
		return 0, "", err
	}
	return memoryLimitIn(tree)
}

func memoryLimitIn(tree *cgroup.Tree) (int64, string, error) {
	limit, source, err := tree.SelfMemoryLimit()
	if err != nil {
		return 0, "", err
	}
	// Under a virtual-memory limit (ulimit -v) the address space left is the limit.
	return addrspace.CapMemoryLimit(limit, source)
}

// ByteBudget returns fraction (0 means [DefaultBudgetFraction]) of limit bytes, rounded
// down to a 4 KiB page. It fails for a fraction outside (0, 1] or a limit too small to
// leave one page.
func ByteBudget(limit int64, fraction float64) (int64, error) {
	if fraction == 0 {
		fraction = DefaultBudgetFraction
	}
	if !(fraction > 0 && fraction <= 1) {
		return 0, fmt.Errorf("byte budget fraction %v: want 0 < fraction ≤ 1", fraction)
	}
	b := int64(float64(limit)*fraction) / budgetAlign * budgetAlign
	if b < budgetAlign {
		return 0, fmt.Errorf("memory limit %d bytes × %v leaves less than one %d-byte page", limit, fraction, budgetAlign)
	}
	return b, nil
}
