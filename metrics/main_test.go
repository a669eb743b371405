package metrics_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/psiflow/psiflow/reexec"
)

func TestMain(m *testing.M) {
	reexec.Init()
	goleak.VerifyTestMain(m)
}
