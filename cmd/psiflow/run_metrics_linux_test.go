package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestRunExportsReadAndDecodeMetrics: psiflow run -metrics serves what psiflow
// demo -metrics serves, every read and every decoded image among them.
func TestRunExportsReadAndDecodeMetrics(t *testing.T) {
	data := genFolder(t, 10)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	done := make(chan int, 1)
	go func() {
		done <- dispatch(ctx, io.Discard, io.Discard, []string{"run", "-every", "0", "-metrics", addr,
			"-set", "read.dir=" + data, "-set", "epochs=100000", "-set", "decode.resize=32", "-set", "decode.center_crop=32", "imagefolder"})
	}()
	want := []string{"psiflow_read_bytes_total", "psiflow_decode_images_total"}
	var body string
	for ctx.Err() == nil {
		if resp, err := http.Get("http://" + addr + "/metrics"); err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			body = string(b)
			if positive(body, want[0]) && positive(body, want[1]) {
				break
			}
		}
		select {
		case code := <-done:
			t.Fatalf("run ended (exit %d) before its metrics counted reads and decodes:\n%s", code, body)
		case <-time.After(50 * time.Millisecond):
		}
	}
	cancel()
	<-done
	for _, w := range want {
		if !positive(body, w) {
			t.Errorf("no positive %s in the scrape:\n%s", w, body)
		}
	}
}

// positive reports whether a sample of metric name in a Prometheus text scrape is above 0.
func positive(scrape, name string) bool {
	for _, line := range strings.Split(scrape, "\n") {
		if strings.HasPrefix(line, name) {
			f := strings.Fields(line)
			if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil && v > 0 {
				return true
			}
		}
	}
	return false
}
