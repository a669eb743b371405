//go:build linux

package cuda

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/psiflow/psiflow/gpu"
)

// lib is a loaded driver library: the address of every entry point psiflow
// calls. Calls go through purego.SyscallN on these addresses (no cgo; no
// reflection-based wrapper allocating on every call).
type lib struct {
	path string

	init, driverGetVersion, deviceGetCount, deviceGet, deviceGetName, deviceTotalMem uintptr
	primaryCtxRetain, primaryCtxRelease, ctxSetCurrent                               uintptr
	memGetInfo, memAlloc, memFree, memHostRegister, memHostUnregister                uintptr
	streamCreate, streamDestroy, streamSynchronize, memcpyHtoDAsync, memcpyDtoH      uintptr
	eventCreate, eventDestroy, eventRecord, eventSynchronize, eventElapsedTime       uintptr
	getErrorString, getErrorName                                                     uintptr
}

// load opens the library at path and looks up every entry point. A missing
// library is gpu.ErrNoDriver; a missing entry point is an error naming it
// (the symbols are looked up with Dlsym, so a driver without one is an error
// here, not purego.RegisterLibFunc's panic).
func load(path string) (*lib, error) {
	h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		return nil, fmt.Errorf("%w: cuda: dlopen %s: %v (no NVIDIA driver on this host, or it is not on the loader's path; set %s to its path)",
			gpu.ErrNoDriver, path, err, EnvLibrary)
	}
	l := &lib{path: path}
	var missing []string
	for _, s := range []struct {
		p    *uintptr
		name string
	}{
		{&l.init, "cuInit"},
		{&l.driverGetVersion, "cuDriverGetVersion"},
		{&l.deviceGetCount, "cuDeviceGetCount"},
		{&l.deviceGet, "cuDeviceGet"},
		{&l.deviceGetName, "cuDeviceGetName"},
		{&l.deviceTotalMem, "cuDeviceTotalMem_v2"},
		{&l.primaryCtxRetain, "cuDevicePrimaryCtxRetain"},
		{&l.primaryCtxRelease, "cuDevicePrimaryCtxRelease_v2"},
		{&l.ctxSetCurrent, "cuCtxSetCurrent"},
		{&l.memGetInfo, "cuMemGetInfo_v2"},
		{&l.memAlloc, "cuMemAlloc_v2"},
		{&l.memFree, "cuMemFree_v2"},
		{&l.memHostRegister, "cuMemHostRegister_v2"},
		{&l.memHostUnregister, "cuMemHostUnregister"},
		{&l.streamCreate, "cuStreamCreate"},
		{&l.streamDestroy, "cuStreamDestroy_v2"},
		{&l.streamSynchronize, "cuStreamSynchronize"},
		{&l.memcpyHtoDAsync, "cuMemcpyHtoDAsync_v2"},
		{&l.memcpyDtoH, "cuMemcpyDtoH_v2"},
		{&l.eventCreate, "cuEventCreate"},
		{&l.eventDestroy, "cuEventDestroy_v2"},
		{&l.eventRecord, "cuEventRecord"},
		{&l.eventSynchronize, "cuEventSynchronize"},
		{&l.eventElapsedTime, "cuEventElapsedTime"},
		{&l.getErrorString, "cuGetErrorString"},
		{&l.getErrorName, "cuGetErrorName"},
	} {
		p, err := lookup(h, s.name)
		if err != nil {
			missing = append(missing, s.name)
			continue
		}
		*s.p = p
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("cuda: %s lacks the driver entry points %v (a CUDA driver older than 11.0, or not a CUDA driver)", path, missing)
	}
	return l, nil
}

// lookup is Dlsym, turning a panic (purego's symbol functions panic in some
// configurations) into an error as well.
func lookup(h uintptr, name string) (p uintptr, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("symbol %s: %v", name, r)
		}
	}()
	p, err = purego.Dlsym(h, name)
	if err == nil && p == 0 {
		err = errors.New("symbol " + name + " is NULL")
	}
	return p, err
}

// call calls the C function at fn and returns its CUresult. Arguments that
// are pointers converted to uintptr in the call expression are kept alive and
// on the heap for the duration of the call (unsafe.Pointer rule 4, as for
// purego.SyscallN itself).
//
//go:uintptrescapes
func call(fn uintptr, args ...uintptr) int32 {
	r, _, _ := purego.SyscallN(fn, args...)
	return int32(r) // CUresult is a C enum: the upper half of the register is undefined
}

// check turns a CUresult into nil or an *Error naming the call.
func (l *lib) check(name string, r int32) error {
	if r == 0 {
		return nil
	}
	e := &Error{Call: name, Code: int(r)}
	var s unsafe.Pointer // the driver writes the address of a static C string
	if call(l.getErrorName, uintptr(r), uintptr(unsafe.Pointer(&s))) == 0 {
		e.Name = goString(s)
	}
	s = nil
	if call(l.getErrorString, uintptr(r), uintptr(unsafe.Pointer(&s))) == 0 {
		e.Text = goString(s)
	}
	return e
}

// goString copies the NUL-terminated C string at p (at most 4 KiB).
func goString(p unsafe.Pointer) string {
	if p == nil {
		return ""
	}
	n := 0
	for n < 4096 && *(*byte)(unsafe.Add(p, n)) != 0 {
		n++
	}
	return string(unsafe.Slice((*byte)(p), n))
}
