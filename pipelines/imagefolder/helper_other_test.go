//go:build !linux

package imagefolder

import "fmt"

const helperEnv = "PSIFLOW_IMAGEFOLDER_TEST_HELPER"

func runHelper(mode string) int {
	fmt.Println("helper processes run on Linux only:", mode)
	return 2
}
