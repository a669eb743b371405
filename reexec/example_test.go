package reexec_test

import (
	"fmt"

	"github.com/psiflow/psiflow/reexec"
)

// A program that uses psiflow's cgroups or pressure gate calls Init before anything
// else in main: in a re-executed helper it runs the helper and exits, otherwise it
// returns at once.
func ExampleInit() {
	reexec.Init()
	fmt.Println("not a helper: main goes on")
	// Output: not a helper: main goes on
}
