package sink_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/psiflow/psiflow/sink"
	"github.com/psiflow/psiflow/tensor"
)

// twoSamples is a batch of two 1×2×2 uint8 samples.
func twoSamples() *tensor.Batch {
	return &tensor.Batch{
		Keys: []string{"cat/1.jpg", "dog/2.jpg"}, Labels: []int64{0, 1},
		Tensor: tensor.Tensor{DType: tensor.Uint8, Shape: []int{2, 1, 2, 2}, U8: []byte{1, 2, 3, 4, 5, 6, 7, 8}},
	}
}

// A sink from the launcher's -sink spelling.
func ExampleOpen() {
	s, err := sink.Open("null")
	if err != nil {
		panic(err)
	}
	_ = s.Consume(context.Background(), twoSamples())
	_ = s.Close(nil)
	b, n, bytes := s.(*sink.Null).Counts()
	fmt.Println(b, "batch,", n, "samples,", bytes, "bytes")
	_, err = sink.Open("tensorboard:x")
	fmt.Println(err)
	// Output:
	// 1 batch, 2 samples, 8 bytes
	// sink "tensorboard:x": unknown kind "tensorboard" (want null, arrow:PATH, arrow:unix:PATH, parquet:DIR or torch:SOCKET)
}

// Batches into a folder of Parquet files, one row per sample.
func ExampleNewParquet() {
	dir, _ := os.MkdirTemp("", "psiflow-example")
	defer os.RemoveAll(dir)
	p, err := sink.NewParquet(sink.ParquetConfig{Dir: filepath.Join(dir, "out")})
	if err != nil {
		panic(err)
	}
	if err := p.Consume(context.Background(), twoSamples()); err != nil {
		panic(err)
	}
	if err := p.Close(nil); err != nil {
		panic(err)
	}
	for _, f := range p.Files() {
		fmt.Println(filepath.Base(f))
	}
	// Output: part-00000.parquet
}

// An Arrow IPC file that package source (or pyarrow.ipc.open_file) reads back.
func ExampleNewArrow() {
	dir, _ := os.MkdirTemp("", "psiflow-example")
	defer os.RemoveAll(dir)
	a, err := sink.NewArrow(sink.ArrowConfig{Path: filepath.Join(dir, "batches.arrow")})
	if err != nil {
		panic(err)
	}
	if err := a.Consume(context.Background(), twoSamples()); err != nil {
		panic(err)
	}
	fmt.Println(a.Close(nil))
	// Output: <nil>
}
