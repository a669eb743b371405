// Package metrics is what a psiflow program needs to expose Prometheus metrics: a
// registry holding the process-wide collectors ([New]), the read and decode observers
// that package source and stage/decode call ([Reads], [Decodes]), and an HTTP server for
// /metrics ([Serve]) behind the launcher's -metrics ADDR flag.
//
// A program builds one [Set], passes Set.Registry to flow.WithRegistry, memory.Config
// and uma.Config, passes Set.Reads to source.ReaderOptions.Observer and Set.Decodes to
// decode.StageConfig.Observer (pipelines.Hooks take all three), and calls
// [Set.Serve] when -metrics is given. docs/METRICS.md lists every metric.
//
// It is public (it was internal/metrics until 2026-12-04) because a program of
// your own, a pipeline built by hand with package flow, needs it to export what
// psiflow's commands export: its exported names ([Set], [New], [Serve], [Reads],
// [Decodes] and their methods) and the metric names docs/METRICS.md lists are
// kept stable; a change to either is a breaking change.
//
// # What it does not own
//
// The metrics of a graph (package flow), of the pressure gate (package pressure), of UMA
// (package uma) and of cgroups (package cgroup/cgroupmetrics) are defined where their
// data lives; this package only gathers them into one registry and serves it.
package metrics
