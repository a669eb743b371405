//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// torchClient is the Python module's side of the serve protocol in Go, enough
// to take every batch and hand it back (python/tests test the module itself).
type torchClient struct {
	c   *net.UnixConn
	mem []byte
}

// torchMessage is one message of the protocol (docs/SINK.md).
type torchMessage struct {
	T         string  `json:"t"`
	Slots     int     `json:"slots"`
	SlotBytes int64   `json:"slot_bytes"`
	Slot      int     `json:"slot"`
	DType     string  `json:"dtype"`
	Shape     []int   `json:"shape"`
	Offset    int64   `json:"offset"`
	NBytes    int64   `json:"nbytes"`
	Labels    []int64 `json:"labels"`
	Batches   int64   `json:"batches"`
	Message   string  `json:"message"`
}

// dialServe connects to sock, waiting for it to appear until ctx ends.
func dialServe(ctx context.Context, sock string) (*torchClient, error) {
	for {
		c, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: sock, Net: "unixpacket"})
		if err == nil {
			return &torchClient{c: c}, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("connecting to %s: %w (last: %v)", sock, ctx.Err(), err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// next reads one message, mapping the ring when it is the hello.
func (c *torchClient) next() (torchMessage, error) {
	buf := make([]byte, 1<<16)
	oob := make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := c.c.ReadMsgUnix(buf, oob)
	if err != nil {
		return torchMessage{}, err
	}
	if n == 0 {
		return torchMessage{}, errors.New("connection closed without an end message")
	}
	var m torchMessage
	if err := json.Unmarshal(buf[:n], &m); err != nil {
		return m, err
	}
	if m.T != "hello" {
		return m, nil
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		return m, fmt.Errorf("hello without a descriptor: %v", err)
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		return m, fmt.Errorf("hello rights: %v %v", fds, err)
	}
	defer unix.Close(fds[0])
	if c.mem, err = unix.Mmap(fds[0], 0, m.Slots*int(m.SlotBytes), unix.PROT_READ, unix.MAP_SHARED); err != nil {
		return m, err
	}
	return c.next()
}

func (c *torchClient) release(slot int) error {
	_, err := c.c.Write(fmt.Appendf(nil, `{"t":"release","slot":%d}`, slot))
	return err
}

func (c *torchClient) close() {
	if c.mem != nil {
		_ = unix.Munmap(c.mem)
	}
	_ = c.c.Close()
}

// genFolder writes an ImageFolder of two classes with n small JPEGs each.
func genFolder(t *testing.T, n int) string {
	t.Helper()
	data := filepath.Join(t.TempDir(), "data")
	for _, class := range []string{"cat", "dog"} {
		var out bytes.Buffer
		if code := dispatch(context.Background(), &out, &out, []string{"gen", "jpeg", "-out", filepath.Join(data, class), "-n", fmt.Sprint(n), "-width", "64", "-height", "48"}); code != 0 {
			t.Fatalf("gen: exit %d: %s", code, out.String())
		}
	}
	return data
}

// psiflow serve with nothing but -data and -socket (the memory runtime, the
// pressure gate and every other default as a user gets them) delivers every
// image of the folder once, labelled, and exits 0. It runs as its own process,
// as users run it, since the defaults change process-wide settings
// (oom_score_adj, locked program text).
func TestServeDefaults(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a launcher process")
	}
	const perClass = 24
	data := genFolder(t, perClass)
	sock := filepath.Join(t.TempDir(), "serve.sock")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	serve := exec.CommandContext(ctx, exe)
	serve.Env = append(os.Environ(), envLauncher+"="+strings.Join([]string{"serve", "-data", data, "-socket", sock}, "\x1f"))
	var out bytes.Buffer
	serve.Stdout, serve.Stderr = &out, &out
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	c, err := dialServe(ctx, sock)
	if err != nil {
		_ = serve.Process.Kill()
		_ = serve.Wait()
		t.Fatalf("%v\n%s", err, out.String())
	}
	defer c.close()
	var samples, batches int64
	labels := map[int64]int{}
	for {
		m, err := c.next()
		if err != nil {
			_ = serve.Process.Kill()
			_ = serve.Wait()
			t.Fatalf("reading from serve: %v\n%s", err, out.String())
		}
		if m.T == "error" {
			_ = serve.Wait()
			t.Fatalf("serve failed: %s\n%s", m.Message, out.String())
		}
		if m.T == "end" {
			if m.Batches != batches {
				t.Errorf("end says %d batches, %d received", m.Batches, batches)
			}
			break
		}
		if m.T != "batch" {
			t.Fatalf("unexpected message %+v", m)
		}
		batches++
		if m.DType != "uint8" || len(m.Shape) != 4 || m.Shape[1] != 3 || m.Shape[2] != 224 || m.Shape[3] != 224 {
			t.Errorf("batch %d: %s %v, want uint8 [N 3 224 224] (Resize 256, CenterCrop 224)", batches, m.DType, m.Shape)
		}
		if len(m.Labels) != m.Shape[0] {
			t.Errorf("batch %d: %d labels for %d samples", batches, len(m.Labels), m.Shape[0])
		}
		for _, l := range m.Labels {
			labels[l]++
		}
		samples += int64(m.Shape[0])
		if err := c.release(m.Slot); err != nil {
			t.Fatal(err)
		}
	}
	c.close()
	if err := serve.Wait(); err != nil {
		t.Fatalf("serve: %v\n%s", err, out.String())
	}
	if samples != 2*perClass || labels[0] != perClass || labels[1] != perClass || len(labels) != 2 {
		t.Errorf("%d samples, labels %v; want %d with %d of class 0 and of class 1\n%s", samples, labels, 2*perClass, perClass, out.String())
	}
	if !strings.Contains(out.String(), "budget: follows the cgroup's headroom") {
		t.Errorf("serve did not run under the elastic memory runtime by default:\n%s", out.String())
	}
}

// TestServeSaysCacheHits: serve with a sample cache over two epochs says, per
// epoch and in its summary, how many samples the cache served (the second
// epoch's from the cache; it used to print nothing for them).
func TestServeSaysCacheHits(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a launcher process")
	}
	const perClass = 6
	data := genFolder(t, perClass)
	sock := filepath.Join(t.TempDir(), "serve.sock")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	serve := exec.CommandContext(ctx, exe)
	args := []string{"serve", "-data", data, "-socket", sock, "-epochs", "2", "-cache", "encoded", "-cache-max", "16MiB"}
	serve.Env = append(os.Environ(), envLauncher+"="+strings.Join(args, "\x1f"))
	var out bytes.Buffer
	serve.Stdout, serve.Stderr = &out, &out
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	c, err := dialServe(ctx, sock)
	if err != nil {
		_ = serve.Process.Kill()
		_ = serve.Wait()
		t.Fatalf("%v\n%s", err, out.String())
	}
	defer c.close()
	for {
		m, err := c.next()
		if err != nil || m.T == "error" {
			_ = serve.Process.Kill()
			_ = serve.Wait()
			t.Fatalf("reading from serve: %v %s\n%s", err, m.Message, out.String())
		}
		if m.T == "end" {
			break
		}
		if m.T == "batch" {
			if err := c.release(m.Slot); err != nil {
				t.Fatal(err)
			}
		}
	}
	c.close()
	if err := serve.Wait(); err != nil {
		t.Fatalf("serve: %v\n%s", err, out.String())
	}
	const n = 2 * perClass
	for _, want := range []string{
		fmt.Sprintf("psiflow serve: epoch 1: %d samples, ", n),
		fmt.Sprintf("cache hits 0%% (0 of %d samples from the sample cache)", n),
		fmt.Sprintf("psiflow serve: epoch 2: %d samples, ", n),
		"psiflow serve: sample cache: ",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	// The second epoch's hits: every sample, unless the kernel reclaimed some
	// (the cache is preemptible), so a bound, not an exact count.
	var hits, lookups int
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(line, "psiflow serve: epoch 2: ") {
			if i := strings.Index(line, "% ("); i >= 0 {
				fmt.Sscanf(line[i+3:], "%d of %d", &hits, &lookups)
			}
		}
	}
	if lookups != n || hits < n/2 {
		t.Errorf("epoch 2: %d of %d from the cache, want %d looked up and most of them hits:\n%s", hits, lookups, n, out.String())
	}
}
