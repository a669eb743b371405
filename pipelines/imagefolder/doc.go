// Package imagefolder is psiflow's image-folder pipeline, the one behind "make run",
// "psiflow demo -data", the psiflow-imagefolder benchmark loader and the README:
// read a folder of JPEG/PNG files (ImageNet layout: DIR/<class>/<image>) through
// package source's io_uring reader (pread where io_uring is unavailable), optionally
// into a registered UMA pool → decode (libjpeg-turbo, or the standard library) →
// Resize → CenterCrop → uint8 CHW tensors → batch → collate → consume.
//
// It owns only the wiring of this graph. Stages, readers, decoders, the budget, the
// pressure gate and the metrics are the real ones from their packages; the caller adds
// the gate and metrics through [Hooks].
package imagefolder
