// Package bytesize is psiflow's one grammar for byte sizes: the one parser
// ([Parse]) and the formatters that write sizes back ([Format], exact, and
// [Human], rounded for people).
//
// # The grammar
//
// A size is a non-negative number (digits, optionally with one decimal point;
// no sign, exponent, underscore or hexadecimal) followed, optionally after
// spaces, by a binary unit matched without regard to case:
//
//	B                        bytes
//	K, Ki, KiB               1024
//	M, Mi, MiB               1024²
//	G, Gi, GiB               1024³
//	T, Ti, TiB               1024⁴
//	P, Pi, PiB               1024⁵
//	E, Ei, EiB               1024⁶
//
// "64KiB", "1.5G", "256m", "1 PiB" and "4096" are sizes; the result must fit
// in an int64 (at most 8 EiB − 1 byte), and a decimal is rounded to the
// nearest byte. Every psiflow front-end reads sizes with this grammar: the
// command-line flags (through internal/flagval, which adds the words "none",
// "max" and "-1" for "no limit"), the Bytes parameters of pipeline files
// (package pipelines, which adds each parameter's own words such as "auto"),
// the launcher's -limit lists and the co-tenant's -bytes.
//
// # Writing sizes
//
// [Format] writes the exact size in the largest unit that divides it
// ("256MiB", "1536KiB", "1000"): what a flag default, a pipeline file or a
// range in the docs shows, and what [Parse] reads back to the same number.
// [Human] writes a rounded size for reports and log lines ("1.5 GiB",
// "30 MiB", "512 B", "-3.2 MiB" for a deficit); [Parse] reads its output
// back to within a twentieth of its unit.
//
// # Why internal
//
// Sizes reach users as text (flags, YAML, messages), never as this API, so the
// package stays internal: the public packages (pipelines, pressure, uma) use
// it without promising it to library users.
//
// # What it does not own
//
// What a size means (a limit, a budget, a pool) and its range belong to the
// caller; so do words such as "none" or "auto".
package bytesize
