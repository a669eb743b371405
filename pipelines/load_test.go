package pipelines

import (
	"errors"
	"strings"
	"testing"
)

const good = `name: t
source:
  kind: generate
  config: {items: 10}
stages:
  - kind: decode
  - kind: batch
    config: {size: 4}
  - collate
sink: discard
`

func TestErrorsNameLineColumnAndLine(t *testing.T) {
	for _, tc := range []struct {
		name, file string
		pos        string // file:line:col of the first error
		msg        string // in the first error
		env        map[string]string
		sets       []string
	}{
		{"syntax", "source:\n  kind: [generate\n", "f.yaml:2:", "YAML syntax", nil, nil},
		{"unknown top key", good + "stagse: []\n", "f.yaml:11:1", `unknown key "stagse" (did you mean "stages"?)`, nil, nil},
		{"unknown kind", strings.Replace(good, "kind: decode", "kind: decod", 1), "f.yaml:6:11", `unknown kind "decod" (did you mean "decode"?)`, nil, nil},
		{"kind in the wrong place", strings.Replace(good, "kind: generate", "kind: decode", 1), "f.yaml:3:9", `"decode" is a stage kind, not a source`, nil, nil},
		{"unknown parameter", strings.Replace(good, "{size: 4}", "{sise: 4}", 1), "f.yaml:8:14", `unknown parameter "sise" (did you mean "size"?)`, nil, nil},
		{"component key", strings.Replace(good, "  config: {items: 10}", "  confg: {items: 10}", 1), "f.yaml:4:3", `unknown key "confg" (did you mean "config"?)`, nil, nil},
		{"type", strings.Replace(good, "{size: 4}", "{size: four}", 1), "f.yaml:8:20", `size: "four" is not an integer`, nil, nil},
		{"range", strings.Replace(good, "{size: 4}", "{size: 0}", 1), "f.yaml:8:20", `size: 0 is out of range (1 … 1048576)`, nil, nil},
		{"enum", strings.Replace(good, "  - kind: decode\n", "  - kind: decode\n    config: {layout: cwh}\n", 1), "f.yaml:7:22", `layout: "cwh" is not one of "chw", "hwc" (did you mean "chw"?)`, nil, nil},
		{"required", "source: files\nstages: [decode, batch, collate]\nsink: discard\n", "f.yaml:1:9", `parameter "dir" is required`, nil, nil},
		{"type mismatch", strings.Replace(good, "  - kind: batch\n    config: {size: 4}\n", "", 1), "f.yaml:7:5", `reads images elements, but "decode" (kind decode) writes image; put a batch stage between them`, nil, nil},
		{"unused output", strings.Replace(good, "  - collate\n", "  - collate\n  - {kind: collate, name: c2, input: batch}\n", 1), "f.yaml:9:5", `stage "collate": its output is read by no node`, nil, nil},
		{"unknown input", strings.Replace(good, "  - collate\n", "  - {kind: collate, input: bath}\n", 1), "f.yaml:9:28", `no node named "bath" (did you mean "batch"?)`, nil, nil},
		{"later input", strings.Replace(good, "  - kind: decode\n", "  - {kind: decode, input: collate}\n", 1), "f.yaml:6:27", `comes later in the file`, nil, nil},
		{"duplicate key", strings.Replace(good, "{items: 10}", "{items: 10, items: 11}", 1), "f.yaml:4:23", `mapping key "items" already defined`, nil, nil},
		{"unset variable", strings.Replace(good, "{items: 10}", "\n    items: ${N}", 1), "f.yaml:5:12", `environment variable N is not set`, nil, nil},
		{"alias", strings.Replace(good, "{items: 10}", "{items: &a 10}", 1), "f.yaml:4:", "anchors and aliases", nil, nil},
		{"no sink", strings.Replace(good, "sink: discard\n", "", 1), "f.yaml:1:", "no sink", nil, nil},
		{"resources", good + "resources: {budget: lots}\n", "f.yaml:11:21", `budget: "lots" is not a size in bytes (e.g. 64MiB) or "auto"`, nil, nil},
		{"device", good + "resources: {device: gpu}\n", "f.yaml:11:21", `device: "gpu" is not one of "auto", "cuda", "sim", "cpu"`, nil, nil},
		{"device without device stages", good + "resources: {device: cuda}\n", "f.yaml:11:21", `resources.device cuda: no stage copies to the device`, nil, nil},
		{"-set device without device stages", good, "-set resources.device:1:1", `resources.device sim: no stage copies to the device`, nil, []string{"resources.device=sim"}},
		{"device stage on cpu", strings.Replace(good, "  - collate\n", "  - pin\n  - h2d\n", 1) + "resources: {device: cpu}\n", "f.yaml:9:5", `stage "pin": kind pin works on a device, but resources.device is cpu`, nil, nil},
		{"bad -set value", good, "-set batch.size:1:12", `size: "x" is not an integer`, nil, []string{"batch.size=x"}},
		{"-set syntax", good, "-set batch.size:1:", `YAML syntax`, nil, []string{"batch.size=[1"}},
		{"-set no value", good, "-set batch.size:1:", `size: empty; want an integer`, nil, []string{"batch.size="}},
		{"-set unknown node", good, "-set bach.size:1:1", `no node named "bach" (did you mean "batch"?)`, nil, []string{"bach.size=3"}},
		{"-set unknown key", good, "-set batch.sice:1:1", `unknown parameter "sice" (did you mean "size"?)`, nil, []string{"batch.sice=3"}},
		{"not a mapping", "- a\n- b\n", "f.yaml:1:1", "a pipeline file must be a mapping", nil, nil},
		{"deep", strings.Repeat("[", 100) + strings.Repeat("]", 100), "f.yaml:1:", "nested more than", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("f.yaml", []byte(tc.file), Options{Env: envOf(tc.env), Set: tc.sets})
			if tc.msg == "" {
				if err == nil {
					t.Fatal("no error")
				}
				return
			}
			var list ErrorList
			if !errors.As(err, &list) || len(list) == 0 {
				t.Fatalf("error %v (%T) is not an ErrorList", err, err)
			}
			e := list[0]
			if !strings.HasPrefix(e.Pos.String(), tc.pos) || !strings.Contains(e.Msg, tc.msg) {
				t.Fatalf("first error:\n%v\nwant at %s: ...%s...\nall:\n%v", e, tc.pos, tc.msg, err)
			}
			if e.Pos.Line > 0 && !strings.Contains(e.Error(), "\n  ") {
				t.Fatalf("error does not show the offending line:\n%v", e)
			}
		})
	}
}

func TestErrorShowsCaretUnderColumn(t *testing.T) {
	_, err := Parse("f.yaml", []byte(strings.Replace(good, "{size: 4}", "{size: -3}", 1)), Options{})
	want := "f.yaml:8:20: stage 2 (batch) of kind batch: size: -3 is out of range (1 … 1048576)\n" +
		"  8 |     config: {size: -3}\n" +
		"    |                    ^"
	if err == nil || err.Error() != want {
		t.Fatalf("got\n%v\nwant\n%s", err, want)
	}
}

func TestInterpolationAndOverrides(t *testing.T) {
	file := strings.Replace(good, "{items: 10}", "\n    items: \"${N:-7}\"\n    width: ${W}\n    height: $${literal}", 1)
	// $${ is a literal ${, so height gets the text "${literal}": an error naming it.
	_, err := Parse("f.yaml", []byte(file), Options{Env: envOf(map[string]string{"W": "100"})})
	if err == nil || !strings.Contains(err.Error(), `height: "${literal}" is not an integer`) {
		t.Fatalf("literal ${: %v", err)
	}
	file = strings.Replace(good, "{items: 10}", "\n    items: \"${N:-7}\"\n    width: ${W}", 1)
	_, err = Parse("f.yaml", []byte(file), Options{Env: envOf(map[string]string{"W": "100"}),
		Set: []string{"stages.1.size=9", "resources.budget=3MiB", "epochs=3", "source.height=50", "collate.x=1"}})
	if err == nil || !strings.Contains(err.Error(), `collate: unknown parameter "x"`) && !strings.Contains(err.Error(), `unknown parameter "x"`) {
		t.Fatalf("override of an unknown parameter: %v", err)
	}
	p, err := Parse("f.yaml", []byte(file), Options{Env: envOf(map[string]string{"W": "100", "N": ""}),
		Set: []string{"stages.1.size=9", "resources.budget=3MiB", "epochs=3", "source.height=50"}})
	if err != nil {
		t.Fatal(err)
	}
	src := p.Source.Config
	if src.Int("items") != 7 || src.Int("width") != 100 || src.Int("height") != 50 {
		t.Fatalf("source config items %d width %d height %d, want 7 100 50", src.Int("items"), src.Int("width"), src.Int("height"))
	}
	if p.Stages[1].Config.Int("size") != 9 || p.Resource.Budget != 3<<20 || p.Epochs != 3 {
		t.Fatalf("overrides: size %d budget %d epochs %d", p.Stages[1].Config.Int("size"), p.Resource.Budget, p.Epochs)
	}
	if pos, ok := p.Stages[1].Config.IsSet("size"); !ok || pos.File != "-set stages.1.size" {
		t.Fatalf("size set at %v %v, want the -set", pos, ok)
	}
	if p.Stages[0].Config.Int("workers") != 0 || p.Stages[0].Config.String("layout") != "chw" {
		t.Fatal("defaults not filled")
	}
}

func TestNamesAndEdges(t *testing.T) {
	file := `source: {kind: generate, config: {items: 5}}
stages:
  - decode
  - {kind: decode, name: second, input: generate}
  - {kind: batch, input: [decode, second]}
  - collate
sink: discard
`
	p, err := Parse("f.yaml", []byte(file), Options{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range p.Nodes() {
		got = append(got, c.Name+"<"+strings.Join(c.Inputs, "+"))
	}
	want := "generate< decode<generate second<generate batch<decode+second collate<batch discard<collate"
	if strings.Join(got, " ") != want {
		t.Fatalf("nodes %q\nwant    %q", strings.Join(got, " "), want)
	}
}

func TestRegistryRefusesBadDeclarations(t *testing.T) {
	r := NewRegistry()
	if err := RegisterBuiltins(r); err != nil {
		t.Fatal(err)
	}
	build := func(*Build, *Config, Stream) (Stream, error) { return Stream{}, nil }
	for _, tc := range []struct {
		k   Kind
		msg string
	}{
		{Kind{Name: "decode", Role: StageRole, In: "sample", Out: "image", Doc: "x", Build: build}, "registered twice"},
		{Kind{Name: "x", Role: StageRole, In: "sample", Out: "pixels", Doc: "x", Build: build}, `"pixels" is not registered`},
		{Kind{Name: "x", Role: SourceRole, In: "sample", Out: "image", Doc: "x", Build: build}, "a source has an output type and no input"},
		{Kind{Name: "x", Role: SinkRole, In: "image", Doc: "", Build: build}, "doc line"},
		{Kind{Name: "x", Role: SinkRole, In: "image", Doc: "x", Build: build, Params: []Param{IntParam("n", 1, 0, 9, "n"), IntParam("n", 1, 0, 9, "n")}}, "declared twice"},
		{Kind{Name: "x", Role: SinkRole, In: "image", Doc: "x", Build: build, Params: []Param{{Name: "n", Type: Int, Default: 1, Doc: "n"}}}, "does not fit type int"},
		{Kind{Name: "x", Role: SinkRole, In: "image", Doc: "x", Build: build, Params: []Param{EnumParam("e", "z", []string{"a"}, "e")}}, "does not fit"},
	} {
		if err := r.Register(tc.k); err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("Register(%s): %v, want ...%s...", tc.k.Name, err, tc.msg)
		}
	}
	if err := r.RegisterType(SampleType); err == nil {
		t.Error("a type registered twice was accepted")
	}
}

// TestBytesParameters: resources' sizes use the one size grammar (any binary unit up
// to E, in any case, the range's top written and accepted the same way) plus each
// parameter's words, and a negative number only where the range allows it.
func TestBytesParameters(t *testing.T) {
	for _, tc := range []struct {
		set          string
		memory, want int64 // want: Budget
		err          string
	}{
		{set: "resources.budget=1PiB", memory: -1, want: 1 << 50},
		{set: "resources.budget=1024TiB", memory: -1, want: 1 << 50},
		{set: "resources.budget=1.5gib", memory: -1, want: 3 << 29},
		{set: "resources.budget=64 m", memory: -1, want: 64 << 20},
		{set: "resources.budget=auto", memory: -1, want: 0},
		{set: "resources.memory=-1", memory: -1},
		{set: "resources.memory=none", memory: -1},
		{set: "resources.memory=2GiB", memory: 2 << 30},
		{set: "resources.budget=1025TiB", err: "budget: 1025TiB is out of range (0 … 1PiB)"},
		{set: "resources.memory=-5", err: "memory: -5 is out of range (-1 … 1PiB)"},
		{set: "resources.budget=-1", err: "budget: -1 is out of range (0 … 1PiB)"},
		{set: "resources.budget=1e3", err: `budget: "1e3" is not a size in bytes`},
		{set: "resources.budget=64KB", err: `budget: "64KB" is not a size in bytes`},
	} {
		p, err := Parse("f.yaml", []byte(good), Options{Set: []string{tc.set}})
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: %v, want an error with %q", tc.set, err, tc.err)
			}
		case err != nil:
			t.Errorf("%s: %v", tc.set, err)
		case p.Resource.Budget != tc.want || p.Resource.Memory != tc.memory:
			t.Errorf("%s: budget %d memory %d, want %d and %d", tc.set, p.Resource.Budget, p.Resource.Memory, tc.want, tc.memory)
		}
	}
}
