//go:build !linux

package main

import (
	"errors"
	"os"
)

func openPty() (*os.File, *os.File, error) { return nil, nil, errors.New("Linux-only") }
