//go:build !linux

package pressure

import (
	"context"
	"errors"
	"fmt"
	"runtime"
)

// errNotLinux is returned by everything that needs Linux's PSI, cgroups or eventfd.
var errNotLinux = fmt.Errorf("pressure signals need Linux (this is %s): %w", runtime.GOOS, errors.ErrUnsupported)

// HasCapSysResource reports false with an error: capabilities are a Linux notion.
func HasCapSysResource() (bool, error) { return false, errNotLinux }

// SelfCgroupV2Dir fails: cgroups are Linux only.
func SelfCgroupV2Dir() (string, error) { return "", errNotLinux }

// SelfMemoryV1Dir fails: cgroups are Linux only.
func SelfMemoryV1Dir() (string, error) { return "", errNotLinux }

// SelfPressurePath returns the /proc/pressure path, which does not exist off Linux.
func SelfPressurePath(resource string) (path, reason string) {
	return SystemPressurePath(resource), errNotLinux.Error()
}

// OpenTriggers fails: PSI triggers are Linux only.
func OpenTriggers(context.Context, TriggerConfig) (Source, error) { return nil, errNotLinux }

// OpenVMPressure fails: vmpressure is Linux only.
func OpenVMPressure(context.Context, VMPressureConfig) (Source, error) { return nil, errNotLinux }

// ProbeShortWindows reports false: PSI triggers are Linux only.
func ProbeShortWindows(context.Context, string) (bool, string) { return false, errNotLinux.Error() }

// runHelper does nothing off Linux: the user-namespace helper is never started there.
func runHelper() {}
