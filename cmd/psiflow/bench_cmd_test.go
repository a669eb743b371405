package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/psiflow/psiflow/internal/harness"
	"github.com/psiflow/psiflow/internal/kerneltest"
)

func TestBenchLoaders(t *testing.T) {
	dir := t.TempDir()
	spec := filepath.Join(dir, "spec.json")
	if err := os.WriteFile(spec, []byte(`{"loaders":[{"name":"dl","argv":["python3","dl.py","--data","{data}"],"env":["A=1"]}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"loaders":[{"name":"x"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		args    []string
		spec    string
		data    string
		want    []harness.Loader
		wantErr string
	}{
		{name: "two loaders", args: []string{"A=/bin/a", "-x", "{data}/train", "--", "B=b"}, data: "/d",
			want: []harness.Loader{{Name: "A", Argv: []string{"/bin/a", "-x", "/d/train"}}, {Name: "B", Argv: []string{"b"}}}},
		{name: "leading separator", args: []string{"--", "A=a"}, want: []harness.Loader{{Name: "A", Argv: []string{"a"}}}},
		{name: "spec", spec: spec, data: "/d",
			want: []harness.Loader{{Name: "dl", Argv: []string{"python3", "dl.py", "--data", "/d"}, Env: []string{"A=1"}}}},
		{name: "no name", args: []string{"/bin/a"}, wantErr: "NAME=PROGRAM"},
		{name: "none", wantErr: "no loaders"},
		{name: "data unset", args: []string{"A=a", "{data}"}, wantErr: "-data is not set"},
		{name: "both", args: []string{"A=a"}, spec: spec, wantErr: "not both"},
		{name: "spec without argv", spec: bad, wantErr: "needs a name and an argv"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := benchLoaders(tt.args, tt.spec, tt.data)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, errUsage) {
					t.Fatalf("error %v, want a usage error with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("loaders %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestParseLimits(t *testing.T) {
	tests := []struct {
		in      string
		want    []int64
		wantErr bool
	}{
		{"none", []int64{0}, false},
		{"none,256M,1G", []int64{0, 256 << 20, 1 << 30}, false},
		{"128MiB, max", []int64{128 << 20, 0}, false},
		{"256M,", nil, true},
		{"lots", nil, true},
		{"-5M", nil, true},
	}
	for _, tt := range tests {
		got, err := parseLimits(tt.in)
		if (err != nil) != tt.wantErr || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("parseLimits(%q) = %v, %v; want %v, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestBenchEndToEnd(t *testing.T) {
	if os.Geteuid() != 0 {
		kerneltest.Skip(t, kerneltest.Cgroups, "creating cgroups needs root")
	}
	dir := t.TempDir()
	script := filepath.Join(dir, "loader.sh")
	// Five batches of 10 at t = 1..5 s (synthetic times), then done: 10 samples/s after
	// a warm-up of one batch.
	if err := os.WriteFile(script, []byte(`#!/bin/sh
echo "loader for $1"
for i in 1 2 3 4 5; do echo "{\"event\":\"batch\",\"n\":10,\"t\":$i}"; done
echo '{"event":"done","samples":50,"t":6}'
`), 0o755); err != nil {
		t.Fatal(err)
	}
	jsonPath := filepath.Join(dir, "report.json")
	svgPath := filepath.Join(dir, "memory.svg")
	var out bytes.Buffer
	code := dispatch(context.Background(), &out, &out, []string{"bench", "-data", dir, "-rounds", "2", "-warmup", "1", "-limit", "none,64M",
		"-cold", "-timeout", "30s", "-json", jsonPath, "-svg", svgPath, "--", "one=" + script, "{data}", "--", "two=/bin/sh", script})
	if code != 0 {
		t.Fatalf("exit %d: %s", code, out.String())
	}
	for _, want := range []string{"| none | one | 2/2 | 10 (10–10) | 1.00 |", "| 64 MiB | two | 2/2 | 10 (10–10) | 1.00 (1.00–1.00) |", "cold (page cache"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	if svg, err := os.ReadFile(svgPath); err != nil || !strings.Contains(string(svg), "limit 64 MiB") {
		t.Errorf("SVG plot missing or without the 64 MiB chart (%v)", err)
	}
	var rep harness.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Runs) != 8 || rep.Runs[0].Ignored != 1 {
		t.Errorf("JSON report has %d runs (want 8), first ignored %d lines (want 1)", len(rep.Runs), rep.Runs[0].Ignored)
	}
	// The saved report prints the same table again.
	var again bytes.Buffer
	if code := dispatch(context.Background(), &again, &again, []string{"bench", "-report", jsonPath}); code != 0 {
		t.Fatalf("bench -report: exit %d: %s", code, again.String())
	}
	if i := strings.Index(out.String(), "| limit |"); i < 0 || !strings.Contains(again.String(), out.String()[i:]) {
		t.Errorf("bench -report printed\n%s\nwant the table of\n%s", again.String(), out.String())
	}
}

func TestParseShares(t *testing.T) {
	got, err := parseShares("0, 0.5,0.7,0.85")
	if err != nil || len(got) != 4 || got[0] != 0 || got[3] != 0.85 {
		t.Fatalf("parseShares = %v, %v", got, err)
	}
	if got, err := parseShares(""); err != nil || got != nil {
		t.Errorf("empty: %v, %v; want none", got, err)
	}
	for _, bad := range []string{"1", "-0.1", "0.5,0.5", "half", "0,,0.5"} {
		if _, err := parseShares(bad); err == nil || !errors.Is(err, errUsage) {
			t.Errorf("parseShares(%q) error %v, want a usage error", bad, err)
		}
	}
}

func TestBenchCoTenantNeedsLimit(t *testing.T) {
	err := runBench(context.Background(), io.Discard, []string{"-cotenant", "0,0.5", "-limit", "none,256M", "--", "a=/bin/true"})
	if err == nil || !errors.Is(err, errUsage) || !strings.Contains(err.Error(), "memory limit") {
		t.Errorf("error %v, want a usage error about the memory limit", err)
	}
}

// envRunMain makes the test binary run the launcher itself (the co-tenant of
// TestBenchCoTenantEndToEnd is "<this binary> cotenant ...").
const envRunMain = "PSIFLOW_CMD_TEST_RUN_MAIN"

func TestBenchCoTenantEndToEnd(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("creating cgroups needs root")
	}
	t.Setenv(envRunMain, "1")
	dir := t.TempDir()
	script := filepath.Join(dir, "loader.sh")
	// Batches for about 1.5 s of real time, so that the co-tenant's 200 ms ramp ends
	// while the loader runs.
	if err := os.WriteFile(script, []byte(`#!/bin/sh
for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15; do sleep 0.1; echo "{\"event\":\"batch\",\"n\":10,\"t\":$i}"; done
echo '{"event":"done","samples":150,"t":16}'
`), 0o755); err != nil {
		t.Fatal(err)
	}
	jsonPath := filepath.Join(dir, "report.json")
	var out bytes.Buffer
	code := dispatch(context.Background(), &out, &out, []string{"bench", "-rounds", "1", "-warmup", "1", "-limit", "128M",
		"-cotenant", "0,0.3", "-cotenant-ramp", "200ms", "-timeout", "30s", "-json", jsonPath, "--", "one=" + script})
	if code != 0 && strings.Contains(out.String(), "no memory controller") {
		t.Skipf("no memory controller: %s", out.String())
	}
	if code != 0 {
		t.Fatalf("exit %d: %s", code, out.String())
	}
	for _, want := range []string{"| 128 MiB | 30% | one | 1/1 | 0/1 | 0 |", "| 128 MiB | alone | one | 1/1 | – | 0 | 1.00 |", " cotenant -bytes SHARE×LIMIT -ramp 200ms`"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var rep harness.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Runs) != 2 || rep.Runs[1].CoTenant == nil {
		t.Fatalf("runs %+v, want an alone run and one with a co-tenant", rep.Runs)
	}
	c := rep.Runs[1].CoTenant
	if want := int64(rep.Runs[1].Share * float64(128<<20)); c.Fate != harness.CoSurvived || c.Bytes != want || c.Touched < want || c.Held == 0 {
		t.Errorf("co-tenant %+v, want it to survive holding %d bytes", c, want)
	}

	// A spike: the co-tenant rises, holds 300 ms, falls, and the run says so.
	out.Reset()
	code = dispatch(context.Background(), &out, &out, []string{"bench", "-rounds", "1", "-warmup", "1", "-limit", "128M",
		"-cotenant-shape", "alone,spike:0.3/300ms/0.1", "-cotenant-ramp", "200ms", "-timeout", "30s", "-json", jsonPath, "--", "one=" + script})
	if code != 0 {
		t.Fatalf("spike: exit %d: %s", code, out.String())
	}
	if want := "| 128 MiB | spike 30% 300ms → 10% | one | 1/1 | 0/1 | 0 |"; !strings.Contains(out.String(), want) {
		t.Errorf("output lacks %q:\n%s", want, out.String())
	}
	if b, err = os.ReadFile(jsonPath); err != nil {
		t.Fatal(err)
	}
	rep = harness.Report{}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Runs) != 2 || rep.Runs[1].CoTenant == nil || rep.Runs[1].Shape != "spike:0.3/300ms/0.1" {
		t.Fatalf("spike runs %+v, want an alone run and a spike", rep.Runs)
	}
	if c := rep.Runs[1].CoTenant; c.Fate != harness.CoSurvived || c.Held == 0 || c.Fell < c.Held+300*time.Millisecond || (c.After>>20) != 12 /* 10% of 128 MiB */ {
		t.Errorf("spike co-tenant %+v, want it to survive, hold, then fall to 10%%", c)
	}
}

func TestBenchBadShape(t *testing.T) {
	for _, shape := range []string{"spike:0.9/5s", "wave:0.5", "spike:0.9/5s/0.95", "0.5,ramp:0.5"} {
		err := runBench(context.Background(), io.Discard, []string{"-cotenant-shape", shape, "-limit", "256M", "--", "a=/bin/true"})
		if err == nil || !errors.Is(err, errUsage) || !strings.Contains(err.Error(), "-cotenant-shape") {
			t.Errorf("-cotenant-shape %s: error %v, want a usage error naming the flag", shape, err)
		}
	}
}

// TestBenchRefusesUnwritableOutputFirst: an output file in a missing folder is a
// usage error before any run, not a failure after all of them.
func TestBenchRefusesUnwritableOutputFirst(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	for _, flagName := range []string{"-json", "-md", "-svg"} {
		var out bytes.Buffer
		missing := filepath.Join(dir, "missing", "report")
		code := dispatch(context.Background(), &out, &out, []string{"bench", "-rounds", "1", flagName, missing, "--", "one=/bin/sh -c 'touch " + marker + "'"})
		if code != 2 || !strings.Contains(out.String(), "folder "+filepath.Dir(missing)+" does not exist") {
			t.Errorf("%s in a missing folder: exit %d, output %q; want usage error naming the folder", flagName, code, out.String())
		}
		if _, err := os.Stat(marker); err == nil {
			t.Fatalf("%s: the loader ran before the output was checked", flagName)
		}
	}
}

// TestBenchSaysWhyALoaderStopped: a loader that exits with status 3 (stopped
// below its floor, or a pause that timed out) or fails is reported with what
// it said, in the progress line and in bench's error, not as a bare
// "stopped".
func TestBenchSaysWhyALoaderStopped(t *testing.T) {
	if os.Geteuid() != 0 {
		kerneltest.Skip(t, kerneltest.Cgroups, "creating cgroups needs root")
	}
	const floorMsg = "psiflow run: the memory limit of 24 MiB is too small for this loader: less the reserve of 8 MiB it leaves 16 MiB, less than the floor of 32.4 MiB of the loader; raise the limit to at least 44.6 MiB"
	const pauseMsg = "stopped: paused below the floor for 10m0s (pause timeout): the cgroup left the loader 12 MiB"
	tests := []struct {
		name, script, want string
	}{
		{"below its floor, on stderr", "echo 'budget: 4 MiB' >&2\necho '" + floorMsg + "' >&2\nexit 3\n",
			"stopped (exit status 3): " + floorMsg},
		{"pause timeout, in the done event", "echo '{\"event\":\"batch\",\"n\":10,\"t\":1}'\necho '{\"event\":\"done\",\"samples\":10,\"t\":2,\"error\":\"" + pauseMsg + "\"}'\necho 'psiflow-imagefolder: something else' >&2\nexit 3\n",
			"stopped (exit status 3): " + pauseMsg},
		{"another failure", "echo 'psiflow run: source: empty dataset' >&2\nexit 1\n",
			"failed (exit status 1): psiflow run: source: empty dataset"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			script := filepath.Join(t.TempDir(), "loader.sh")
			if err := os.WriteFile(script, []byte("#!/bin/sh\n"+tt.script), 0o755); err != nil {
				t.Fatal(err)
			}
			var stdout, stderr bytes.Buffer
			code := dispatch(context.Background(), &stdout, &stderr, []string{"bench", "-rounds", "1", "-warmup", "0", "-timeout", "30s", "--", "bad=" + script})
			if code == 0 {
				t.Fatalf("exit 0, want non-zero:\n%s%s", stdout.String(), stderr.String())
			}
			if want := "bad at none round 0: " + tt.want; !strings.Contains(stderr.String(), want) {
				t.Errorf("bench's error lacks %q:\n%s", want, stderr.String())
			}
		})
	}
	// The progress line (on os.Stderr) carries the message whole, not cut at 200
	// bytes as the detail is.
	long := harness.Result{Outcome: harness.Stopped, ExitCode: 3, Said: floorMsg + strings.Repeat(" and more", 30),
		Detail: "exit status 3; stderr: " + floorMsg + strings.Repeat(" and more", 30)}
	if got, want := detailSuffix(long), "  (exit status 3: "+long.Said+")"; got != want {
		t.Errorf("detailSuffix = %q, want %q", got, want)
	}
	if got := detailSuffix(harness.Result{Outcome: harness.TimedOut, ExitCode: -1, Detail: "did not finish within 30s"}); got != "  (did not finish within 30s)" {
		t.Errorf("detailSuffix of a timeout = %q", got)
	}
	if got := detailSuffix(harness.Result{Outcome: harness.Finished}); got != "" {
		t.Errorf("detailSuffix of a finished run = %q, want none", got)
	}
}
