package sink

import (
	"fmt"
	"strings"
)

// Open returns the sink a spec names, the form the launcher's -sink flag takes:
//
//	null                 drop every batch (count only)
//	arrow:PATH           an Arrow IPC file
//	arrow:unix:PATH      an Arrow IPC stream to the first client of a Unix socket
//	parquet:DIR          a folder of Parquet files
//	torch:PATH           the PyTorch consumer on a Unix socket (see [Torch])
//
// A file or folder that already holds data is refused ([OpenWith] overwrites).
func Open(spec string) (Sink, error) { return OpenWith(spec, OpenOptions{}) }

// OpenOptions are the choices [OpenWith] passes to the sink it opens.
type OpenOptions struct {
	// Overwrite lets arrow:PATH and parquet:DIR replace what is there (see
	// [ArrowConfig.Overwrite] and [ParquetConfig.Overwrite]).
	Overwrite bool
}

// OpenWith is [Open] with options.
func OpenWith(spec string, o OpenOptions) (Sink, error) {
	kind, arg, _ := strings.Cut(spec, ":")
	need := func() error {
		if arg == "" {
			return fmt.Errorf("sink %q: %s needs a path after the colon", spec, kind)
		}
		return nil
	}
	switch kind {
	case "null":
		if arg != "" {
			return nil, fmt.Errorf("sink %q: null takes no argument", spec)
		}
		return NewNull(), nil
	case "arrow":
		if err := need(); err != nil {
			return nil, err
		}
		if p, ok := strings.CutPrefix(arg, "unix:"); ok {
			return NewArrow(ArrowConfig{Socket: p})
		}
		return NewArrow(ArrowConfig{Path: arg, Overwrite: o.Overwrite})
	case "parquet":
		if err := need(); err != nil {
			return nil, err
		}
		return NewParquet(ParquetConfig{Dir: arg, Overwrite: o.Overwrite})
	case "torch":
		if err := need(); err != nil {
			return nil, err
		}
		return NewTorch(TorchConfig{Socket: arg})
	}
	return nil, fmt.Errorf("sink %q: unknown kind %q (want null, arrow:PATH, arrow:unix:PATH, parquet:DIR or torch:SOCKET)", spec, kind)
}
