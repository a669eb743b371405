package frontend

import (
	"flag"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/psiflow/psiflow/memory"
	"github.com/psiflow/psiflow/memory/pause"
	"github.com/psiflow/psiflow/pipelines"
)

func parse(t *testing.T, args ...string) *Flags {
	t.Helper()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f := Register(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestDefaultsAreTheSpecs: with no flag given, the pipeline is the shipped file
// as it is, and every flag shows that file's value as its default.
func TestDefaultsAreTheSpecs(t *testing.T) {
	base, err := Spec(nil)
	if err != nil {
		t.Fatal(err)
	}
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	f := Register(fs)
	if got := f.Overrides(); len(got) != 0 {
		t.Errorf("no flags given: overrides %q, want none", got)
	}
	for _, b := range bindings {
		p, v, err := base.Lookup(b.keys[0])
		if err != nil {
			t.Fatalf("-%s: %v", b.flag, err)
		}
		want := formatValue(p, v)
		if b.yes != "" {
			want = map[string]string{b.yes: "true", b.no: "false"}[want]
		}
		if b.noDefault {
			want = ""
		}
		if got := fs.Lookup(b.flag).DefValue; got != want {
			t.Errorf("-%s: default %q, want %q (%s in %s)", b.flag, got, want, b.keys[0], SpecFile)
		}
	}
}

// TestFlagsLandOnTheirKeys: every flag given lands on its key of the pipeline.
func TestFlagsLandOnTheirKeys(t *testing.T) {
	f := parse(t, "-data", "/d", "-workers", "3", "-batch", "7", "-budget", "96M", "-memory", "fixed", "-pressure=false",
		"-shuffle", "-seed", "9", "-max-pixels", "-1", "-on-error", "skip", "-max-skips", "2", "-cache", "encoded", "-epochs", "3",
		"-below-floor", "stop", "-direct=false", "-rank", "1", "-world-size", "2", "-set", "decode.exact=true")
	p, err := f.Pipeline()
	if err != nil {
		t.Fatal(err)
	}
	src, dec := p.Source.Config, p.Stages[0].Config
	r := p.Resource
	for _, c := range []struct {
		what      string
		got, want any
	}{
		{"read.dir", src.String("dir"), "/d"},
		{"decode.workers", dec.Int("workers"), int64(3)},
		{"batch.size", p.Stages[1].Config.Int("size"), int64(7)},
		{"resources.budget", r.Budget, int64(96 << 20)},
		{"resources.memory_mode", string(r.MemoryMode), "fixed"},
		{"resources.pressure", r.Pressure, false},
		{"read.shuffle", src.Bool("shuffle"), true},
		{"read.seed", src.Int("seed"), int64(9)},
		{"decode.seed", dec.Int("seed"), int64(9)},
		{"decode.max_pixels", dec.Int("max_pixels"), int64(-1)},
		{"decode.on_error", dec.String("on_error"), "skip"},
		{"decode.max_skips", dec.Int("max_skips"), int64(2)},
		{"resources.cache", r.Cache, "encoded"},
		{"epochs", p.Epochs, 3},
		{"resources.below_floor", string(r.BelowFloor), "stop"},
		{"read.direct", src.Bool("direct"), false},
		{"read.rank", src.Int("rank"), int64(1)},
		{"read.world_size", src.Int("world_size"), int64(2)},
		{"decode.exact (-set)", dec.Bool("exact"), true},
	} {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.what, c.got, c.want)
		}
	}
	if got := f.SetFlags(); !slices.Contains(got, "data") || slices.Contains(got, "resize") {
		t.Errorf("SetFlags %q: want the given ones only", got)
	}
	if f.Option("decode", "max_pixels") != "-max-pixels" || f.Option("decode", "layout") != "" {
		t.Errorf("Option: %q, %q; want -max-pixels and none", f.Option("decode", "max_pixels"), f.Option("decode", "layout"))
	}
}

// TestRandomResizedCropReplacesTheValidationTransform: -random-resized-crop alone
// turns Resize and CenterCrop off; given with -crop, the two are refused together.
func TestRandomResizedCropReplacesTheValidationTransform(t *testing.T) {
	p, err := parse(t, "-random-resized-crop", "64").Pipeline()
	if err != nil {
		t.Fatal(err)
	}
	if dec := p.Stages[0].Config; dec.Int("resize") != 0 || dec.Int("center_crop") != 0 || dec.Int("random_resized_crop") != 64 {
		t.Errorf("resize %d, center_crop %d, random_resized_crop %d; want 0, 0, 64", dec.Int("resize"), dec.Int("center_crop"), dec.Int("random_resized_crop"))
	}
	if _, err := parse(t, "-random-resized-crop", "64", "-crop", "32").Pipeline(); err == nil || !strings.Contains(err.Error(), "random resized crop") {
		t.Errorf("with -crop: %v, want the conflict named", err)
	}
}

// TestBadValuesNameTheFlag: a value out of the file's range is refused by the
// flag, with the parameter's own message.
func TestBadValuesNameTheFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-batch", "0"}, "size: 0 is out of range"},
		{[]string{"-budget", "lots"}, `budget: "lots" is not a size`},
		{[]string{"-memory", "big"}, `"big" is not one of "elastic", "fixed"`},
		{[]string{"-pressure=maybe"}, "-pressure"},
		{[]string{"-set", "novalue"}, "want key=value"},
	} {
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		Register(fs)
		if err := fs.Parse(tc.args); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want an error with %q", tc.args, err, tc.want)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-rank", "2", "-world-size", "2"}, "rank 2 of world size 2 is out of range"},
		{[]string{"-set", "decode.colour=1"}, "colour"},
	} {
		if _, err := parse(t, tc.args...).Pipeline(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want an error with %q", tc.args, err, tc.want)
		}
	}
}

// TestSpecIsShipped: the file the flags override is the one psiflow run ships.
func TestSpecIsShipped(t *testing.T) {
	p, err := Spec(nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.Name != "imagefolder" || p.Source.Kind.Name != "files" || p.Sink.Kind != mustKind(t, "discard") {
		t.Errorf("spec %s: source %s, sink %s", p.Name, p.Source.Kind.Name, p.Sink.Kind.Name)
	}
}

func mustKind(t *testing.T, name string) *pipelines.Kind {
	k, ok := pipelines.Default().Kind(name)
	if !ok {
		t.Fatalf("no kind %s", name)
	}
	return k
}

// TestBelowFloorFlags: the image front-ends (demo -data, serve, which the
// Python loader starts, and psiflow-imagefolder share these flags) pause below
// the floor by default, for at most 10 minutes; -pause-timeout 0 waits without
// end; -pause-timeout with another policy, an unknown policy and a negative
// timeout are refused, naming the flag.
func TestBelowFloorFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		policy  memory.FloorPolicy
		timeout time.Duration
		err     string // from the flag itself
		pipeErr string // from Pipeline
	}{
		{name: "default", policy: memory.PauseBelowFloor, timeout: pause.DefaultTimeout},
		{name: "timeout", args: []string{"-pause-timeout", "90s"}, policy: memory.PauseBelowFloor, timeout: 90 * time.Second},
		{name: "forever", args: []string{"-pause-timeout", "0"}, policy: memory.PauseBelowFloor, timeout: pause.Forever},
		{name: "stop", args: []string{"-below-floor", "stop"}, policy: memory.StopBelowFloor, timeout: pause.DefaultTimeout},
		{name: "run", args: []string{"-below-floor", "run"}, policy: memory.RunAtFloor, timeout: pause.DefaultTimeout},
		{name: "timeout with run", args: []string{"-below-floor", "run", "-pause-timeout", "1m"}, pipeErr: "-pause-timeout needs -below-floor pause, not run"},
		{name: "timeout with stop", args: []string{"-below-floor", "stop", "-pause-timeout", "1m"}, pipeErr: "-pause-timeout needs -below-floor pause, not stop"},
		{name: "unknown", args: []string{"-below-floor", "sleep"}, err: `invalid value "sleep" for flag -below-floor`},
		{name: "negative", args: []string{"-pause-timeout", "-1s"}, err: "flag -pause-timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			f := Register(fs)
			err := fs.Parse(append([]string{"-data", "d"}, tt.args...))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("parse: %v; want an error containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			p, err := f.Pipeline()
			if tt.pipeErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.pipeErr) {
					t.Fatalf("Pipeline: %v; want an error containing %q", err, tt.pipeErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if r := p.Resource; r.BelowFloor != tt.policy || r.PauseTimeout != tt.timeout {
				t.Fatalf("policy %q timeout %v; want %q, %v", r.BelowFloor, r.PauseTimeout, tt.policy, tt.timeout)
			}
		})
	}
}
