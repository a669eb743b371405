package umabuf_test

import (
	"fmt"

	"github.com/psiflow/psiflow/source"
	"github.com/psiflow/psiflow/source/umabuf"
	"github.com/psiflow/psiflow/uma"
)

// Reads that land in UMA memory: a registered pool, adapted as the readers'
// buffer provider.
func Example() {
	u, err := uma.New(uma.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer u.Close()
	pool, err := u.NewPool("read-buffers", 64<<20, uma.ArenaOptions{Registered: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pool.Close()
	bufs, err := umabuf.New(pool)
	if err != nil {
		fmt.Println(err)
		return
	}
	opts := source.Options{Buffers: bufs} // pass to flowsrc.Files, source.Files.Samples, ...
	fmt.Println(len(opts.Buffers.Regions()), len(opts.Buffers.Regions()[0])>>20, "MiB registered")
	// Output: 1 64 MiB registered
}
