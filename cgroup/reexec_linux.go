//go:build linux

package cgroup

import (
	"fmt"
	"os"
)

func runHelper() {
	if fd, ok := os.LookupEnv(envStartFD); ok {
		trampoline(fd, os.Getenv(envStartPath)) // never returns
	}
	if fd, ok := os.LookupEnv(envWatchFD); ok {
		os.Exit(watchdogMain(fd, os.Getenv(envWatchDirs)))
	}
}

// helperReady is nil when the program called RunHelper, else ErrNoHelper for what.
func helperReady(what string) error {
	if !helperCalled.Load() {
		return fmt.Errorf("%s: %w", what, ErrNoHelper)
	}
	return nil
}
