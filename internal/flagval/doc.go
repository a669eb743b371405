// Package flagval parses and validates the values of command-line flags:
// sizes with units, counts, floating-point quantities, fractions and
// durations, each within a range. A value out of range, NaN, an infinity, a
// negative where none is allowed, or one that overflows is an error, and the
// flag package reports it with the flag's name:
//
//	invalid value "NaN" for flag -cpus: not a finite number
//
// Every psiflow command (cmd/psiflow, cmd/psiflow-imagefolder) defines its
// numeric flags here, so that no flag silently means "no limit" or wraps
// around. It owns only parsing; what a value means belongs to the command.
package flagval
