package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestGen(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		args  []string
		code  int
		out   string
		files int
		ext   string
	}{
		{[]string{"gen", "jpeg", "-n", "3", "-width", "40", "-height", "30", "-out", dir + "/j"}, 0, "wrote 3 jpeg files", 3, ".jpg"},
		{[]string{"gen", "tar", "-shards", "2", "-samples", "3", "-width", "16", "-height", "16", "-out", dir + "/t"}, 0, "wrote 2 tar files", 2, ".tar"},
		{[]string{"gen", "parquet", "-files", "1", "-batches", "2", "-rows", "5", "-payload", "8", "-out", dir + "/p"}, 0, "wrote 1 parquet files", 1, ".parquet"},
		{[]string{"gen", "arrow", "-files", "2", "-batches", "1", "-rows", "5", "-out", dir + "/a"}, 0, "wrote 2 arrow files", 2, ".arrow"},
		{[]string{"gen", "jpeg", "-n", "2", "-width", "120", "-height", "90", "-bytes", "9000", "-out", dir + "/b"}, 0, "for about 9000 bytes per image", 2, ".jpg"},
		{[]string{"gen", "jpeg", "-n", "2", "-width", "120", "-height", "90", "-bytes", "9KiB", "-out", dir + "/k"}, 0, "for about 9216 bytes per image", 2, ".jpg"},
		{[]string{"gen", "arrow", "-payload", "1PiB", "-out", dir + "/big"}, 2, "flag -payload: 1PiB is out of range", 0, ""},
		{[]string{"gen", "jpeg", "-n", "3"}, 2, "-out is required", 0, ""},
		{[]string{"gen", "png", "-out", dir}, 2, `unknown kind "png"`, 0, ""},
		{[]string{"gen", "jpeg", "-n", "0", "-out", dir}, 2, "flag -n: 0 is out of range", 0, ""},
		{[]string{"gen"}, 2, "missing kind", 0, ""},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args[:min(2, len(tc.args))], " ")+"/"+tc.out, func(t *testing.T) {
			var out bytes.Buffer
			code := dispatch(context.Background(), &out, &out, tc.args)
			if code != tc.code || !strings.Contains(out.String(), tc.out) {
				t.Fatalf("exit %d, output:\n%s", code, out.String())
			}
			if tc.files == 0 {
				return
			}
			m, _ := filepath.Glob(filepath.Join(tc.args[len(tc.args)-1], "*"+tc.ext))
			if len(m) != tc.files {
				t.Fatalf("%d %s files, want %d", len(m), tc.ext, tc.files)
			}
			for _, p := range m {
				if st, err := os.Stat(p); err != nil || st.Size() == 0 {
					t.Fatalf("%s: %v", p, err)
				}
			}
		})
	}
}
