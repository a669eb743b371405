//go:build !linux

package cgroup

func childMain(string) int { return 2 }
