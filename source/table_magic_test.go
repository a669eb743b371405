package source

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/psiflow/psiflow/source/synth"
)

// TestTableOfTheOtherFormat names the format of a file read as the other one: an
// Arrow IPC file named .parquet, a Parquet file read as Arrow IPC, and an Arrow
// IPC stream read as a file, instead of a footer-size error.
func TestTableOfTheOtherFormat(t *testing.T) {
	dir := t.TempDir()
	arrowFiles, err := synth.ArrowFiles(filepath.Join(dir, "a"), synth.Table{Files: 1, Batches: 1, Rows: 4, PayloadBytes: 8}, 1)
	if err != nil {
		t.Fatal(err)
	}
	pqFiles, err := synth.ParquetFiles(filepath.Join(dir, "p"), synth.Table{Files: 1, Batches: 1, Rows: 4, PayloadBytes: 8}, 1)
	if err != nil {
		t.Fatal(err)
	}
	misnamed := filepath.Join(dir, "really-arrow.parquet")
	if err := os.Rename(arrowFiles[0], misnamed); err != nil {
		t.Fatal(err)
	}
	stream := filepath.Join(dir, "stream.arrow")
	if err := os.WriteFile(stream, append([]byte{0xff, 0xff, 0xff, 0xff}, make([]byte, 60)...), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		ds   *Tables
		path string
		want string
	}{
		{"Arrow IPC named .parquet", NewParquet([]string{misnamed}), misnamed, "this is an Arrow IPC file (it starts with ARROW1), not Parquet"},
		{"Parquet read as Arrow", NewArrowIPC([]string{pqFiles[0]}), pqFiles[0], "this is a Parquet file (it starts with PAR1), not an Arrow IPC file"},
		{"an Arrow IPC stream", NewArrowIPC([]string{stream}), stream, "this is an Arrow IPC stream"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			it, err := tc.ds.Batches(Options{WorldSize: 1})
			if err == nil {
				_, err = it.Next(context.Background())
				it.Close()
			}
			var re *ReadError
			if !errors.As(err, &re) || re.Path != tc.path || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "footer size") {
				t.Fatalf("error %v, want a ReadError naming %s and saying %q", err, tc.path, tc.want)
			}
		})
	}
}
