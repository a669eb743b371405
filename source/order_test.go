package source

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// TestOrderMatchesSamples checks that Order lists exactly what Samples reads, in
// the same order, for several sharding and shuffling options.
func TestOrderMatchesSamples(t *testing.T) {
	dir := t.TempDir()
	var paths []string
	for i := range 23 {
		p := filepath.Join(dir, fmt.Sprintf("%02d.bin", i))
		if err := os.WriteFile(p, []byte(p), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	ds := NewFiles(paths)
	tests := []Options{
		{WorldSize: 1},
		{Rank: 1, WorldSize: 3, Epoch: 2, Seed: 9, Shuffle: true},
		{WorldSize: 1, Epoch: 1, Seed: 4, Shuffle: true, ShuffleBuffer: 5},
	}
	for _, opts := range tests {
		t.Run(fmt.Sprintf("%+v", opts), func(t *testing.T) {
			want, err := ds.Order(opts)
			if err != nil {
				t.Fatal(err)
			}
			it, err := ds.Samples(opts)
			if err != nil {
				t.Fatal(err)
			}
			defer it.Close()
			var got []string
			for {
				s, err := it.Next(context.Background())
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, s.Key)
				s.Release()
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("Samples read %v\nOrder says  %v", got, want)
			}
		})
	}
}
