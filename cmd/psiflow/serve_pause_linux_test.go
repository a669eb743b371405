//go:build linux

package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/psiflow/psiflow/memory/pause"
	"github.com/psiflow/psiflow/sink"
)

// TestPausesBeforeTheConsumerReachIt: pause events from before the consumer
// connected (serve's start-up, its wait for a consumer) reach the consumer
// when it connects, in order and marked as earlier, the oldest beyond
// earlyKept dropped and counted; they used to go to serve's stdout only, where
// the training loop does not look. Events after the connection follow them.
func TestPausesBeforeTheConsumerReachIt(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sock := filepath.Join(t.TempDir(), "s.sock")
	tr, err := sink.NewTorch(sink.TorchConfig{Socket: sock, Slots: 2, CloseWait: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	a := newPauseAnnouncer(ctx, tr)
	r := pause.Reading{At: time.Now(), Current: 1 << 20, Limit: 256 << 20, Others: 239 << 20, Reserve: 16 << 20}
	const early = earlyKept + 3
	for i := range early {
		k := pause.Paused
		if i%2 == 1 {
			k = pause.Resumed
		}
		a.announce(pause.Event{Kind: k, Reading: r, Floor: 32 << 20, Lasted: time.Duration(i) * time.Second, Timeout: pause.DefaultTimeout})
	}
	accepted := make(chan error, 1)
	go func() { accepted <- tr.Accept(ctx) }()
	c, err := dialServe(ctx, sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	if err := <-accepted; err != nil {
		t.Fatal(err)
	}
	a.connected()
	a.announce(pause.Event{Kind: pause.Paused, Reading: r, Floor: 32 << 20, Timeout: pause.DefaultTimeout})
	a.close()
	if err := tr.Close(nil); err != nil {
		t.Fatal(err)
	}
	type info struct {
		Kind    string  `json:"kind"`
		Message string  `json:"message"`
		Lasted  float64 `json:"lasted_s"`
	}
	var got []info
	for {
		// torchMessage has no info field: read the raw message.
		buf := make([]byte, 1<<16)
		n, err := c.c.Read(buf)
		if err != nil || n == 0 {
			t.Fatalf("reading: %v after %d pause messages", err, len(got))
		}
		var m struct {
			T    string `json:"t"`
			Info info   `json:"info"`
		}
		if err := json.Unmarshal(buf[:n], &m); err != nil {
			t.Fatal(err)
		}
		if m.T == "end" {
			break
		}
		if m.T != "pause" {
			t.Fatalf("message %q before the end", m.T)
		}
		got = append(got, m.Info)
	}
	if len(got) != earlyKept+1 {
		t.Fatalf("%d pause messages, want the %d kept from before the connection and the one after", len(got), earlyKept+1)
	}
	for i, m := range got[:earlyKept] {
		// the kept ones are the last earlyKept of the early events, in order
		if want := float64(i + early - earlyKept); m.Lasted != want {
			t.Errorf("message %d: lasted %v, want %v (order, or the wrong ones kept)", i, m.Lasted, want)
		}
		if !strings.HasPrefix(m.Message, "(before this consumer connected") {
			t.Errorf("message %d is not marked as earlier: %q", i, m.Message)
		}
	}
	if want := "(before this consumer connected; 3 older pause messages not kept) "; !strings.HasPrefix(got[0].Message, want) {
		t.Errorf("first message %q, want it to start %q", got[0].Message, want)
	}
	if last := got[earlyKept]; last.Kind != "paused" || strings.HasPrefix(last.Message, "(before") {
		t.Errorf("the event after the connection: %+v", last)
	}
}
