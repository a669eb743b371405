// Package frontend is the launcher's one flag vocabulary for the shipped image
// pipeline (pipelines/imagefolder.yaml, the preset pipelines/imagefolder).
// psiflow demo -data, psiflow serve and psiflow-imagefolder register the same
// flags with [Register]; every flag is an override of one key of the pipeline
// file, takes its default, type and range from it, and [Flags.Pipeline] turns
// the flags given into -set overrides of the preset. Nothing else builds the
// image pipeline: the front-ends run what [Flags.Pipeline] returns with
// pipelines.Run, which attaches the memory runtime.
package frontend
