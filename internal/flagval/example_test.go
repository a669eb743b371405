package flagval_test

import (
	"flag"
	"fmt"
	"io"

	"github.com/psiflow/psiflow/internal/flagval"
)

func ExampleSize() {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	mem := flagval.Size(fs, "memory-max", flagval.None, flagval.None, 1<<50, "hard memory limit")
	cpus := flagval.Float(fs, "cpus", 0, 0, 1024, "CPU quota")
	fmt.Println(fs.Parse([]string{"-memory-max", "512MiB", "-cpus", "1.5"}), *mem, *cpus)
	fmt.Println(fs.Parse([]string{"-memory-max", "9999999999G"}))
	fmt.Println(fs.Parse([]string{"-cpus", "NaN"}))
	// Output:
	// <nil> 536870912 1.5
	// invalid value "9999999999G" for flag -memory-max: size "9999999999G": too large (the most is 9223372036854775807 bytes, 8 EiB)
	// invalid value "NaN" for flag -cpus: "NaN" is not a finite number
}
