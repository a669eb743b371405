//go:build !linux

package pressure

import "fmt"

func runTestHelper(mode string) error { return fmt.Errorf("no helper modes off Linux (%s)", mode) }
