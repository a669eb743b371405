package synth

import (
	"go.uber.org/goleak"
	"testing"
)

func TestJPEGSizeIsImageNetLike(t *testing.T) {
	var total int
	for i := range 4 {
		b, err := JPEG(Image{}, 1, i)
		if err != nil {
			t.Fatal(err)
		}
		total += len(b)
	}
	avg := total / 4
	t.Logf("average JPEG %d bytes", avg)
	if avg < 95_000 || avg > 125_000 {
		t.Fatalf("average size %d bytes, want about 110 KiB", avg)
	}
}

func TestWriters(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name  string
		write func() ([]string, error)
		want  int
	}{
		{"jpeg", func() ([]string, error) { return JPEGFiles(dir+"/jpg", 3, Image{Width: 64, Height: 48}, 1) }, 3},
		{"tar", func() ([]string, error) {
			return TarShards(dir+"/tar", Shards{Shards: 2, Samples: 3, Image: Image{Width: 32, Height: 32}}, 1)
		}, 2},
		{"parquet", func() ([]string, error) {
			return ParquetFiles(dir+"/pq", Table{Files: 2, Batches: 3, Rows: 10, PayloadBytes: 8}, 1)
		}, 2},
		{"arrow", func() ([]string, error) {
			return ArrowFiles(dir+"/ipc", Table{Files: 1, Batches: 2, Rows: 5, PayloadBytes: 8}, 1)
		}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			paths, err := tc.write()
			if err != nil {
				t.Fatal(err)
			}
			if len(paths) != tc.want {
				t.Fatalf("%d files, want %d", len(paths), tc.want)
			}
		})
	}
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestNoiseForSize(t *testing.T) {
	im := Image{Width: 200, Height: 150}
	for _, target := range []int{8000, 20000} {
		noise, err := NoiseForSize(im, target, 1)
		if err != nil {
			t.Fatal(err)
		}
		im.Noise = noise
		b, err := JPEG(im, 1, 7)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) < target*8/10 || len(b) > target*12/10 {
			t.Fatalf("target %d: noise %d gives %d bytes", target, noise, len(b))
		}
	}
}
