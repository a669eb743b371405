package main

import (
	"bytes"
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestCommandsWithDefaultFlags runs each launcher command's default path with
// nothing but what it requires (the folder, a socket's consumer aside: serve has
// TestServeDefaults) over a tiny generated folder: each must end with exit 0 and
// deliver every sample. The image front-ends run one spec, so demo -data and
// run imagefolder deliver the same count.
func TestCommandsWithDefaultFlags(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the image pipeline")
	}
	data := genFolder(t, 6) // 12 samples in two classes
	out := filepath.Join(t.TempDir(), "gen")
	samples := regexp.MustCompile(`(?m)^(\d+) samples in`)
	for _, tc := range []struct {
		name    string
		args    []string
		samples string // "" : no summary line to check
		want    string
	}{
		{"demo -data", []string{"demo", "-data", data}, "12", "Memory pressure while running:"},
		{"demo", []string{"demo", "-items", "500"}, "500", "sources gated"},
		{"run imagefolder", []string{"run", "-every", "0", "-set", "read.dir=" + data, "imagefolder"}, "12", "Memory pressure while running:"},
		{"run demo", []string{"run", "-every", "0", "demo"}, "2000", "Memory pressure while running:"},
		{"validate", []string{"validate", "imagefolder", "demo", "webdataset", "tables"}, "", "valid"},
		{"stages", []string{"stages"}, "", "decode (sample → image)"},
		{"gen jpeg", []string{"gen", "jpeg", "-out", out, "-n", "3"}, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := dispatch(context.Background(), &stdout, &stderr, tc.args)
			if code != 0 {
				t.Fatalf("exit %d:\n%s\n%s", code, stdout.String(), stderr.String())
			}
			if tc.samples != "" {
				m := samples.FindStringSubmatch(stdout.String())
				if m == nil || m[1] != tc.samples {
					t.Errorf("want %s samples delivered:\n%s", tc.samples, stdout.String())
				}
			}
			if !strings.Contains(stdout.String(), tc.want) {
				t.Errorf("output lacks %q:\n%s", tc.want, stdout.String())
			}
		})
	}
}
