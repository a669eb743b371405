package pipelines

import (
	"time"

	"github.com/psiflow/psiflow/memory"
)

// Config is the validated configuration of one node: every declared parameter
// of its kind, set from the file or defaulted. Getters return the zero value for
// a name the kind does not declare.
type Config struct {
	vals map[string]any
	set  map[string]Pos
}

func newConfig() *Config { return &Config{vals: map[string]any{}, set: map[string]Pos{}} }

// IsSet reports whether the file (or an override) set name, and where.
func (c *Config) IsSet(name string) (Pos, bool) { p, ok := c.set[name]; return p, ok }

// Value returns name's value (nil when undeclared).
func (c *Config) Value(name string) any { return c.vals[name] }

// String returns a String or Enum parameter.
func (c *Config) String(name string) string { s, _ := c.vals[name].(string); return s }

// Int returns an Int or Bytes parameter.
func (c *Config) Int(name string) int64 { n, _ := c.vals[name].(int64); return n }

// Float returns a Float parameter.
func (c *Config) Float(name string) float64 { f, _ := c.vals[name].(float64); return f }

// Bool returns a Bool parameter.
func (c *Config) Bool(name string) bool { b, _ := c.vals[name].(bool); return b }

// Duration returns a Duration parameter.
func (c *Config) Duration(name string) time.Duration { d, _ := c.vals[name].(time.Duration); return d }

// Strings returns a StringList parameter.
func (c *Config) Strings(name string) []string { s, _ := c.vals[name].([]string); return s }

// Component is one validated node of a pipeline: a source, a stage or the sink.
type Component struct {
	Kind *Kind
	// Name is the node's name in the graph and in overrides (its kind unless the
	// file names it; a repeated kind gets "-2", "-3").
	Name string
	// Inputs are the names of the nodes it reads (merged when several).
	Inputs []string
	// Fanout is how its output is split when several nodes read it:
	// "roundrobin" (default) or "broadcast".
	Fanout string
	Config *Config
	Pos    Pos
}

// Resources are the file's resources section.
type Resources struct {
	Memory     int64   // memory.max of the child cgroup with -cgroup; -1: none
	MemoryHigh int64   // memory.high (v1: soft limit); -1: none
	CPUs       float64 // cpu.max in CPUs; 0: none
	Pids       int64   // pids.max; -1: none
	Budget     int64   // byte budget in flight; 0: auto (a quarter of the cgroup memory limit)
	Queue      int     // default edge queue size
	Pressure   bool    // gate the source on memory pressure
	// Device is where the device stages copy batches: auto, cuda, sim or cpu
	// (see [Pipeline.Device] for what auto becomes).
	Device string
	// MemoryMode is the memory runtime's mode: elastic (the budget follows the
	// cgroup's headroom, memory is given back under pressure) or fixed.
	MemoryMode memory.Mode
	// BelowFloor is what an elastic loader does below its floor: pause, stop or
	// run; PauseTimeout ends a pause that lasted longer (0: never).
	BelowFloor   memory.FloorPolicy
	PauseTimeout time.Duration
	// NoRoom is what a paused loader does when the others alone leave it less
	// than its own resident set: leave (end the run, exit status 3) or stay.
	NoRoom memory.NoRoomPolicy
	// Cache is the sample cache between epochs: off, decoded or encoded; CacheMax
	// its bound in bytes (0: half of the cgroup memory limit).
	Cache    string
	CacheMax int64
}

// Pipeline is a validated pipeline file, ready to [Run].
type Pipeline struct {
	File   string
	Name   string
	Epochs int
	Limit  int64 // samples; 0: all
	// StartEpoch is the number of the first epoch (it selects the shuffle);
	// StartAt the position the first epoch resumes at (samples consumed by all
	// ranks together), as a checkpoint's state says.
	StartEpoch int
	StartAt    int64
	Source     *Component
	Stages     []*Component
	Sink       *Component
	Resource   Resources
	registry   *Registry
	top, res   *Config // the top-level scalars and the resources, as validated
}

// Nodes lists the source, the stages and the sink in file order.
func (p *Pipeline) Nodes() []*Component {
	out := append([]*Component{p.Source}, p.Stages...)
	return append(out, p.Sink)
}

// Registry is the registry the pipeline was validated against.
func (p *Pipeline) Registry() *Registry { return p.registry }

var bytesNone = map[string]int64{"max": -1, "none": -1}

// topParams are the file's top-level scalars.
var topParams = []Param{
	StringParam("name", "", "the pipeline's name (default: the file name)"),
	IntParam("epochs", 1, 1, 1<<20, "passes over the source"),
	IntParam("limit", 0, 0, 1<<62, "stop after exactly this many samples (the last batch is cut); 0: all"),
	IntParam("start_epoch", 0, 0, 1<<30, "number of the first epoch (it selects the shuffle), to resume a run"),
	IntParam("start_at", 0, 0, 1<<62, "the position the first epoch resumes at: samples consumed by all ranks together"),
}

// resourceParams are the keys of resources:.
var resourceParams = []Param{
	BytesParam("memory", -1, -1, 1<<50, "memory.max of the child cgroup under -cgroup").WithWords(bytesNone),
	BytesParam("memory_high", -1, -1, 1<<50, "memory.high (v1: soft limit) of the child cgroup under -cgroup").WithWords(bytesNone),
	FloatParam("cpus", 0, 0, 4096, "cpu.max quota in CPUs under -cgroup; 0: none"),
	IntParam("pids", -1, -1, 1<<22, "pids.max under -cgroup; -1: none"),
	BytesParam("budget", 0, 0, 1<<50, "bytes in flight; auto: a quarter of the cgroup memory limit (MemTotal when unlimited)").WithWords(map[string]int64{"auto": 0}),
	IntParam("queue", 4, 1, 1<<16, "default queue size (elements) of every edge"),
	EnumParam("pressure", "gate", []string{"gate", "off"}, "gate the source on the cgroup's memory pressure (PSI, vmpressure or polling)"),
	EnumParam("memory_mode", "elastic", []string{"elastic", "fixed"}, "the memory runtime: elastic (the budget follows the cgroup's headroom between the pipeline's floor and budget, memory is given back under pressure) or fixed (the budget as given, nothing given back)"),
	EnumParam("cache", "off", []string{"off", "decoded", "encoded"}, "keep samples between epochs in preemptible memory: decoded (the decode stage's tensors: later epochs skip read, decode and resize) or encoded (the files' bytes: they skip the read); given back first under pressure"),
	BytesParam("cache_max", 0, 0, 1<<50, "bound of the sample cache; 0: half of the cgroup memory limit"),
	EnumParam("below_floor", "pause", []string{"pause", "stop", "run"}, "elastic, when the cgroup leaves the loader less than its floor: pause (no reads until the memory is back; the consumer waits), stop (exit status 3, naming the memory left) or run (on at the floor)"),
	EnumParam("no_room", "leave", []string{"leave", "stay"}, "below_floor pause: when the others in the cgroup alone leave the paused loader less than its own resident set and the room both processes' code needs (max(4 MiB, limit/32)): leave (end the run with exit status 3, naming the limit, the others' memory and the loader's own, before the OOM killer chooses the co-tenant) or stay (paused; the kernel decides)"),
	DurationParam("pause_timeout", 10*time.Minute, 0, 24*time.Hour, "below_floor pause: a pause longer than this ends the run with exit status 3; 0: wait without end"),
	EnumParam("device", "auto", []string{"auto", "cuda", "sim", "cpu"}, "the device the pin, h2d and mark_preemptible stages copy batches to: cuda (CUDA device 0 through the driver API; PSIFLOW_LIBCUDA names the library), sim (a simulated device: 8 GiB at 25 GB/s, bytes kept only with mark_preemptible's verify), cpu (none: batches stay on the host) or auto (cuda for a pipeline with those stages, which fails naming the missing driver when there is none; cpu without them)"),
}

// componentKeys are the keys of a source, stage or sink.
var componentKeys = []string{"kind", "name", "input", "fanout", "config"}

// topKeys are the file's top-level keys.
var topKeys = []string{"name", "epochs", "limit", "start_epoch", "start_at", "source", "stages", "sink", "resources"}
