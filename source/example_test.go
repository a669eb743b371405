package source_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/psiflow/psiflow/source"
)

// Read one file with the reader the host supports, into a pool buffer.
func ExampleNewReader() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "hello.txt")
	os.WriteFile(path, []byte("hello, reader"), 0o644)

	pool, _ := source.NewPool(4, 64<<10)
	defer pool.Close()
	r, err := source.NewReader(source.ReaderOptions{QueueDepth: 4, Buffers: pool})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer r.Close()
	f, _ := r.Open(path)
	defer f.Close()
	ctx := context.Background()
	buf, _ := source.Admit(ctx, nil, pool, int(f.Size))
	defer buf.Release()
	r.Submit(source.Request{File: f, Buf: buf.Bytes()})
	out := make([]source.Completion, 1)
	r.Reap(ctx, out, 1)
	fmt.Println(string(out[0].Buf[:out[0].N]), out[0].Err)
	// Output: hello, reader <nil>
}

// Iterate a directory of files as rank 1 of 2, then resume from a checkpoint.
func ExampleFiles_Samples() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	for i := range 6 {
		os.WriteFile(filepath.Join(dir, fmt.Sprintf("%d.txt", i)), []byte(fmt.Sprint("sample ", i)), 0o644)
	}
	ds, _ := source.Dir(dir, ".txt")
	opts := source.Options{Rank: 1, WorldSize: 2}
	it, _ := ds.Samples(opts)
	s, _ := it.Next(context.Background())
	fmt.Println(string(s.Field("txt")))
	s.Release()
	pos := it.Position()
	it.Close()

	opts.Resume = &pos
	it, _ = ds.Samples(opts)
	defer it.Close()
	for {
		s, err := it.Next(context.Background())
		if err == io.EOF {
			break
		}
		fmt.Println(string(s.Field("txt")))
		s.Release()
	}
	// Output:
	// sample 1
	// sample 3
	// sample 5
}

// A sample names its image for a decode stage (decode.Images reads it this
// way): the field called jpg, jpeg or png, else its only field, with its
// dataset index and epoch; a tar sample without its image is an error naming
// what it has.
func ExampleSample_EncodedImage() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	os.WriteFile(filepath.Join(dir, "cat.JPEG"), []byte("not really a JPEG"), 0o644)
	ds, _ := source.Dir(dir, ".JPEG")
	it, _ := ds.Samples(source.Options{Epoch: 2})
	defer it.Close()
	s, _ := it.Next(context.Background())
	defer s.Release()
	key, data, index, epoch, err := s.EncodedImage()
	fmt.Println(filepath.Base(key), string(data), index, epoch, err)

	tarSample := &source.Sample{Key: "shard0/42", Shard: "shard0.tar", Fields: []source.Field{{Name: "cls"}, {Name: "json"}}}
	_, _, _, _, err = tarSample.EncodedImage()
	fmt.Println(err)
	// Output:
	// cat.JPEG not really a JPEG 0 2 <nil>
	// tar shard0.tar at offset 0: sample "shard0/42" has no member "shard0/42.jpg" (it has shard0/42.cls, shard0/42.json)
}

// A dataset folder that holds nothing to read is an error that says what was
// looked for and what was found.
func ExampleDir_empty() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("x"), 0o644)
	os.WriteFile(filepath.Join(dir, "photo.JPG"), []byte("x"), 0o644)

	d, err := source.Dir(dir, ".jpg")
	fmt.Println(len(d.Paths()), err)
	_, err = source.Dir(dir, ".png")
	fmt.Println(errors.Is(err, source.ErrEmptyDataset))
	// Output:
	// 1 <nil>
	// true
}

// The sharding a launcher should announce before it reads anything.
func ExampleEnvSharding() {
	os.Setenv("RANK", "1")
	os.Setenv("WORLD_SIZE", "4")
	defer os.Unsetenv("RANK")
	defer os.Unsetenv("WORLD_SIZE")
	sh, err := source.EnvSharding()
	fmt.Println(sh, err)
	// Output:
	// rank 1 of 4 (RANK and WORLD_SIZE from the environment): this process reads 1/4 of each epoch (files: every 4-th entry of the epoch's order, the same count on every rank; tar shards and tables: every 4-th shard) <nil>
}
