// Package pipelines is the root of psiflow's ready pipelines and owns the YAML
// pipeline format: a registry of stage kinds, parsing with line and column in
// every error, validation before anything runs, and building and running the
// graphs a file describes.
//
// # Pipeline files
//
// A file names its source, its stages in order, its sink and its resources:
//
//	name: imagefolder
//	source:
//	  kind: files
//	  config: {dir: "${DATA:-out/demo-jpeg}", labels: true}
//	stages:
//	  - kind: decode
//	    config: {resize: 256, center_crop: 224}
//	  - kind: batch
//	    config: {size: 64}
//	  - kind: collate
//	sink:
//	  kind: discard
//	resources: {memory: 2GiB, budget: auto, pressure: gate, device: cpu}
//
// Each stage reads the output of the one before it unless it names its input
// (input: NAME, or a list of names to merge); several stages naming the same
// input fan out: fanout: roundrobin (the default, on the producer) splits the
// elements among them, fanout: broadcast gives each every element (only for
// element types that are reference counted).
// Strings may use ${VAR} and ${VAR:-default}; [Options.Set] applies -set
// key=value overrides.
//
// # The registry
//
// A [Registry] holds element types ([NewType]) and kinds ([Kind]): each kind
// declares its role, input and output element types, typed parameters with
// defaults, ranges and one line of documentation, and a constructor. The same
// registry validates files ([Load]), builds and runs graphs ([Run]) and prints
// the reference ([Registry.WriteReference], "psiflow stages").
// [Default] is the registry with every built-in kind; [NewRegistry] makes an
// isolated one (for tests or embedding programs).
//
// # What it does not own
//
// Readers, decoders and graphs belong to packages source, stage/decode and flow;
// the pressure gate, metrics and cgroups are passed in by the caller through
// [Hooks] (cmd/psiflow does this for "psiflow run"). Presets are spec builders
// above this package (pipelines/imagefolder: the shipped image pipeline with
// overrides); summaries are package pipelines/progress.
package pipelines
