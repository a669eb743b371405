//go:build linux

package sink

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"
)

// TestTorchAnnounce sends a plan before the first batch and between batches:
// the consumer reads each where it was sent, with its info intact, and the
// protocol's own message types are refused.
func TestTorchAnnounce(t *testing.T) {
	tr := newTorch(t, 2)
	type plan struct {
		Epoch int   `json:"epoch"`
		Count int64 `json:"count"`
	}
	errc := make(chan error, 1)
	go func() {
		defer close(errc)
		for epoch := range 2 {
			if err := tr.Announce(context.Background(), "plan", plan{Epoch: epoch, Count: 4}); err != nil {
				errc <- err
				return
			}
			if err := tr.Consume(context.Background(), testBatch(epoch*4, 4, 5, 7)); err != nil {
				errc <- err
				return
			}
		}
		errc <- tr.Close(nil)
	}()
	c, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: tr.Socket(), Net: "unixpacket"})
	if err != nil {
		t.Fatal(err)
	}
	g := &goClient{c: c}
	defer g.close()
	var got []string
	for {
		// goClient.next maps the hello and decodes torchMsg, which has no
		// info: read the plans raw.
		buf := make([]byte, 1<<16)
		oob := make([]byte, 64)
		n, _, _, _, err := c.ReadMsgUnix(buf, oob)
		if err != nil {
			t.Fatal(err)
		}
		var m struct {
			T    string `json:"t"`
			Slot int    `json:"slot"`
			Info *plan  `json:"info"`
		}
		if err := json.Unmarshal(buf[:n], &m); err != nil {
			t.Fatal(err)
		}
		switch m.T {
		case "plan":
			if m.Info == nil || m.Info.Count != 4 {
				t.Fatalf("plan %s", buf[:n])
			}
			got = append(got, "plan"+string(rune('0'+m.Info.Epoch)))
		case "batch":
			got = append(got, "batch")
			_ = g.release(m.Slot)
		case "hello":
			got = append(got, "hello")
		case "end":
			if err := <-errc; err != nil {
				t.Fatal(err)
			}
			if s := strings.Join(got, " "); s != "plan0 hello batch plan1 batch" {
				t.Fatalf("messages %q", s)
			}
			for _, kind := range []string{"batch", "hello", "end", "error", ""} {
				if err := tr.Announce(context.Background(), kind, 1); err == nil {
					t.Errorf("Announce(%q) accepted", kind)
				}
			}
			return
		}
	}
}

// TestTorchNext: the consumer's "next" messages reach Next in order, the
// releases between them still free slots, a close ends Next with
// ErrConsumerClosed, and a bad request ends the stream with a message.
func TestTorchNext(t *testing.T) {
	tr := newTorch(t, 2)
	g := dialTorch(t, tr.Socket())
	defer g.close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, want := range []EpochRequest{{Epoch: 3, Start: 7}, {Epoch: 0, Start: 0}} {
		if err := tr.Consume(ctx, testBatch(0, 2, 3, 3)); err != nil {
			t.Fatal(err)
		}
		m, err := g.next()
		for err == nil && m.T != "batch" {
			m, err = g.next()
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := g.release(m.Slot); err != nil {
			t.Fatal(err)
		}
		if err := g.send(fmt.Sprintf(`{"t":"next","epoch":%d,"start":%d}`, want.Epoch, want.Start)); err != nil {
			t.Fatal(err)
		}
		got, err := tr.Next(ctx)
		if err != nil || got != want {
			t.Fatalf("Next: %+v, %v; want %+v", got, err, want)
		}
	}
	if _, released := tr.Counts(); released != 2 {
		t.Fatalf("%d releases counted, want 2", released)
	}
	if err := g.send(`{"t":"close","slot":0}`); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Next(ctx); !errors.Is(err, ErrConsumerClosed) {
		t.Fatalf("Next after close: %v, want ErrConsumerClosed", err)
	}
	for _, tc := range []struct{ msgs []string }{
		{[]string{`{"t":"next","epoch":-1,"start":0}`}},
		{[]string{`{"t":"next","epoch":1}`, `{"t":"next","epoch":2}`}},
	} {
		tr := newTorch(t, 2)
		g := dialTorch(t, tr.Socket())
		if err := tr.Accept(ctx); err != nil {
			t.Fatal(err)
		}
		for _, m := range tc.msgs {
			if err := g.send(m); err != nil {
				t.Fatal(err)
			}
		}
		<-tr.gone.Done()
		if err := context.Cause(tr.gone); err == nil || !strings.Contains(err.Error(), "asked for") {
			t.Errorf("%v: the stream ended with %v, want a message naming the request", tc.msgs, err)
		}
		g.close()
	}
}
