// The tests run the loader against the fake CUDA driver (internal/fakecuda), which
// is built and loaded on Linux only.

//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/psiflow/psiflow/gpu/cuda"
	"github.com/psiflow/psiflow/internal/fakecuda"
	"github.com/psiflow/psiflow/internal/harness/protocol"
	"github.com/psiflow/psiflow/source/synth"
)

// TestEnds runs the loader to each end over a small folder, with -verify where
// the device keeps its bytes, and reads its protocol lines.
func TestEnds(t *testing.T) {
	dir := t.TempDir()
	if _, err := synth.JPEGFiles(dir, 50, synth.Image{Width: 64, Height: 48}, 1); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		end    string
		verify bool
		device string
	}{
		{"host", false, ""},
		{"sim", false, "simulated"},
		{"sim", true, "simulated"},
		{"cuda", true, "fake CUDA device"},
	} {
		t.Run(tc.end, func(t *testing.T) {
			if tc.end == "cuda" {
				t.Setenv(cuda.EnvLibrary, fakecuda.Build(t, fakecuda.Full))
			}
			args := []string{"-data", dir, "-end", tc.end, "-batch", "8", "-resize", "32", "-crop", "32", "-epochs", "2"}
			if tc.verify {
				args = append(args, "-verify")
			}
			c, err := parse(args)
			if err != nil {
				t.Fatal(err)
			}
			var out, infoOut bytes.Buffer
			em := protocol.NewEmitter(&out)
			if err := run(context.Background(), c, em, &infoOut); err != nil {
				t.Fatal(err)
			}
			var info map[string]any
			sc := bufio.NewScanner(&infoOut)
			for sc.Scan() {
				var m map[string]any
				if json.Unmarshal(sc.Bytes(), &m) == nil && m["end"] != nil {
					info = m
				}
			}
			if info == nil || info["samples"].(float64) != 100 {
				t.Fatalf("info line %v, want 100 samples (2 epochs of 50)", info)
			}
			if tc.device != "" && !strings.Contains(info["device"].(string), tc.device) {
				t.Errorf("device %q, want %q", info["device"], tc.device)
			}
			if tc.verify && info["verified_batches"].(float64) != 14 {
				t.Errorf("verified %v batches, want 14", info["verified_batches"])
			}
			if em.Samples() != 100 {
				t.Errorf("protocol counted %d samples", em.Samples())
			}
		})
	}
	t.Cleanup(fakecuda.Cleanup)
}

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{{}, {"-data", "x", "-end", "tpu"}, {"-data", "x", "-batch", "0"}} {
		if _, err := parse(args); err == nil {
			t.Errorf("parse(%v) succeeded", args)
		}
	}
}
