//go:build !linux

package main

import "context"

const linuxOnly = "Linux-only"

func probePSI(context.Context) (bool, string)         { return false, linuxOnly }
func probePSITrigger(int) (bool, string)              { return false, linuxOnly }
func probeVMPressure(context.Context) (bool, string)  { return false, linuxOnly }
func probeMemlock(context.Context) (bool, string)     { return false, linuxOnly }
func probeMadvFree(context.Context) (bool, string)    { return false, linuxOnly }
func probeUserfaultfd(context.Context) (bool, string) { return false, linuxOnly }
func probeIOUring(context.Context) (bool, string)     { return false, linuxOnly }

const capSysResource = 24

// hasCap is Linux-only; elsewhere no capability is held.
func hasCap(uint) (bool, error) { return false, nil }
