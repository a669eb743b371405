// Package kernfile parses the kernel's /proc files that packages below cgroup need
// too: the "Key: N kB" lines of /proc/meminfo and /proc/<pid>/status ([ReadSizes])
// the capability masks of /proc/<pid>/status ([ReadCapEff]) and the mappings of
// /proc/<pid>/maps ([ReadMaps]). A malformed line is a [*ParseError] naming the file
// and the line.
//
// # What it does not own
//
// The cgroup interface files and PSI files are read by package cgroup, which
// re-exports [ParseError] and [ReadSizes] (as cgroup.ParseError and
// cgroup.ReadProcSizes) so that everyone above it has one set of readers; this package
// exists so that the packages cgroup's layer may not import (internal/addrspace,
// which UMA imports; stage/decode/turbojpeg) parse the same files with the same code.
package kernfile
