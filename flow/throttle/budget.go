package throttle

import (
	"fmt"

	"github.com/psiflow/psiflow/flow"
	"github.com/psiflow/psiflow/pressure"
)

// DefaultBudget returns the option that gives a graph its default byte
// budget: [pressure.DefaultBudgetFraction] of the process's effective cgroup
// memory limit (MemTotal when unlimited), so a loader sizes itself to its
// container, not to the host. It also returns the budget and where the limit
// came from, for logs.
func DefaultBudget() (opt flow.Option, bytes int64, source string, err error) {
	bytes, source, err = pressure.DefaultByteBudget(0)
	if err != nil {
		return nil, 0, "", fmt.Errorf("throttle: %w", err)
	}
	return flow.WithBudget(bytes), bytes, source, nil
}
