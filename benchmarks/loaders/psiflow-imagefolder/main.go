package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"syscall"

	"github.com/psiflow/psiflow/benchmarks/protocol"
	"github.com/psiflow/psiflow/flow"
	"github.com/psiflow/psiflow/source"
	"github.com/psiflow/psiflow/source/flowsrc"
	"github.com/psiflow/psiflow/stage"
	"github.com/psiflow/psiflow/stage/decode"
)

type config struct {
	data       string
	batch      int
	workers    int
	readers    int
	budget     int64
	queue      int
	resize     int
	crop       int
	limit      int64
	ordered    bool
	dropCache  bool
	backend    string
	epochs     int
	progressTo *protocol.Emitter
}

func main() {
	em := protocol.NewEmitter(os.Stdout)
	var c config
	flag.StringVar(&c.data, "data", "", "image folder root with class subdirectories (required)")
	flag.IntVar(&c.batch, "batch", 64, "batch size")
	flag.IntVar(&c.workers, "workers", runtime.GOMAXPROCS(0), "decode goroutines")
	flag.IntVar(&c.readers, "readers", 0, "file readers (0: package source's default)")
	budget := flag.String("budget", "32M", "graph byte budget (bytes in flight from read to decode), with K, M, G suffixes")
	flag.IntVar(&c.queue, "queue", 4, "default edge queue size (elements); batch edges hold 1")
	flag.IntVar(&c.resize, "resize", 256, "Resize: shorter side")
	flag.IntVar(&c.crop, "crop", 224, "CenterCrop size")
	flag.Int64Var(&c.limit, "limit", 0, "stop after this many samples (0: all)")
	flag.BoolVar(&c.ordered, "ordered", false, "keep file order through decoding")
	flag.BoolVar(&c.dropCache, "drop-cache", true, "drop each file's page cache after reading it")
	flag.StringVar(&c.backend, "backend", "auto", "JPEG decoder: auto (TurboJPEG if available) or std")
	flag.IntVar(&c.epochs, "epochs", 1, "passes over the folder")
	flag.Parse()
	c.progressTo = em
	var err error
	if c.budget, err = parseSize(*budget); err != nil {
		err = fmt.Errorf("-budget: %w", err)
	} else if c.data == "" {
		err = errors.New("-data is required")
	}
	if err == nil {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		err = run(ctx, c)
		stop()
	}
	_ = em.Done(err)
	if err != nil {
		fmt.Fprintln(os.Stderr, "psiflow-imagefolder:", err)
		os.Exit(1)
	}
}

// errLimit ends the graph once -limit samples were delivered.
var errLimit = errors.New("sample limit reached")

func run(ctx context.Context, c config) error {
	files, err := source.Dir(c.data, ".jpg", ".jpeg", ".JPEG", ".png")
	if err != nil {
		return err
	}
	labels, err := classIndex(c.data)
	if err != nil {
		return err
	}
	opts := decode.Options{}
	switch c.backend {
	case "auto":
	case "std":
		opts.Backend = decode.BackendStd
	default:
		return fmt.Errorf("-backend %q: want auto or std", c.backend)
	}
	dec, err := decode.NewDecoder(opts)
	if err != nil {
		return err
	}
	defer dec.Close()
	if why := dec.FallbackReason(); why != nil {
		fmt.Fprintln(os.Stderr, "psiflow-imagefolder: JPEG through the standard library:", why)
	}
	get := func(s *source.Sample) decode.Encoded {
		e := decode.Encoded{Key: s.Key, Label: labels(s.Key)}
		if len(s.Fields) > 0 {
			e.Data = s.Fields[0].Data
		}
		return e
	}
	var delivered int64
	for epoch := range max(c.epochs, 1) {
		st, err := decode.NewStage("decode", dec, decode.StageConfig{
			Workers: max(c.workers, 1), Ordered: c.ordered,
			Transform: decode.Transform{Resize: c.resize, CenterCrop: c.crop, Layout: decode.CHW},
		}, get)
		if err != nil {
			return err
		}
		g := flow.New("imagefolder", flow.WithBudget(c.budget), flow.WithQueueSize(max(c.queue, 1)))
		src := flowsrc.Files(g, "read", files, source.Options{
			Epoch: epoch, Workers: c.readers,
			Reader: source.ReaderOptions{DropCache: c.dropCache},
		})
		decoded := flow.Via(src, st)
		batches := flow.Via(decoded, stage.Batch[*decode.Sample]("batch", c.batch, 0), flow.QueueSize(1))
		collated := flow.Via(batches, decode.Collate("collate"), flow.QueueSize(1))
		flow.Sink(collated, "consume", func(ctx context.Context, b *decode.Batch) error {
			n := len(b.Keys)
			delivered += int64(n)
			if err := c.progressTo.Batch(n); err != nil {
				return err
			}
			if c.limit > 0 && delivered >= c.limit {
				return errLimit
			}
			return nil
		})
		if err := g.Run(ctx); err != nil {
			if errors.Is(err, errLimit) {
				return nil
			}
			return err
		}
	}
	return nil
}

// classIndex returns ImageFolder's labelling: the index of a file's top-level
// directory among the sorted class directories of root (-1 for files outside one).
func classIndex(root string) (func(path string) int64, error) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, err
	}
	var classes []string
	for _, e := range entries {
		if e.IsDir() {
			classes = append(classes, e.Name())
		}
	}
	sort.Strings(classes)
	idx := make(map[string]int64, len(classes))
	for i, name := range classes {
		idx[name] = int64(i)
	}
	return func(path string) int64 {
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return -1
		}
		first, _, ok := strings.Cut(rel, string(filepath.Separator))
		if !ok {
			return -1
		}
		if i, ok := idx[first]; ok {
			return i
		}
		return -1
	}, nil
}

func parseSize(s string) (int64, error) {
	mult := int64(1)
	for _, u := range []struct {
		suf string
		m   int64
	}{{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}} {
		if strings.HasSuffix(s, u.suf) {
			s, mult = strings.TrimSuffix(s, u.suf), u.m
			break
		}
	}
	var v int64
	if _, err := fmt.Sscan(s, &v); err != nil || v <= 0 {
		return 0, fmt.Errorf("size %q: want a positive number with an optional K, M or G suffix", s)
	}
	return v * mult, nil
}
