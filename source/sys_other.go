//go:build !linux

package source

import (
	"errors"
	"os"
)

// directFlag is 0: O_DIRECT is Linux-only.
const directFlag = 0

// ProbeDirect reports that O_DIRECT is not available (it is Linux-only).
func ProbeDirect(string) error { return errors.New("O_DIRECT is Linux-only") }

func fadviseDontNeed(*os.File, int64, int64) {}

func addrAligned([]byte) bool { return false }

func uringUnavailable() string { return "io_uring is Linux-only" }

func newURingReader(ReaderOptions) (Reader, error) {
	return nil, errors.New("source: io_uring is Linux-only")
}

// remoteFS reports false: only the io_uring reader (Linux) acts on it.
func remoteFS(int, uint64) bool { return false }

func chainUnavailable() string { return "io_uring is Linux-only" }

// statWhole returns no chained read: chains are io_uring's (Linux).
func statWhole(string) (*wholeFile, error) { return nil, nil }
