// Package demo holds the pipelines behind "psiflow demo" and "make run": a
// synthetic one (generate → decode as CPU work → batch → consume) that runs
// anywhere without data or devices, and the image-folder one (read through
// package source's io_uring or pread reader → decode with libjpeg-turbo →
// Resize → CenterCrop → batch → collate → consume) that "make run" runs over
// a generated JPEG folder.
//
// It owns only the wiring of these two graphs; stages, readers, decoders, the
// budget, the pressure gate and the metrics are the real ones from their
// packages (the caller adds the gate through [GraphHooks]).
package demo
