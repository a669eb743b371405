package main

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestShardingFromEnvironment runs the front-ends as torchrun's ranks would:
// every rank of 3 reads the same number of the 20 files (7, one padded), and a
// rank that would get nothing of its own (RANK=25 of 30) is an error naming
// rank, world size and dataset size, from demo and from run.
func TestShardingFromEnvironment(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the image pipeline")
	}
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	var out bytes.Buffer
	if code := dispatch(context.Background(), &out, &out, []string{"gen", "jpeg", "-out", filepath.Join(data, "c0"), "-n", "20", "-width", "64", "-height", "48"}); code != 0 {
		t.Fatalf("gen: exit %d: %s", code, out.String())
	}
	samples := regexp.MustCompile(`(?m)^(\d+) samples in`)
	for rank := range 3 {
		t.Setenv("RANK", fmt.Sprint(rank))
		t.Setenv("WORLD_SIZE", "3")
		var stdout, stderr bytes.Buffer
		code := dispatch(context.Background(), &stdout, &stderr, []string{"demo", "-data", data})
		m := samples.FindStringSubmatch(stdout.String())
		if code != 0 || m == nil || m[1] != "7" {
			t.Fatalf("demo as rank %d of 3: exit %d, want 7 samples:\n%s\n%s", rank, code, stdout.String(), stderr.String())
		}
	}
	t.Setenv("RANK", "25")
	t.Setenv("WORLD_SIZE", "30")
	t.Setenv("DATA", data)
	for _, args := range [][]string{{"demo", "-data", data}, {"run", "../../pipelines/imagefolder.yaml"}} {
		var stdout, stderr bytes.Buffer
		code := dispatch(context.Background(), &stdout, &stderr, args)
		msg := stderr.String()
		if code == 0 || !strings.Contains(msg, "rank 25 of world size 30") || !strings.Contains(msg, "the dataset has 20") {
			t.Errorf("%v as rank 25 of 30 on 20 files: exit %d, stderr %q: want an error naming rank, world size and dataset size", args, code, msg)
		}
	}
}

// TestServeShardingFlags: -rank and -world-size are checked when serve starts,
// before anyone connects.
func TestServeShardingFlags(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{{"-rank", "2", "-world-size", "2"}, {"-world-size", "-1"}} {
		var out bytes.Buffer
		all := append([]string{"serve", "-socket", filepath.Join(dir, "s.sock"), "-data", dir}, args...)
		if code := dispatch(context.Background(), &out, &out, all); code != 2 || !strings.Contains(out.String(), "out of range") {
			t.Errorf("%v: exit %d, %q: want a usage error saying out of range", args, code, out.String())
		}
	}
}

// TestServeTransformFlags: the training transform's flags are checked when
// serve starts.
func TestServeTransformFlags(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-normalize", "bogus"}, "-normalize"},
		{[]string{"-random-resized-crop", "64", "-scale-min", "0.9", "-scale-max", "0.1"}, "scale"},
		{[]string{"-flip", "1.5"}, "flip"},
	} {
		var out bytes.Buffer
		all := append([]string{"serve", "-socket", filepath.Join(dir, "s.sock"), "-data", dir}, tc.args...)
		if code := dispatch(context.Background(), &out, &out, all); code != 2 || !strings.Contains(out.String(), tc.want) {
			t.Errorf("%v: exit %d, %q: want a usage error naming %s", tc.args, code, out.String(), tc.want)
		}
	}
}
