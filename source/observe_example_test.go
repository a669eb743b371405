package source_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/psiflow/psiflow/source"
)

// printObserver prints every read it is told of.
type printObserver struct{}

func (printObserver) ObserveRead(b source.Backend, n int, d time.Duration, err error) {
	fmt.Printf("read %d bytes with %s, err=%v\n", n, b, err)
}

// A ReadObserver sees every read a Reader completes (package metrics counts them for
// Prometheus).
func ExampleReadObserver() {
	dir, _ := os.MkdirTemp("", "observer-example")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "hello")
	os.WriteFile(path, []byte("hello"), 0o644)

	r, err := source.NewReader(source.ReaderOptions{Backend: source.BackendPread, Observer: printObserver{}})
	if err != nil {
		panic(err)
	}
	defer r.Close()
	f, err := r.Open(path)
	if err != nil {
		panic(err)
	}
	defer f.Close()
	if err := r.Submit(source.Request{File: f, Buf: make([]byte, 5)}); err != nil {
		panic(err)
	}
	comps := make([]source.Completion, 1)
	if _, err := r.Reap(context.Background(), comps, 1); err != nil {
		panic(err)
	}
	// Output:
	// read 5 bytes with pread, err=<nil>
}
