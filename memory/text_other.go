//go:build !linux

package memory

import "errors"

// ReleaseProgramText needs Linux (madvise and mlock2 on the program's mappings).
func ReleaseProgramText() (int64, error) {
	return 0, errors.New("memory: release program text: needs Linux")
}

// ProgramTextResident needs Linux (/proc/self/pagemap).
func ProgramTextResident() (int64, error) {
	return 0, errors.New("memory: program text resident: needs Linux")
}

func programTextMeter() func() int64 { return nil }
