//go:build !linux

package memory

import "errors"

// ReleaseProgramText needs Linux (madvise and mlock2 on the program's mappings).
func ReleaseProgramText() (int64, error) {
	return 0, errors.New("memory: release program text: needs Linux")
}

// UnlockProgramText needs Linux (madvise and munlock on the program's mappings).
func UnlockProgramText() (int64, error) {
	return 0, errors.New("memory: unlock program text: needs Linux")
}

// ProgramTextResident needs Linux (/proc/self/pagemap).
func ProgramTextResident() (int64, error) {
	return 0, errors.New("memory: program text resident: needs Linux")
}

func programTextMeter() func() int64 { return nil }

func residentAnon() int64 { return 0 }

func residentSelf() (own, file int64, ok bool) { return 0, 0, false }
