// Package imagefolder is the image-folder preset: the shipped pipeline file
// pipelines/imagefolder.yaml (the one behind "make run", psiflow run, psiflow
// demo -data, psiflow serve, psiflow-imagefolder and the README) as a spec, with
// overrides. It builds nothing itself: [New] returns the validated
// [pipelines.Pipeline], and [pipelines.Run] builds its graphs from the registry
// and attaches the memory runtime, as it does for every front-end:
//
//	read a folder of JPEG/PNG files (ImageNet layout: DIR/<class>/<image>)
//	through io_uring (pread where io_uring is unavailable) into the runtime's
//	registered pool → decode (libjpeg-turbo, or the standard library) →
//	Resize(256) → CenterCrop(224) → uint8 CHW tensors labelled by class →
//	batch of 64 → collate.
package imagefolder
