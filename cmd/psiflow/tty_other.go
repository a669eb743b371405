//go:build !linux

package main

// terminalForeground is false off Linux, where psiflow runs no command in a cgroup.
func terminalForeground() bool { return false }
