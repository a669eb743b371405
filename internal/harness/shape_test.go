package harness

import (
	"strings"
	"testing"
	"time"
)

func TestParseShape(t *testing.T) {
	tests := []struct {
		in      string
		want    Shape
		str     string
		label   string
		wantErr string
	}{
		{in: "alone", want: Shape{Kind: Alone}, str: "alone", label: "alone"},
		{in: "0", want: Shape{Kind: Alone}, str: "alone", label: "alone"},
		{in: "0.7", want: Shape{Kind: Ramp, Share: 0.7}, str: "ramp:0.7", label: "70%"},
		{in: " ramp:0.85 ", want: Shape{Kind: Ramp, Share: 0.85}, str: "ramp:0.85", label: "85%"},
		{in: "spike:0.9/5s/0.4", want: Shape{Kind: Spike, Share: 0.9, Hold: 5 * time.Second, After: 0.4}, str: "spike:0.9/5s/0.4", label: "spike 90% 5s → 40%"},
		{in: "spike:0.95/500ms/0", want: Shape{Kind: Spike, Share: 0.95, Hold: 500 * time.Millisecond}, str: "spike:0.95/500ms/0", label: "spike 95% 500ms → 0%"},
		{in: "trainer:0.5", want: Shape{Kind: Trainer, Share: 0.5}, str: "trainer:0.5", label: "ballast 50%"},
		{in: "1", wantErr: "(0, 1)"},
		{in: "-0.2", wantErr: "(0, 1)"},
		{in: "ramp:0", wantErr: "(0, 1)"},
		{in: "trainer:1.5", wantErr: "(0, 1)"},
		{in: "spike:0.9/5s", wantErr: "PEAK/HOLD/AFTER"},
		{in: "spike:0.9/5/0.4", wantErr: "hold"},
		{in: "spike:0.9/-1s/0.4", wantErr: "hold"},
		{in: "spike:0.9/5s/0.9", wantErr: "below the peak"},
		{in: "spike:1.2/5s/0.4", wantErr: "peak"},
		{in: "wave:0.5", wantErr: `unknown kind "wave"`},
		{in: "lots", wantErr: "share"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseShape(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), strings.TrimSpace(tt.in)) {
					t.Fatalf("ParseShape(%q) = %+v, %v; want an error naming it and %q", tt.in, got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ParseShape(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
			}
			if got.String() != tt.str || got.Label() != tt.label {
				t.Errorf("%q: String %q Label %q, want %q and %q", tt.in, got.String(), got.Label(), tt.str, tt.label)
			}
			if err := got.Validate(); err != nil {
				t.Errorf("%q: parsed shape does not validate: %v", tt.in, err)
			}
			// The canonical form reads back as the same shape.
			if back, err := ParseShape(got.String()); err != nil || back != got {
				t.Errorf("ParseShape(%q) = %+v, %v; want %+v", got.String(), back, err, got)
			}
		})
	}
}

func TestParseShapes(t *testing.T) {
	got, err := ParseShapes("alone, spike:0.9/5s/0.4,trainer:0.7")
	if err != nil || len(got) != 3 || got[1].Kind != Spike || got[2].Kind != Trainer {
		t.Fatalf("ParseShapes = %+v, %v", got, err)
	}
	if _, err := ParseShapes("0.7,ramp:0.7"); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Errorf("a shape given twice: %v, want an error", err)
	}
	if got, err := ParseShapes(" "); err != nil || got != nil {
		t.Errorf("ParseShapes(blank) = %v, %v; want none", got, err)
	}
}

func TestShapeValidate(t *testing.T) {
	for _, sh := range []Shape{
		{Kind: Alone, Share: 0.5},
		{Kind: Ramp},
		{Kind: Ramp, Share: 0.5, Hold: time.Second},
		{Kind: Spike, Share: 0.9, After: 0.4},
		{Kind: Spike, Share: 0.9, Hold: time.Second, After: 0.9},
		{Kind: "wave", Share: 0.5},
	} {
		if err := sh.Validate(); err == nil {
			t.Errorf("%+v validates", sh)
		}
	}
}

func TestCellOptions(t *testing.T) {
	var limit int64 = 1 << 30
	co := CoTenant{Argv: []string{"psiflow", "cotenant"}, Ramp: 2 * time.Second}
	o := cellOptions(Options{Warmup: 3}, co, limit, Shape{Kind: Spike, Share: 0.9, Hold: 5 * time.Second, After: 0.4})
	c := o.CoTenant
	if c == nil || c.Bytes != int64(0.9*float64(limit)) || c.Hold != 5*time.Second || c.After != int64(0.4*float64(limit)) || c.AfterShare != 0.4 || c.Ramp != 2*time.Second {
		t.Fatalf("spike co-tenant %+v", c)
	}
	if o.Shape != "spike:0.9/5s/0.4" || o.Ballast != 0 || o.MemoryLimit != limit || o.Warmup != 3 {
		t.Errorf("spike options %+v", o)
	}
	o = cellOptions(Options{}, co, limit, Shape{Kind: Ramp, Share: 0.7})
	if o.CoTenant == nil || o.CoTenant.Hold != 0 || o.CoTenant.After != 0 || o.CoTenant.Bytes != int64(0.7*float64(limit)) {
		t.Errorf("ramp co-tenant %+v", o.CoTenant)
	}
	o = cellOptions(Options{}, co, limit, Shape{Kind: Trainer, Share: 0.5})
	if o.CoTenant != nil || o.Ballast != limit/2 {
		t.Errorf("trainer options: co-tenant %+v, ballast %d; want none and %d", o.CoTenant, o.Ballast, limit/2)
	}
	o = cellOptions(Options{}, co, limit, Shape{Kind: Alone})
	if o.CoTenant != nil || o.Ballast != 0 || o.Shape != "alone" {
		t.Errorf("alone options %+v", o)
	}
}

func TestLoaderArgvBallast(t *testing.T) {
	l := Loader{Name: "t", Argv: []string{"python3", "trainer.py", "--ballast", BallastArg, "--x={ballast}b"}}
	got := loaderArgv(l, 123)
	if strings.Join(got, " ") != "python3 trainer.py --ballast 123 --x=123b" {
		t.Errorf("argv %q", got)
	}
	if l.Argv[3] != BallastArg {
		t.Error("loaderArgv changed the loader's own arguments")
	}
	if !hasBallastArg(l) || hasBallastArg(Loader{Argv: []string{"x"}}) {
		t.Error("hasBallastArg")
	}
}
