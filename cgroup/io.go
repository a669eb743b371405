package cgroup

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
)

// IO weight range on the cgroup2 scale (io.weight; default 100).
const (
	MinIOWeight     = 1
	MaxIOWeight     = 10000
	DefaultIOWeight = 100
)

// SetIOWeight sets the group's proportional IO weight on the cgroup2 scale (1–10000,
// default 100). It writes the first file present: io.weight ("default N", needs the io
// controller and a cost model), io.bfq.weight (BFQ scheduler, 1–1000, default 100),
// v1 blkio.weight (CFQ, 10–1000, default 500: the weight is scaled ×5) or v1
// blkio.bfq.weight (1–1000). A weight only acts on devices whose scheduler honours it
// (mq-deadline and none ignore it); throttling ([Group.SetIOLimit]) works everywhere.
func (g *Group) SetIOWeight(weight uint64) error {
	if weight < MinIOWeight || weight > MaxIOWeight {
		return fmt.Errorf("cgroup %s: io weight %d outside [%d, %d]", g.name, weight, MinIOWeight, MaxIOWeight)
	}
	type choice struct {
		v2         bool
		file, text string
	}
	choices := []choice{
		{true, "io.weight", "default " + strconv.FormatUint(weight, 10)},
		{true, "io.bfq.weight", "default " + strconv.FormatUint(clamp(weight, 1, 1000), 10)},
		{false, "blkio.weight", strconv.FormatUint(clamp(weight*5, 10, 1000), 10)},
		{false, "blkio.bfq.weight", strconv.FormatUint(clamp(weight, 1, 1000), 10)},
	}
	var errs []error
	for _, c := range choices {
		var p string
		var err error
		if c.v2 {
			p, _, err = g.file(c.file, "", "")
		} else {
			p, _, err = g.file("", "blkio", c.file)
		}
		if err != nil {
			continue
		}
		if err := writeFile(p, c.text); err != nil {
			// blkio.bfq.weight takes a bare number on older kernels and "default N" on newer
			// ones; any failure here is reported together with the next choice's.
			errs = append(errs, err)
			continue
		}
		return nil
	}
	if len(errs) > 0 {
		return fmt.Errorf("cgroup %s: set io weight: %w", g.name, errors.Join(errs...))
	}
	return fmt.Errorf("cgroup %s: no io.weight, io.bfq.weight, blkio.weight or blkio.bfq.weight on this %s host: %w", g.name, g.tree.layout, ErrNoController)
}

// IOWeight returns the group's IO weight as [Group.SetIOWeight] wrote it (converted back
// to the cgroup2 scale for blkio.weight).
func (g *Group) IOWeight() (uint64, error) {
	for _, c := range []struct {
		v2   bool
		file string
		div  uint64
	}{{true, "io.weight", 1}, {true, "io.bfq.weight", 1}, {false, "blkio.weight", 5}, {false, "blkio.bfq.weight", 1}} {
		var p string
		var err error
		if c.v2 {
			p, _, err = g.file(c.file, "", "")
		} else {
			p, _, err = g.file("", "blkio", c.file)
		}
		if err != nil {
			continue
		}
		s, err := readFile(p)
		if err != nil {
			return 0, fmt.Errorf("cgroup %s: %w", g.name, err)
		}
		w, err := parseIOWeight(s)
		if err != nil {
			return 0, fmt.Errorf("cgroup %s: %s: %w", g.name, p, err)
		}
		return w / c.div, nil
	}
	return 0, fmt.Errorf("cgroup %s: no io weight file on this %s host: %w", g.name, g.tree.layout, ErrNoController)
}

// IOLimit throttles one block device. A zero rate means unlimited.
type IOLimit struct {
	// Major and Minor number the device (see [DeviceOf]).
	Major, Minor uint32
	// ReadBPS and WriteBPS are bytes per second.
	ReadBPS, WriteBPS uint64
	// ReadIOPS and WriteIOPS are operations per second.
	ReadIOPS, WriteIOPS uint64
}

// SetIOLimit throttles the group's IO on one device: io.max on v2
// ("MAJ:MIN rbps=N wbps=N riops=N wiops=N", "max" for unlimited), the four
// blkio.throttle.{read,write}_{bps,iops}_device files on v1 ("MAJ:MIN N", 0 removes).
func (g *Group) SetIOLimit(l IOLimit) error {
	dev := fmt.Sprintf("%d:%d", l.Major, l.Minor)
	p, v2, err := g.file("io.max", "blkio", "blkio.throttle.read_bps_device")
	if err != nil {
		return err
	}
	if v2 {
		rate := func(v uint64) string {
			if v == 0 {
				return "max"
			}
			return strconv.FormatUint(v, 10)
		}
		text := fmt.Sprintf("%s rbps=%s wbps=%s riops=%s wiops=%s", dev, rate(l.ReadBPS), rate(l.WriteBPS), rate(l.ReadIOPS), rate(l.WriteIOPS))
		if err := writeFile(p, text); err != nil {
			return fmt.Errorf("cgroup %s: set io limit: %w", g.name, err)
		}
		return nil
	}
	dir := filepath.Dir(p)
	for _, f := range []struct {
		file string
		v    uint64
	}{
		{"blkio.throttle.read_bps_device", l.ReadBPS},
		{"blkio.throttle.write_bps_device", l.WriteBPS},
		{"blkio.throttle.read_iops_device", l.ReadIOPS},
		{"blkio.throttle.write_iops_device", l.WriteIOPS},
	} {
		if err := writeFile(filepath.Join(dir, f.file), dev+" "+strconv.FormatUint(f.v, 10)); err != nil {
			return fmt.Errorf("cgroup %s: set io limit: %w", g.name, err)
		}
	}
	return nil
}
