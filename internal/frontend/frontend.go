package frontend

import (
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/psiflow/psiflow/internal/bytesize"
	"github.com/psiflow/psiflow/memory"
	"github.com/psiflow/psiflow/pipelines"
	"github.com/psiflow/psiflow/pipelines/imagefolder"
	"github.com/psiflow/psiflow/source"
)

// SpecFile is the shipped pipeline file the flags override.
const SpecFile = imagefolder.File

// Spec is the image-folder preset (imagefolder.New) with the overrides
// ("key=value", as psiflow run -set takes them). The environment is not read:
// ${DATA} and ${EPOCHS} take the file's defaults, so a front-end's flags alone
// decide.
func Spec(overrides []string) (*pipelines.Pipeline, error) {
	return imagefolder.New("", overrides...)
}

// binding ties one flag to the keys of the pipeline file it overrides.
type binding struct {
	flag string
	keys []string // the first one gives the flag its type, default and range
	// usage replaces the parameter's documentation when set.
	usage string
	// bool flag over an enum (pressure: gate/off): the words for true and false.
	yes, no string
	// noDefault shows no default (a flag a front-end requires, such as -data).
	noDefault bool
}

// bindings is the vocabulary, in the order -help lists it.
var bindings = []binding{
	{flag: "data", keys: []string{"read.dir"}, usage: "image folder (ImageFolder layout: DIR/CLASS/*.jpg), searched recursively", noDefault: true},
	{flag: "readers", keys: []string{"read.readers"}},
	{flag: "drop-cache", keys: []string{"read.drop_cache"}},
	{flag: "direct", keys: []string{"read.direct"}},
	{flag: "shuffle", keys: []string{"read.shuffle"}, usage: "shuffle every epoch: a permutation of the whole folder per (seed, epoch), then sharded by rank"},
	{flag: "seed", keys: []string{"read.seed", "decode.seed"}, usage: "seed of the shuffle and of the random crop and flip"},
	{flag: "drop-last", keys: []string{"read.drop_last"}},
	{flag: "rank", keys: []string{"read.rank"}},
	{flag: "world-size", keys: []string{"read.world_size"}},
	{flag: "workers", keys: []string{"decode.workers"}, usage: "decode workers; 0: GOMAXPROCS"},
	{flag: "ordered", keys: []string{"decode.ordered"}, usage: "keep file order through decoding"},
	{flag: "backend", keys: []string{"decode.backend"}},
	{flag: "resize", keys: []string{"decode.resize"}, usage: "Resize: shorter side (torchvision Resize(n)); 0: keep"},
	{flag: "crop", keys: []string{"decode.center_crop"}, usage: "CenterCrop size; 0: none"},
	{flag: "random-resized-crop", keys: []string{"decode.random_resized_crop"}, usage: "the training transform: torchvision RandomResizedCrop(n) instead of -resize and -crop; 0: none"},
	{flag: "scale-min", keys: []string{"decode.scale_min"}},
	{flag: "scale-max", keys: []string{"decode.scale_max"}},
	{flag: "ratio-min", keys: []string{"decode.ratio_min"}},
	{flag: "ratio-max", keys: []string{"decode.ratio_max"}},
	{flag: "flip", keys: []string{"decode.flip"}, usage: "probability of a horizontal flip (RandomHorizontalFlip: 0.5)"},
	{flag: "normalize", keys: []string{"decode.normalize"}},
	{flag: "exact", keys: []string{"decode.exact"}},
	{flag: "max-pixels", keys: []string{"decode.max_pixels"}},
	{flag: "on-error", keys: []string{"decode.on_error"}},
	{flag: "max-skips", keys: []string{"decode.max_skips"}, usage: "with -on-error skip: stop after this many skipped images per epoch; 0: no limit"},
	{flag: "max-skip-rate", keys: []string{"decode.max_skip_rate"}, usage: "with -on-error skip: stop when more than this fraction of an epoch's images is skipped; 0: no limit"},
	{flag: "batch", keys: []string{"batch.size"}, usage: "samples per batch"},
	{flag: "epochs", keys: []string{"epochs"}},
	{flag: "limit", keys: []string{"limit"}},
	{flag: "epoch", keys: []string{"start_epoch"}},
	{flag: "start", keys: []string{"start_at"}},
	{flag: "budget", keys: []string{"resources.budget"}, usage: "byte budget (bytes in flight from read to decode, e.g. 256M): the largest with -memory elastic, the budget with -memory fixed; auto (0): a quarter of this process's cgroup memory limit (MemTotal when unlimited)"},
	{flag: "queue", keys: []string{"resources.queue"}},
	{flag: "memory", keys: []string{"resources.memory_mode"}},
	{flag: "pressure", keys: []string{"resources.pressure"}, yes: "gate", no: "off", usage: "gate the source and its reads on this cgroup's memory pressure (PSI triggers, vmpressure or polling, whichever the host allows)"},
	{flag: "below-floor", keys: []string{"resources.below_floor"}},
	{flag: "pause-timeout", keys: []string{"resources.pause_timeout"}},
	{flag: "no-room", keys: []string{"resources.no_room"}},
	{flag: "cache", keys: []string{"resources.cache"}},
	{flag: "cache-max", keys: []string{"resources.cache_max"}},
}

// Flags are the registered flags of one command line.
type Flags struct {
	fs        *flag.FlagSet
	base      *pipelines.Pipeline
	vals      map[string]*specValue
	byKey     map[string]string // override key → flag name
	sets      setList
	shard     source.Sharding
	lockText  *bool
	oomVictim *bool
}

// Register adds the vocabulary to fs: one flag per key of the shipped image
// pipeline it overrides (with that key's default, type and range), -set for any
// other key, and the launcher's process actions (-lock-text, -oom-victim).
func Register(fs *flag.FlagSet) *Flags {
	base, err := Spec(nil)
	if err != nil {
		panic("frontend: the shipped " + SpecFile + " is not valid: " + err.Error()) // a build mistake, caught by every test
	}
	f := &Flags{fs: fs, base: base, vals: map[string]*specValue{}, byKey: map[string]string{}}
	for _, b := range bindings {
		p, v, err := base.Lookup(b.keys[0])
		if err != nil {
			panic("frontend: flag -" + b.flag + ": " + err.Error())
		}
		sv := &specValue{b: b, param: p, def: formatValue(p, v)}
		if b.yes != "" {
			sv.def = strconv.FormatBool(sv.def == b.yes)
		}
		usage := b.usage
		if usage == "" {
			usage = p.Doc
		}
		usage += " (" + strings.Join(b.keys, ", ") + " in " + SpecFile + ")"
		f.vals[b.flag] = sv
		for _, k := range b.keys {
			f.byKey[k] = b.flag
		}
		fs.Var(sv, b.flag, usage)
		if b.noDefault {
			fs.Lookup(b.flag).DefValue = ""
		}
	}
	fs.Var(&f.sets, "set", "override any key of "+SpecFile+" (repeatable, as psiflow run -set): key=value, e.g. decode.exact=true")
	f.lockText = fs.Bool("lock-text", true, "lock the program's code in memory as it is faulted in (mlock2 MLOCK_ONFAULT), so reclaim does not evict the monitor; the locked pages are charged to the cgroup that first reads them")
	f.oomVictim = fs.Bool("oom-victim", true, "make the loader the OOM killer's first choice in its cgroup (oom_score_adj 1000), so the trainer beside it is spared")
	return f
}

// IsSet reports whether the flag name was given on the command line.
func (f *Flags) IsSet(name string) bool {
	v, ok := f.vals[name]
	return ok && v.set
}

// Value is the flag's value: the one given, else the pipeline file's default
// (int64, float64, bool, string, time.Duration; Bytes as int64; the pressure
// flag as a bool).
func (f *Flags) Value(name string) any {
	v, ok := f.vals[name]
	if !ok {
		panic("frontend: no flag -" + name)
	}
	if v.b.yes != "" {
		return v.String() == "true"
	}
	if !v.set {
		_, val, _ := f.base.Lookup(v.b.keys[0])
		return val
	}
	return v.parsed
}

// Int is an integer or size flag's value.
func (f *Flags) Int(name string) int64 { n, _ := f.Value(name).(int64); return n }

// Overrides are the -set overrides the command line makes: one per key of each
// flag given, in the vocabulary's order, then the -set flags in their order.
func (f *Flags) Overrides() []string {
	var out []string
	for _, b := range bindings {
		v := f.vals[b.flag]
		if !v.set {
			continue
		}
		for _, k := range b.keys {
			out = append(out, k+"="+v.specText())
		}
	}
	// RandomResizedCrop replaces Resize and CenterCrop unless they were asked for too.
	if v := f.vals["random-resized-crop"]; v.set && v.parsed.(int64) > 0 {
		if !f.IsSet("resize") {
			out = append(out, "decode.resize=0")
		}
		if !f.IsSet("crop") {
			out = append(out, "decode.center_crop=0")
		}
	}
	return append(out, f.sets...)
}

// Pipeline is the shipped image pipeline with the command line's overrides,
// validated: a bad combination is named by the file's key and the flag. The
// sharding is settled here, before anything runs: -rank and -world-size, else
// RANK and WORLD_SIZE from the environment (torchrun's), else rank 0 of 1; a
// rank outside the world is an error naming both.
func (f *Flags) Pipeline() (*pipelines.Pipeline, error) {
	sh, err := f.sharding()
	if err != nil {
		return nil, err
	}
	f.shard = sh
	if f.IsSet("pause-timeout") && f.Value("below-floor") != "pause" {
		return nil, fmt.Errorf("-pause-timeout needs -below-floor pause, not %s", f.Value("below-floor"))
	}
	over := append(f.Overrides(), fmt.Sprintf("read.rank=%d", sh.Rank), fmt.Sprintf("read.world_size=%d", sh.WorldSize))
	p, err := Spec(over)
	if err != nil {
		return nil, fmt.Errorf("the flags make an invalid pipeline (%s with overrides):\n%w", SpecFile, err)
	}
	return p, nil
}

// Sharding is the rank and world size [Flags.Pipeline] settled (FromEnv when
// the environment gave them), for a front-end's first lines.
func (f *Flags) Sharding() source.Sharding { return f.shard }

func (f *Flags) sharding() (source.Sharding, error) {
	rank, world := int(f.Int("rank")), int(f.Int("world-size"))
	sh := source.Sharding{Rank: rank, WorldSize: world}
	if rank < 0 || world == 0 {
		env, err := source.EnvSharding()
		if err != nil {
			return sh, err
		}
		if rank < 0 {
			sh.Rank, sh.FromEnv = env.Rank, env.FromEnv
		}
		if world == 0 {
			sh.WorldSize, sh.FromEnv = env.WorldSize, sh.FromEnv || env.FromEnv
		}
	}
	if sh.WorldSize < 1 || sh.Rank < 0 || sh.Rank >= sh.WorldSize {
		return sh, fmt.Errorf("rank %d of world size %d is out of range (-rank, -world-size, RANK, WORLD_SIZE)", sh.Rank, sh.WorldSize)
	}
	return sh, nil
}

// Process are the launcher's actions on the whole process, with -lock-text and
// -oom-victim.
func (f *Flags) Process() memory.ProcessActions {
	return memory.ProcessActions{GoMemoryLimit: true, LockText: *f.lockText, OOMVictim: *f.oomVictim}
}

// Option names node's parameter by its flag (pipelines.Hooks.Option), "" when no
// flag sets it.
func (f *Flags) Option(node, param string) string {
	if name, ok := f.byKey[node+"."+param]; ok {
		return "-" + name
	}
	return ""
}

// Hooks are the pipelines.Hooks every front-end starts from: the process
// actions and the flags' names in messages.
func (f *Flags) Hooks() pipelines.Hooks {
	return pipelines.Hooks{Process: f.Process(), Option: f.Option}
}

// specValue is one flag: text checked against the pipeline file's parameter.
type specValue struct {
	b      binding
	param  pipelines.Param
	def    string
	text   string
	parsed any
	set    bool
}

func (v *specValue) String() string {
	if v == nil {
		return ""
	}
	if v.set {
		return v.text
	}
	return v.def
}

func (v *specValue) Set(s string) error {
	if v.b.yes != "" {
		b, err := strconv.ParseBool(s)
		if err != nil {
			return fmt.Errorf("want true or false")
		}
		v.text, v.parsed, v.set = strconv.FormatBool(b), b, true
		return nil
	}
	x, err := v.param.ParseText(s)
	if err != nil {
		return err
	}
	v.text, v.parsed, v.set = s, x, true
	return nil
}

// IsBoolFlag lets -shuffle stand for -shuffle=true.
func (v *specValue) IsBoolFlag() bool { return v.b.yes != "" || v.param.Type == pipelines.Bool }

// specText is the value as the pipeline file takes it.
func (v *specValue) specText() string {
	if v.b.yes != "" {
		if v.parsed.(bool) {
			return v.b.yes
		}
		return v.b.no
	}
	return strconv.Quote(v.text) // a YAML double-quoted scalar: the text as given
}

// formatValue writes a parameter's value as a flag takes it.
func formatValue(p pipelines.Param, v any) string {
	switch x := v.(type) {
	case string:
		return x
	case bool:
		return strconv.FormatBool(x)
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	case time.Duration:
		return x.String()
	case int64:
		if p.Type == pipelines.Bytes {
			for w, n := range p.Words {
				if n == x && (w == "auto" || w == "none") {
					return w
				}
			}
			return bytesize.Format(x)
		}
		return strconv.FormatInt(x, 10)
	case []string:
		return strings.Join(x, ",")
	}
	return fmt.Sprint(v)
}

// setList collects -set key=value.
type setList []string

func (s *setList) String() string { return strings.Join(*s, " ") }

func (s *setList) Set(v string) error {
	if k, _, ok := strings.Cut(v, "="); !ok || k == "" {
		return fmt.Errorf("%q: want key=value", v)
	}
	*s = append(*s, v)
	return nil
}

// SetFlags names the vocabulary's flags given on the command line, in its order.
func (f *Flags) SetFlags() []string {
	var out []string
	for _, b := range bindings {
		if f.vals[b.flag].set {
			out = append(out, b.flag)
		}
	}
	return out
}
