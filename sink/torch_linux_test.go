//go:build linux

package sink

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/psiflow/psiflow/flow"
	"golang.org/x/sys/unix"
)

// goClient is a Go implementation of the Python side of the protocol, so the
// sink's own behaviour is tested without Python (python/tests test the module).
type goClient struct {
	c   *net.UnixConn
	mem []byte
}

func dialTorch(t *testing.T, sock string) *goClient {
	t.Helper()
	c, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: sock, Net: "unixpacket"})
	if err != nil {
		t.Fatal(err)
	}
	return &goClient{c: c}
}

// next reads one message, mapping the ring when it is the hello.
func (g *goClient) next() (torchMsg, error) {
	buf := make([]byte, 1<<16)
	oob := make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := g.c.ReadMsgUnix(buf, oob)
	if err != nil {
		return torchMsg{}, err
	}
	if n == 0 {
		return torchMsg{}, errors.New("EOF")
	}
	var m torchMsg
	if err := json.Unmarshal(buf[:n], &m); err != nil {
		return m, err
	}
	if m.T == "hello" {
		msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
		if err != nil || len(msgs) != 1 {
			return m, fmt.Errorf("hello without a descriptor: %v", err)
		}
		fds, err := unix.ParseUnixRights(&msgs[0])
		if err != nil || len(fds) != 1 {
			return m, fmt.Errorf("hello rights: %v %v", fds, err)
		}
		defer unix.Close(fds[0])
		g.mem, err = unix.Mmap(fds[0], 0, m.Slots*int(m.SlotBytes), unix.PROT_READ, unix.MAP_SHARED)
		if err != nil {
			return m, err
		}
		return g.next()
	}
	return m, nil
}

func (g *goClient) send(s string) error { _, err := g.c.Write([]byte(s)); return err }

func (g *goClient) release(slot int) error {
	return g.send(fmt.Sprintf(`{"t":"release","slot":%d}`, slot))
}

func (g *goClient) close() {
	if g.mem != nil {
		unix.Munmap(g.mem)
	}
	g.c.Close()
}

func newTorch(t *testing.T, slots int) *Torch {
	t.Helper()
	tr, err := NewTorch(TorchConfig{Socket: filepath.Join(t.TempDir(), "t.sock"), Slots: slots, Keys: true, CloseWait: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close(nil) })
	return tr
}

// Every batch arrives once, in order, with its bytes, labels and keys, read
// from the shared ring; the budget returns to zero.
func TestTorchDeliversEveryBatch(t *testing.T) {
	tr := newTorch(t, 3)
	const batches, per = 20, 4
	errc := make(chan error, 1)
	go func() {
		defer close(errc)
		for k := range batches {
			if err := tr.Consume(context.Background(), testBatch(k*per, per, 5, 7)); err != nil {
				errc <- err
				return
			}
		}
		errc <- tr.Close(nil)
	}()
	g := dialTorch(t, tr.Socket())
	defer g.close()
	seen := 0
	for {
		m, err := g.next()
		if err != nil {
			t.Fatal(err)
		}
		if m.T == "end" {
			if m.Batches != batches {
				t.Errorf("end says %d batches, want %d", m.Batches, batches)
			}
			break
		}
		if m.T != "batch" || m.Seq != int64(seen+1) {
			t.Fatalf("message %+v, want batch %d", m, seen+1)
		}
		sample := 3 * 5 * 7
		for i := range per {
			idx := seen*per + i
			if err := checkSample(idx, g.mem[m.Offset+int64(i*sample):m.Offset+int64((i+1)*sample)]); err != nil {
				t.Fatal(err)
			}
			if m.Labels[i] != int64(idx%3) || m.Keys[i] != fmt.Sprintf("class%d/img%05d.jpg", idx%3, idx) {
				t.Fatalf("sample %d: label %d key %q", idx, m.Labels[i], m.Keys[i])
			}
		}
		seen++
		_ = g.release(m.Slot) // after the last batch the sink may have closed already

	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if seen != batches {
		t.Fatalf("got %d batches, want %d", seen, batches)
	}
	if b := tr.Budget(); b.InUse() != 0 || b.MaxInUse() > 3*int64(per*3*5*7) {
		t.Errorf("budget in use %d (max %d), want 0 and at most 3 batches", b.InUse(), b.MaxInUse())
	}
}

// With every slot in Python, Consume waits (backpressure) until one comes back.
func TestTorchBackpressure(t *testing.T) {
	tr := newTorch(t, 2)
	g := dialTorch(t, tr.Socket())
	defer g.close()
	ctx := context.Background()
	for k := range 2 {
		if err := tr.Consume(ctx, testBatch(k, 1, 2, 2)); err != nil {
			t.Fatal(err)
		}
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	err := tr.Consume(short, testBatch(2, 1, 2, 2))
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("third batch with both slots held: %v, want to wait until the deadline", err)
	}
	if in := tr.Budget().InUse(); in != 2*12 {
		t.Errorf("budget in use %d, want two batches (24 bytes)", in)
	}
	m, err := g.next()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- tr.Consume(ctx, testBatch(2, 1, 2, 2)) }()
	if err := g.release(m.Slot); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("after a release: %v", err)
	}
	if sent, rel := tr.Counts(); sent != 3 || rel != 1 {
		t.Errorf("sent %d released %d, want 3 and 1", sent, rel)
	}
}

// A consumer that says close and hangs up ends Consume with ErrConsumerClosed;
// one that vanishes ends it with an error that says so; both while Consume waits.
func TestTorchConsumerGoes(t *testing.T) {
	for _, tc := range []struct {
		name  string
		bye   bool
		check func(error) bool
	}{
		{"close", true, func(err error) bool { return errors.Is(err, ErrConsumerClosed) }},
		{"vanish", false, func(err error) bool {
			return err != nil && !errors.Is(err, ErrConsumerClosed) && strings.Contains(err.Error(), "without closing")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTorch(t, 1)
			g := dialTorch(t, tr.Socket())
			ctx := context.Background()
			if err := tr.Consume(ctx, testBatch(0, 1, 2, 2)); err != nil {
				t.Fatal(err)
			}
			if _, err := g.next(); err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			var err error
			wg.Go(func() { err = tr.Consume(ctx, testBatch(1, 1, 2, 2)) }) // waits: the only slot is held
			if tc.bye {
				if err := g.send(`{"t":"close","slot":0}`); err != nil {
					t.Fatal(err)
				}
			}
			g.close()
			wg.Wait()
			if !tc.check(err) {
				t.Fatalf("Consume after the consumer went: %v", err)
			}
			if err := tr.Close(err); err != nil {
				t.Fatal(err)
			}
			if in := tr.Budget().InUse(); in != 0 {
				t.Errorf("budget in use %d after Close, want 0", in)
			}
		})
	}
}

// A Go-side failure reaches the consumer as an error message.
func TestTorchGoFailureReachesConsumer(t *testing.T) {
	tr := newTorch(t, 2)
	g := dialTorch(t, tr.Socket())
	defer g.close()
	if err := tr.Consume(context.Background(), testBatch(0, 1, 2, 2)); err != nil {
		t.Fatal(err)
	}
	if err := tr.Close(errors.New(`decode "x.jpg": corrupt`)); err != nil {
		t.Fatal(err)
	}
	if m, err := g.next(); err != nil || m.T != "batch" {
		t.Fatalf("first message %+v %v, want the batch", m, err)
	}
	m, err := g.next()
	if err != nil || m.T != "error" || m.Message != `decode "x.jpg": corrupt` {
		t.Fatalf("second message %+v %v, want the error", m, err)
	}
}

// A consumer that releases a slot it does not hold breaks the protocol.
func TestTorchBadRelease(t *testing.T) {
	tr := newTorch(t, 1)
	g := dialTorch(t, tr.Socket())
	defer g.close()
	ctx := context.Background()
	if err := tr.Consume(ctx, testBatch(0, 1, 2, 2)); err != nil {
		t.Fatal(err)
	}
	if err := g.release(5); err != nil {
		t.Fatal(err)
	}
	err := tr.Consume(ctx, testBatch(1, 1, 2, 2))
	if err == nil || !strings.Contains(err.Error(), "slot 5") {
		t.Fatalf("Consume after a bad release: %v, want an error naming slot 5", err)
	}
}

func TestTorchConfigAndSizes(t *testing.T) {
	if _, err := NewTorch(TorchConfig{}); err == nil {
		t.Error("no socket: no error")
	}
	tr := newTorch(t, 2)
	g := dialTorch(t, tr.Socket())
	defer g.close()
	if err := tr.Consume(context.Background(), testBatch(0, 1, 2, 2)); err != nil {
		t.Fatal(err)
	}
	err := tr.Consume(context.Background(), testBatch(0, 400, 4, 4))
	if err == nil || !strings.Contains(err.Error(), "larger than a slot") {
		t.Fatalf("oversized batch: %v", err)
	}
	// Close with nobody waiting on Accept, then Accept: an error, not a hang.
	tr2, err := NewTorch(TorchConfig{Socket: filepath.Join(t.TempDir(), "u.sock")})
	if err != nil {
		t.Fatal(err)
	}
	tr2.Close(nil)
	if err := tr2.Accept(context.Background()); err == nil {
		t.Error("Accept after Close: no error")
	}
}

// Accept gives up when its context ends.
func TestTorchAcceptCancel(t *testing.T) {
	tr := newTorch(t, 1)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := tr.Accept(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Accept with a cancelled context: %v", err)
	}
}

// A budget passed in holds each outstanding batch's bytes until Python releases it.
func TestTorchSharedBudget(t *testing.T) {
	shared, err := flow.NewBudget(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := NewTorch(TorchConfig{Socket: filepath.Join(t.TempDir(), "b.sock"), Slots: 2, Budget: shared, CloseWait: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close(nil)
	g := dialTorch(t, tr.Socket())
	defer g.close()
	ctx := context.Background()
	for k := range 2 {
		if err := tr.Consume(ctx, testBatch(k, 2, 2, 2)); err != nil {
			t.Fatal(err)
		}
	}
	if tr.Budget() != shared || shared.InUse() != 2*24 {
		t.Fatalf("shared budget in use %d, want 48 (two batches of 24 bytes)", shared.InUse())
	}
	m, err := g.next()
	if err != nil {
		t.Fatal(err)
	}
	if err := g.release(m.Slot); err != nil {
		t.Fatal(err)
	}
	// The release is asynchronous: the next Consume can only take the freed slot.
	if err := tr.Consume(ctx, testBatch(2, 2, 2, 2)); err != nil {
		t.Fatal(err)
	}
	if in := shared.InUse(); in != 2*24 {
		t.Errorf("after one release and one more batch: %d in use, want 48", in)
	}
	if err := tr.Close(nil); err != nil {
		t.Fatal(err)
	}
	if in := shared.InUse(); in != 0 {
		t.Errorf("after Close: %d in use, want 0", in)
	}
}

// A second client while the first is served is turned away at once with a
// message saying the socket has its consumer; the first goes on undisturbed.
func TestTorchSecondClientRefused(t *testing.T) {
	tr := newTorch(t, 2)
	errc := make(chan error, 1)
	first := dialTorch(t, tr.Socket())
	defer first.close()
	go func() { errc <- tr.Consume(context.Background(), testBatch(0, 2, 5, 7)) }()
	m, err := first.next()
	if err != nil || m.T != "batch" {
		t.Fatalf("first client: %+v, %v", m, err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	second := dialTorch(t, tr.Socket())
	defer second.close()
	// No deadline needed to pass: the refusal comes before any batch. A generous
	// one keeps a regression from hanging the test.
	_ = second.c.SetReadDeadline(time.Now().Add(30 * time.Second))
	m, err = second.next()
	if err != nil || m.T != "error" || !strings.Contains(m.Message, "already has its consumer") || !strings.Contains(m.Message, tr.Socket()) {
		t.Fatalf("second client got %+v, %v; want an error naming the socket", m, err)
	}
	if err := first.release(0); err != nil {
		t.Fatal(err)
	}
	go func() { errc <- tr.Consume(context.Background(), testBatch(2, 2, 5, 7)) }()
	if m, err := first.next(); err != nil || m.T != "batch" || m.Seq != 2 {
		t.Fatalf("first client after the refusal: %+v, %v", m, err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

// With Slots 0 the ring's length comes from the first batch: the hello says it, the
// budget holds that many batches, and Consume waits once that many are in Python.
func TestTorchAutoSlots(t *testing.T) {
	for _, tc := range []struct {
		name  string
		h, w  int // one sample of 3×h×w uint8 per batch
		slots int
	}{
		{"small", 4, 4, 4},        // 4 KiB (a page): at most 4
		{"medium", 2048, 2900, 3}, // 17.0 MiB: 3 fit in 64 MiB
		{"large", 2048, 3700, 2},  // 21.7 MiB: 2 fit
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTorch(t, 0)
			if tr.Slots() != 0 {
				t.Fatalf("Slots() = %d before the first batch, want 0", tr.Slots())
			}
			g := dialTorch(t, tr.Socket())
			defer g.close()
			ctx := context.Background()
			for k := range tc.slots {
				if err := tr.Consume(ctx, testBatch(k, 1, tc.h, tc.w)); err != nil {
					t.Fatal(err)
				}
			}
			if tr.Slots() != tc.slots {
				t.Fatalf("Slots() = %d, want %d", tr.Slots(), tc.slots)
			}
			m, err := g.next()
			if err != nil {
				t.Fatal(err)
			}
			if want := tc.slots * int(tr.slotBytes); len(g.mem) != want {
				t.Errorf("mapped %d bytes, want %d slots of %d", len(g.mem), tc.slots, tr.slotBytes)
			}
			// every slot is in Python: one more batch waits until one comes back
			done := make(chan error, 1)
			go func() { done <- tr.Consume(ctx, testBatch(tc.slots, 1, tc.h, tc.w)) }()
			select {
			case err := <-done:
				t.Fatalf("batch %d with %d slots in Python: Consume returned %v, want it to wait", tc.slots+1, tc.slots, err)
			case <-time.After(100 * time.Millisecond):
			}
			if err := g.release(m.Slot); err != nil {
				t.Fatal(err)
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestTorchListenOnAccept: with ListenOnAccept, NewTorch makes no socket (a
// client cannot connect, nor is a bad path refused, until then); Accept makes
// it and takes the client; Close removes it. Closed without an Accept, the sink
// leaves the path as it found it.
func TestTorchListenOnAccept(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "t.sock")
	tr, err := NewTorch(TorchConfig{Socket: sock, Slots: 1, ListenOnAccept: true, CloseWait: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the socket exists before Accept: %v", err)
	}
	if c, err := net.Dial("unixpacket", sock); err == nil {
		c.Close()
		t.Fatal("a client connected before Accept")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	accepted := make(chan error, 1)
	go func() { accepted <- tr.Accept(ctx) }()
	var g *goClient
	for g == nil { // until Accept has made the socket
		c, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: sock, Net: "unixpacket"})
		if err == nil {
			g = &goClient{c: c}
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no socket to connect to a minute after Accept: %v", err)
		case <-time.After(5 * time.Millisecond):
		}
	}
	defer g.close()
	if err := <-accepted; err != nil {
		t.Fatal(err)
	}
	if err := tr.Close(nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the socket is left after Close: %v", err)
	}

	// Never accepted: a file at the path is neither refused nor removed.
	other := filepath.Join(dir, "file")
	if err := os.WriteFile(other, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	tr, err = NewTorch(TorchConfig{Socket: other, Slots: 1, ListenOnAccept: true})
	if err != nil {
		t.Fatalf("NewTorch refused a path it does not use yet: %v", err)
	}
	if err := tr.Listen(); err == nil || !strings.Contains(err.Error(), "is not a socket") {
		t.Errorf("Listen on a regular file: %v, want it refused", err)
	}
	if err := tr.Close(nil); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(other); err != nil || string(b) != "x" {
		t.Errorf("the file at the path changed: %q %v", b, err)
	}
}
