//go:build linux

package memory

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"

	"github.com/psiflow/psiflow/cgroup"
	"github.com/psiflow/psiflow/internal/kernfile"
	"golang.org/x/sys/unix"
)

// programMappings returns this program's read-only file mappings (its code and
// read-only data) from /proc/self/maps.
func programMappings() ([]kernfile.Mapping, error) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return nil, err
	}
	maps, err := kernfile.ReadMaps("/proc/self/maps")
	if err != nil {
		return nil, err
	}
	var out []kernfile.Mapping
	for _, m := range maps {
		if m.Path == exe && !m.Writable() && m.End > m.Start {
			out = append(out, m)
		}
	}
	return out, nil
}

// ReleaseProgramText gives back the program's code pages that nothing else maps
// and locks again only what is faulted in from then on: it unlocks the program's
// file mappings, asks the kernel to reclaim them (MADV_PAGEOUT: clean file pages
// that no other process maps are dropped at once) and locks them again with
// MLOCK_ONFAULT. What stays resident and locked is then what the loader runs after
// the call, not everything it ran since it started: measured here, 20 MiB of locked
// text before, 11 MiB after a further epoch, 8 MiB after 3 s of the monitor alone.
// It returns the bytes the program's mappings held resident before minus after.
func ReleaseProgramText() (int64, error) { return releaseProgramText(true) }

// UnlockProgramText is [ReleaseProgramText] without the new lock: the program's
// code stays unlocked (the kernel may reclaim it like any clean file page) until
// [LockProgramText] locks it again. A paused loader runs only its monitor, and
// whatever it faults in during the pause's first second (the reads and decodes in
// flight finishing) is then not locked and charged as unevictable.
func UnlockProgramText() (int64, error) { return releaseProgramText(false) }

func releaseProgramText(relock bool) (int64, error) {
	ranges, err := programMappings()
	if err != nil {
		return 0, fmt.Errorf("memory: release program text: %w", err)
	}
	before := residentFile()
	var errs []error
	for _, r := range ranges {
		n := r.End - r.Start
		if _, _, e := unix.Syscall(unix.SYS_MUNLOCK, r.Start, n, 0); e != 0 {
			errs = append(errs, fmt.Errorf("munlock %#x: %w", r.Start, e))
		}
		if _, _, e := unix.Syscall(unix.SYS_MADVISE, r.Start, n, unix.MADV_PAGEOUT); e != 0 {
			errs = append(errs, fmt.Errorf("madvise(MADV_PAGEOUT) %#x: %w", r.Start, e))
		}
		if !relock {
			continue
		}
		if _, _, e := unix.Syscall(unix.SYS_MLOCK2, r.Start, n, unix.MLOCK_ONFAULT); e != 0 {
			errs = append(errs, fmt.Errorf("mlock2 %#x: %w", r.Start, e))
		}
	}
	freed := max(0, before-residentFile())
	if len(errs) > 0 {
		return freed, fmt.Errorf("memory: release program text: %w", errors.Join(errs...))
	}
	return freed, nil
}

// residentFile returns RssFile of /proc/self/status in bytes (0 if unreadable: it
// only measures what ReleaseProgramText freed).
func residentFile() int64 {
	b, err := cgroup.ReadProcSizes("/proc/self/status", "RssFile:")
	if err != nil {
		return 0
	}
	return b[0]
}

// residentSelf returns RssAnon + RssShmem and RssFile of /proc/self/status in
// bytes (ok false if unreadable).
func residentSelf() (own, file int64, ok bool) {
	b, err := cgroup.ReadProcSizes("/proc/self/status", "RssAnon:", "RssShmem:", "RssFile:")
	if err != nil {
		return 0, 0, false
	}
	return b[0] + b[1], b[2], true
}

// residentAnon returns RssAnon of /proc/self/status in bytes (0 if unreadable:
// it only measures what a trim of the C heap freed).
func residentAnon() int64 {
	b, err := cgroup.ReadProcSizes("/proc/self/status", "RssAnon:")
	if err != nil {
		return 0
	}
	return b[0]
}

// ProgramTextResident returns the bytes of this program's read-only file mappings
// (its code and read-only data) that its page tables map now: the present bit of
// /proc/self/pagemap, which needs no privilege. Under [LockProgramText] these are
// the locked pages, which a memory cgroup counts as unevictable where they were
// first read in it. Reading it costs a read of 8 bytes per page of the mappings
// (about 70 KiB for a 35 MiB binary), not a walk of the whole address space as
// smaps_rollup's Locked does.
func ProgramTextResident() (int64, error) {
	ranges, err := programMappings()
	if err != nil {
		return 0, fmt.Errorf("memory: program text resident: %w", err)
	}
	return mappedBytes(ranges)
}

// mappedBytes counts the pages of ranges that this process's page tables map.
func mappedBytes(ranges []kernfile.Mapping) (int64, error) {
	f, err := os.Open("/proc/self/pagemap")
	if err != nil {
		return 0, fmt.Errorf("memory: %w", err)
	}
	defer f.Close()
	page := uintptr(os.Getpagesize())
	var buf []byte
	var n int64
	for _, r := range ranges {
		pages := int((r.End - r.Start) / page)
		if cap(buf) < 8*pages {
			buf = make([]byte, 8*pages)
		}
		b := buf[:8*pages]
		if _, err := f.ReadAt(b, int64(r.Start/page)*8); err != nil {
			return 0, fmt.Errorf("memory: /proc/self/pagemap at %#x: %w", r.Start, err)
		}
		for i := 0; i < len(b); i += 8 {
			if binary.NativeEndian.Uint64(b[i:])&(1<<63) != 0 {
				n += int64(page)
			}
		}
	}
	return n, nil
}

// programTextMeter returns a [ProgramTextResident] that reads the program's
// mappings once, for [pressure.HeadroomConfig.SelfLocked] (0 when a read fails;
// nil when the mappings cannot be read).
func programTextMeter() func() int64 {
	ranges, err := programMappings()
	if err != nil {
		return nil
	}
	return func() int64 {
		n, err := mappedBytes(ranges)
		if err != nil {
			return 0
		}
		return n
	}
}
