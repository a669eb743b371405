//go:build linux

package sink

import (
	"context"
	"encoding/json"
	"net"
	"strings"
	"testing"
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
