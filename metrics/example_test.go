package metrics_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/psiflow/psiflow/metrics"
	"github.com/psiflow/psiflow/source"
)

// A program builds one Set, hands its observers to the reader and the decode stage
// (pipelines.Hooks take them) and serves it for -metrics ADDR.
func Example() {
	set, err := metrics.New()
	if err != nil {
		panic(err)
	}
	opts := source.ReaderOptions{Observer: set.Reads} // and decode.StageConfig{Observer: set.Decodes}
	opts.Observer.ObserveRead(source.BackendPread, 1<<20, 2*time.Millisecond, nil)

	srv, err := set.Serve("127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	resp, err := http.Get(srv.URL())
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, "psiflow_read_bytes_total{") {
			fmt.Println(line)
		}
	}
	// Output:
	// psiflow_read_bytes_total{backend="io_uring"} 0
	// psiflow_read_bytes_total{backend="pread"} 1.048576e+06
}
