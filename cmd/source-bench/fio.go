//go:build linux

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

type fioEngine struct {
	label, engine string
	depth         int
	extra         string
}

type fioCase struct {
	jobs       int
	bs         string
	loops      int
	direct     bool
	invalidate int
}

func fioContenders(path string, size int64, c fioCase, engines []fioEngine) []contender {
	if *fioBin == "" {
		return nil
	}
	var cs []contender
	for _, e := range engines {
		share := size / int64(c.jobs)
		// 64-byte alignment fixes fio's misaligned default buffers; O_DIRECT needs page alignment.
		align := "64"
		if c.direct {
			align = "4096"
		}
		args := []string{"--name=bench", "--filename=" + path, "--rw=read", "--bs=" + c.bs, "--ioengine=" + e.engine,
			fmt.Sprintf("--iodepth=%d", e.depth), fmt.Sprintf("--numjobs=%d", c.jobs), fmt.Sprintf("--size=%d", share),
			fmt.Sprintf("--offset_increment=%d", share), fmt.Sprintf("--loops=%d", c.loops), "--iomem_align=" + align,
			"--group_reporting", "--output-format=json", fmt.Sprintf("--invalidate=%d", c.invalidate), "--thread"}
		if c.direct {
			args = append(args, "--direct=1")
		}
		if e.extra != "" {
			args = append(args, e.extra)
		}
		cs = append(cs, contender{name: "fio " + e.label, fio: true, run: func() (int64, time.Duration, time.Duration, error) { return runFio(args) }})
	}
	return cs
}

// smallSize is the size of each small file: 112 KiB.
const smallSize = 112 << 10

func fioSmall(dir string, e fioEngine, direct bool) (int64, time.Duration, time.Duration, error) {
	subs, _ := filepath.Glob(filepath.Join(dir, "d*"))
	align := "64"
	if direct {
		align = "4096"
	}
	args := []string{"--rw=read", fmt.Sprintf("--bs=%d", smallSize), "--allow_file_create=0", "--ioengine=" + e.engine, fmt.Sprintf("--iodepth=%d", e.depth),
		"--iomem_align=" + align, "--group_reporting", "--output-format=json", "--invalidate=1", "--openfiles=16", "--file_service_type=sequential", "--thread"}
	if direct {
		args = append(args, "--direct=1")
	}
	for i, s := range subs {
		// The directory's byte count spread over its equal files reads each whole
		// (a larger --size would make fio extend the files).
		var bytes int64
		files, _ := os.ReadDir(s)
		for _, f := range files {
			if info, err := f.Info(); err == nil {
				bytes += info.Size()
			}
		}
		args = append(args, fmt.Sprintf("--name=j%d", i), "--opendir="+s, fmt.Sprintf("--size=%d", bytes))
	}
	return runFio(args)
}

// runFio runs fio and returns bytes read, fio's own runtime and the CPU time
// of the fio process. Jobs run as threads (--thread): fio's job processes call
// setsid, and with autogroup scheduling (kernel.sched_autogroup_enabled=1)
// each would get its own share of a busy machine, more than psiflow's one
// process gets.
func runFio(args []string) (int64, time.Duration, time.Duration, error) {
	cpu0 := cpuNow(unix.RUSAGE_CHILDREN)
	out, err := exec.Command(*fioBin, args...).Output()
	cpu := cpuNow(unix.RUSAGE_CHILDREN) - cpu0
	if err != nil {
		return 0, 0, 0, fmt.Errorf("fio %s: %w", strings.Join(args, " "), err)
	}
	var rep struct {
		Jobs []struct {
			Read struct {
				IOBytes int64 `json:"io_bytes"`
				Runtime int64 `json:"runtime"` // ms
			} `json:"read"`
		} `json:"jobs"`
	}
	if i := strings.IndexByte(string(out), '{'); i > 0 {
		out = out[i:] // fio may print notes before the JSON
	}
	if err := json.Unmarshal(out, &rep); err != nil || len(rep.Jobs) == 0 {
		return 0, 0, 0, fmt.Errorf("fio output: %v", err)
	}
	j := rep.Jobs[0].Read
	return j.IOBytes, time.Duration(j.Runtime) * time.Millisecond, cpu, nil
}
