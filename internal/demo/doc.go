// Package demo holds the synthetic pipeline behind "psiflow demo" without -data:
// generate → decode as CPU work → batch → consume, which runs anywhere without data
// or devices. The image-folder pipeline ("make run", "psiflow demo -data") is the
// preset [github.com/psiflow/psiflow/pipelines/imagefolder], run by package pipelines.
//
// It owns only the wiring of this graph; stages, the budget, the pressure gate and
// the metrics are the real ones from their packages (the caller adds the gate through
// [GraphHooks]).
package demo
