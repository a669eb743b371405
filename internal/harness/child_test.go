package harness

import (
	"context"
	"fmt"
	"io"
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
//	trainer:MIB   a trainer: touch the ballast given as the first argument after
//	              -test.run (bytes), report keyed batches of one epoch of 16 files;
//	              with MIB > 0 first start a "loader" child (oom_score_adj 1000) that
//	              touches MIB MiB, and fail when it dies
//	keys:SPEC     batches of keys from SPEC ("a,b|c" is two batches), then done
//	pause:S       a batch, a pause event, S seconds later a resume, a batch, done
//	read          read the file named by the first argument after -test.run, a batch, done
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
	case "trainer":
		ballast, _ := strconv.ParseInt(os.Args[2], 10, 64)
		buf := make([]byte, ballast)
		for i := 0; i < len(buf); i += 4096 {
			buf[i] = 1
		}
		if mib := int(arg(1)); mib > 0 {
			c := exec.Command(os.Args[0], "-test.run=^$")
			c.Env = append(os.Environ(), envChild+"=alloc:"+strconv.Itoa(mib), envOOMAdj+"=1000")
			if err := c.Run(); err != nil {
				fmt.Printf(`{"event":"done","error":"loader: %v","t":1}`+"\n", err)
				return 1
			}
		}
		fmt.Println(`{"event":"start","files":16,"epochs":1,"t":0.1}`)
		for b := range 4 {
			keys := make([]string, 4)
			for i := range keys {
				keys[i] = fmt.Sprintf("%q", fmt.Sprintf("c/%02d.jpg", b*4+i))
			}
			fmt.Printf(`{"event":"batch","n":4,"keys":[%s],"t":%g}`+"\n", strings.Join(keys, ","), 0.2+float64(b)*0.1)
		}
		fmt.Println(`{"event":"done","samples":16,"t":1}`)
		runtime.KeepAlive(buf)
		return 0
	case "keys":
		n := 0
		for i, b := range strings.Split(f[1], "|") {
			keys := strings.Split(b, ",")
			for j := range keys {
				keys[j] = strconv.Quote(keys[j])
			}
			n += len(keys)
			fmt.Printf(`{"event":"batch","n":%d,"keys":[%s],"t":%d}`+"\n", len(keys), strings.Join(keys, ","), i+1)
		}
		fmt.Printf(`{"event":"done","samples":%d,"t":99}`+"\n", n)
		return 0
	case "pause":
		fmt.Println(`{"event":"batch","n":1,"t":0.5}`)
		fmt.Println(`{"event":"pause","t":1}`)
		fmt.Printf(`{"event":"resume","t":%g}`+"\n", 1+arg(1))
		fmt.Printf(`{"event":"batch","n":1,"t":%g}`+"\n", 1.5+arg(1))
		fmt.Printf(`{"event":"done","samples":2,"t":%g}`+"\n", 2+arg(1))
		return 0
	case "read":
		f, err := os.Open(os.Args[2])
		if err == nil {
			_, err = io.Copy(io.Discard, f) // through a small buffer: only the file's pages are charged
			f.Close()
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Println(`{"event":"batch","n":1,"t":0.5}`)
		fmt.Println(`{"event":"done","samples":1,"t":0.6}`)
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

// fakeTrainer returns a trainer running the test binary in mode trainer:MIB.
func fakeTrainer(name string, loaderMiB int) Loader {
	l := fake(name, "trainer:"+strconv.Itoa(loaderMiB))
	l.Argv = append(l.Argv, BallastArg)
	return l
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
