//go:build linux

package pressure

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The user-namespace helper: a trigger whose window is not a multiple of 2 s needs
// CAP_SYS_RESOURCE in the credentials of whoever opened the pressure file. A process
// in a new user namespace holds every capability there, and the kernel checks the
// opener's effective set, so the helper (this same binary, re-executed with
// CLONE_NEWUSER) opens the file, arms the trigger, and passes the descriptor back over
// a unix socket (SCM_RIGHTS). The parent then polls it like any other.
//
// The helper runs from [RunHelper], called first thing in main, when the
// environment variable helperEnv is set; it never returns to the program.
const (
	helperEnv        = "PSIFLOW_PSI_USERNS_HELPER"
	helperPathEnv    = "PSIFLOW_PSI_USERNS_PATH"
	helperTriggerEnv = "PSIFLOW_PSI_USERNS_TRIGGER"
	helperTimeout    = 10 * time.Second
)

func runHelper() {
	if os.Getenv(helperEnv) == "1" {
		os.Exit(runUserNSHelper())
	}
}

// runUserNSHelper runs in the re-executed child: fd 3 is the socket to the parent.
func runUserNSHelper() int {
	const sock = 3
	reply := func(fd int, msg string) int {
		var oob []byte
		if fd >= 0 {
			oob = unix.UnixRights(fd)
		}
		if err := unix.Sendmsg(sock, []byte("x"+msg), oob, nil, 0); err != nil {
			fmt.Fprintf(os.Stderr, "psiflow psi helper: sendmsg: %v\n", err)
			return 1
		}
		return 0
	}
	path := os.Getenv(helperPathEnv)
	t, err := ParseTrigger(os.Getenv(helperTriggerEnv))
	if err != nil {
		return reply(-1, err.Error())
	}
	fd, err := openTriggerFD(path, t)
	if err != nil {
		return reply(-1, err.Error())
	}
	return reply(fd, "")
}

// openTriggerInUserNS arms t on path from a helper in a new user namespace and
// returns the armed descriptor.
func openTriggerInUserNS(ctx context.Context, path string, t Trigger) (int, error) {
	fail := func(err error) (int, error) {
		return -1, fmt.Errorf("arm trigger %q on %s in a user namespace: %w", t, path, err)
	}
	if !helperCalled.Load() {
		return fail(ErrNoHelper)
	}
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fail(fmt.Errorf("socketpair: %w", err))
	}
	parentEnd := os.NewFile(uintptr(pair[0]), "psi-helper-parent")
	childEnd := os.NewFile(uintptr(pair[1]), "psi-helper-child")
	defer parentEnd.Close()
	exe, err := os.Executable()
	if err != nil {
		childEnd.Close()
		return fail(fmt.Errorf("find own executable: %w", err))
	}
	cctx, cancel := context.WithTimeout(ctx, helperTimeout)
	defer cancel()
	cmd := exec.CommandContext(cctx, exe)
	cmd.Args = []string{"psiflow-psi-helper"}
	cmd.Env = append(os.Environ(), helperEnv+"=1", helperPathEnv+"="+path, helperTriggerEnv+"="+t.String())
	cmd.ExtraFiles = []*os.File{childEnd}
	cmd.Stderr = nil
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
		// Pdeathsig: a helper never outlives a parent that died while waiting for it.
		Pdeathsig: syscall.SIGKILL,
	}
	if err := cmd.Start(); err != nil {
		childEnd.Close()
		return fail(fmt.Errorf("start helper with CLONE_NEWUSER: %w", err))
	}
	childEnd.Close()
	fd, msgErr := recvTriggerFD(cctx, parentEnd)
	werr := cmd.Wait()
	if msgErr != nil {
		if werr != nil {
			return fail(fmt.Errorf("%w (helper: %v)", msgErr, werr))
		}
		return fail(msgErr)
	}
	return fd, nil
}

// recvTriggerFD reads the helper's reply: "x" plus an error message, or "x" with one
// descriptor attached.
func recvTriggerFD(ctx context.Context, f *os.File) (int, error) {
	c, err := net.FileConn(f)
	if err != nil {
		return -1, fmt.Errorf("socket: %w", err)
	}
	defer c.Close()
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return -1, fmt.Errorf("socket is %T, not a unix socket", c)
	}
	if dl, ok := ctx.Deadline(); ok {
		uc.SetReadDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { uc.SetReadDeadline(time.Now()) })
	defer stop()
	buf := make([]byte, 4096)
	oob := make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := uc.ReadMsgUnix(buf, oob)
	if err != nil {
		return -1, fmt.Errorf("read helper reply: %w", err)
	}
	if n == 0 {
		return -1, errors.New("helper exited without a reply")
	}
	var fds []int
	if oobn > 0 {
		msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
		if err != nil {
			return -1, fmt.Errorf("parse helper reply: %w", err)
		}
		for _, m := range msgs {
			r, err := unix.ParseUnixRights(&m)
			if err == nil {
				fds = append(fds, r...)
			}
		}
	}
	if msg := string(buf[1:n]); msg != "" || len(fds) != 1 {
		for _, fd := range fds {
			unix.Close(fd)
		}
		if msg == "" {
			msg = fmt.Sprintf("helper passed %d descriptors, want 1", len(fds))
		}
		return -1, errors.New(msg)
	}
	unix.CloseOnExec(fds[0])
	return fds[0], nil
}

// ProbeShortWindows reports whether triggers with windows that are not a multiple
// of 2 s can be armed on path (empty: the process's own memory pressure file), and
// how: directly (the process holds CAP_SYS_RESOURCE) or through the user-namespace
// helper. It arms and closes a real trigger "some 50000 500000"; the answer is
// cached per path. The reason explains a "no" (e.g. user namespaces refused by
// seccomp or sysctl) or names the way found.
func ProbeShortWindows(ctx context.Context, path string) (ok bool, reason string) {
	if path == "" {
		path, _ = SelfPressurePath("memory")
	}
	if r, found := shortWindowCache.Load(path); found {
		res := r.(shortWindowResult)
		return res.ok, res.reason
	}
	t := Trigger{Stall: 50 * time.Millisecond, Window: MinWindow}
	res := shortWindowResult{}
	if priv, err := HasCapSysResource(); err == nil && priv {
		if fd, err := openTriggerFD(path, t); err == nil {
			unix.Close(fd)
			res = shortWindowResult{true, "process holds CAP_SYS_RESOURCE"}
		} else {
			res = shortWindowResult{false, err.Error()}
		}
	} else if fd, err := openTriggerInUserNS(ctx, path, t); err == nil {
		unix.Close(fd)
		res = shortWindowResult{true, "armed through a user-namespace helper"}
	} else {
		res = shortWindowResult{false, err.Error()}
	}
	if ctx.Err() == nil {
		shortWindowCache.Store(path, res)
	}
	return res.ok, res.reason
}
