package harness

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/psiflow/psiflow/internal/harness/protocol"
)

// childMain runs the test binary as a fake loader. Modes (arguments after colons):
//
//	emit:K:N:DT   K batches of N samples at the synthetic times 1+i·DT s, a log line, done
//	alloc:MIB     touch MIB MiB, report one batch and done
//	hang          report one batch, then sleep for an hour
//	fail          report one batch, write "boom" on stderr, exit with status 3
//	doneerr       report a done event with an error, exit 0
//	orphan        start a child that sleeps holding stdout, then report done and exit
//	run:S:MIB     touch MIB MiB, then report a batch of 8 every 50 ms for S seconds, done
//	cotenant      the co-tenant (CoTenantMain) with the arguments after -test.run
//
// With envOOMAdj set, the child first writes it to /proc/self/oom_score_adj (1000: the
// OOM killer's first choice).
func childMain(mode string) int {
	if adj := os.Getenv(envOOMAdj); adj != "" {
		if err := os.WriteFile("/proc/self/oom_score_adj", []byte(adj), 0); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	f := strings.Split(mode, ":")
	arg := func(i int) float64 {
		v, _ := strconv.ParseFloat(f[i], 64)
		return v
	}
	switch f[0] {
	case "emit":
		k, n, dt := int(arg(1)), int(arg(2)), arg(3)
		fmt.Println("fake loader starting")
		for i := range k {
			fmt.Printf(`{"event":"batch","n":%d,"t":%g}`+"\n", n, 1+float64(i)*dt)
		}
		fmt.Printf(`{"event":"done","samples":%d,"t":%g}`+"\n", k*n, 1+float64(k)*dt)
		return 0
	case "alloc":
		buf := make([]byte, int(arg(1))<<20)
		for i := 0; i < len(buf); i += 4096 {
			buf[i] = 1
		}
		fmt.Println(`{"event":"batch","n":1,"t":0.5}`)
		fmt.Println(`{"event":"done","samples":1,"t":0.6}`)
		runtime.KeepAlive(buf)
		return 0
	case "run":
		start := time.Now()
		buf := make([]byte, int(arg(2))<<20)
		for i := 0; i < len(buf); i += 4096 {
			buf[i] = 1
		}
		n := 0
		for time.Since(start) < time.Duration(arg(1)*float64(time.Second)) {
			time.Sleep(50 * time.Millisecond)
			fmt.Printf(`{"event":"batch","n":8,"t":%g}`+"\n", time.Since(start).Seconds())
			n += 8
		}
		fmt.Printf(`{"event":"done","samples":%d,"t":%g}`+"\n", n, time.Since(start).Seconds())
		runtime.KeepAlive(buf)
		return 0
	case "cotenant":
		if err := CoTenantMain(context.Background(), os.Args[2:], os.Stdin, os.Stdout, os.Stderr); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return 0
	case "hang":
		fmt.Println(`{"event":"batch","n":1,"t":0.5}`)
		time.Sleep(time.Hour)
		return 0
	case "fail":
		fmt.Println(`{"event":"batch","n":1,"t":0.5}`)
		fmt.Fprintln(os.Stderr, "loading\nboom")
		return 4
	case "belowfloor":
		fmt.Println(`{"event":"batch","n":1,"t":0.5}`)
		fmt.Println(`{"event":"done","error":"stopped: the cgroup leaves the loader 20.0 MiB","t":0.6}`)
		return protocol.ExitBelowFloor
	case "doneerr":
		fmt.Println(`{"event":"done","error":"no such dataset","t":0.1}`)
		return 0
	case "orphan":
		c := exec.Command(os.Args[0], "-test.run=^$")
		c.Env = append(os.Environ(), envChild+"=hang")
		c.Stdout = os.Stdout
		if err := c.Start(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Println(`{"event":"done","samples":0,"t":0.1}`)
		return 0
	}
	fmt.Fprintln(os.Stderr, "unknown child mode", mode)
	return 2
}

// fake returns a loader running the test binary in mode.
func fake(name, mode string) Loader {
	return Loader{
		Name: name,
		Argv: []string{os.Args[0], "-test.run=^$"},
		// GORACE: the race runtime otherwise sleeps 1 s at exit in every child.
		Env: []string{envChild + "=" + mode, "GORACE=atexit_sleep_ms=0"},
	}
}

// envOOMAdj is the oom_score_adj a fake loader sets for itself.
const envOOMAdj = "PSIFLOW_HARNESS_TEST_OOM_ADJ"

// fakeCoTenant returns a co-tenant running the test binary's cotenant mode.
func fakeCoTenant(bytes int64, ramp time.Duration) *CoTenant {
	return &CoTenant{
		Argv:  []string{os.Args[0], "-test.run=^$"},
		Env:   []string{envChild + "=cotenant", "GORACE=atexit_sleep_ms=0"},
		Bytes: bytes,
		Ramp:  ramp,
	}
}
