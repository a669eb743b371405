// Command psiflow-gpubench is the benchmark loader of the GPU stages: an image folder
// read (io_uring or pread) → decode (libjpeg-turbo) → Resize → CenterCrop → batch,
// ending either on the host (collate into a batch tensor, as the shipped pipeline
// does) or on a device (pin into the staging ring → host-to-device copy →
// mark-preemptible), so that the two ends can be compared side by side with the same
// front (psiflow bench runs it; it speaks the harness's JSON-lines protocol).
//
//	psiflow-gpubench -data DIR -end host|sim|cuda [-batch 64] [-epochs 1] [-budget 64MiB] [-verify]
//
// -end sim is the simulated device (gpu/sim: -sim-bandwidth bytes/s, device bytes
// discarded unless -verify, so that it adds no host memory of its own); every line it
// prints about the device says "simulated". -end cuda opens device 0 through the CUDA
// driver API (PSIFLOW_LIBCUDA, else libcuda.so.1). -verify copies every batch back and
// compares it with what was staged (xxh3). The last line before "done" is an "info"
// line with the CPU time, the ring's figures and the device's name.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/psiflow/psiflow/flow"
	"github.com/psiflow/psiflow/gpu"
	"github.com/psiflow/psiflow/gpu/cuda"
	"github.com/psiflow/psiflow/gpu/h2d"
	"github.com/psiflow/psiflow/gpu/sim"
	"github.com/psiflow/psiflow/internal/flagval"
	"github.com/psiflow/psiflow/internal/harness/protocol"
	"github.com/psiflow/psiflow/memory"
	"github.com/psiflow/psiflow/reexec"
	"github.com/psiflow/psiflow/source"
	"github.com/psiflow/psiflow/source/flowsrc"
	"github.com/psiflow/psiflow/source/synth"
	"github.com/psiflow/psiflow/stage/decode"
	"github.com/psiflow/psiflow/tensor"
	"github.com/psiflow/psiflow/uma"
	"github.com/zeebo/xxh3"
)

type config struct {
	data, end               string
	batch, workers, epochs  int
	resize, crop            int
	budget                  int64
	simBandwidth            float64
	verify                  bool
	gen                     int
	keepRegistered, streams int
}

func parse(args []string) (config, error) {
	var c config
	fs := flag.NewFlagSet("psiflow-gpubench", flag.ContinueOnError)
	fs.StringVar(&c.data, "data", "", "image folder (required)")
	fs.StringVar(&c.end, "end", "host", "where batches end: host (collate), sim (simulated device) or cuda")
	fs.IntVar(&c.batch, "batch", 64, "samples per batch")
	fs.IntVar(&c.workers, "workers", runtime.GOMAXPROCS(0), "decode workers")
	fs.IntVar(&c.epochs, "epochs", 1, "passes over the folder")
	fs.IntVar(&c.resize, "resize", 256, "Resize (shorter side)")
	fs.IntVar(&c.crop, "crop", 224, "CenterCrop")
	flagval.SizeVar(fs, &c.budget, "budget", 64<<20, 1<<20, 1<<40, "the graph's byte budget; the staging ring is sized by it")
	fs.Float64Var(&c.simBandwidth, "sim-bandwidth", 25e9, "the simulated device's host-to-device bytes per second")
	fs.BoolVar(&c.verify, "verify", false, "copy every batch back from the device and compare it with what was staged")
	fs.IntVar(&c.keepRegistered, "keep-registered", 0, "free staging slots kept registered (0: the ring's default)")
	fs.IntVar(&c.streams, "streams", 0, "copy streams (0: the ring's default, 2)")
	fs.IntVar(&c.gen, "gen", 0, "instead of a run: write N ImageNet-like JPEGs into -data/class0 (for machines without the psiflow launcher) and exit")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	switch {
	case c.data == "":
		return c, errors.New("-data DIR is required")
	case c.end != "host" && c.end != "sim" && c.end != "cuda":
		return c, fmt.Errorf("-end %q: want host, sim or cuda", c.end)
	case c.batch < 1 || c.workers < 1 || c.epochs < 1 || c.resize < 1 || c.crop < 1:
		return c, errors.New("-batch, -workers, -epochs, -resize and -crop must be positive")
	case !(c.simBandwidth > 0):
		return c, errors.New("-sim-bandwidth must be positive")
	}
	return c, nil
}

func main() {
	reexec.Init() // first: this binary depends on cgroup and pressure, whose helpers re-execute it
	em := protocol.NewEmitter(os.Stdout)
	c, err := parse(os.Args[1:])
	if err == nil && c.gen > 0 {
		if _, err := synth.JPEGFiles(filepath.Join(c.data, "class0"), c.gen, synth.Image{}, 1); err != nil {
			fmt.Fprintln(os.Stderr, "psiflow-gpubench:", err)
			os.Exit(1)
		}
		return
	}
	if err == nil {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		err = run(ctx, c, em, os.Stdout)
		stop()
	}
	_ = em.Done(err)
	if err != nil {
		fmt.Fprintln(os.Stderr, "psiflow-gpubench:", err)
		os.Exit(1)
	}
}

func openDevice(c config) (gpu.Device, error) {
	switch c.end {
	case "sim":
		return sim.Open(sim.Config{Capacity: 8 << 30, Bandwidth: c.simBandwidth, Discard: !c.verify})
	case "cuda":
		return cuda.Open(cuda.DefaultConfig(0))
	}
	return nil, nil
}

func run(ctx context.Context, c config, em *protocol.Emitter, info io.Writer) (err error) {
	files, err := source.Dir(c.data, ".jpg", ".jpeg", ".JPEG", ".png")
	if err != nil {
		return err
	}
	dec, err := decode.NewDecoder(decode.Options{})
	if err != nil {
		return err
	}
	dev, err := openDevice(c)
	if err != nil {
		return err
	}
	var ring *h2d.Ring
	var u *uma.UMA
	if dev != nil {
		defer func() {
			if cerr := dev.Close(); err == nil {
				err = cerr
			}
		}()
		u, err = uma.New(uma.Config{MemoryLimit: memory.SelfMemoryLimit})
		if err != nil {
			return err
		}
		defer func() {
			if cerr := u.Close(); err == nil {
				err = cerr
			}
		}()
		ring, err = h2d.NewRing(h2d.Config{UMA: u, Device: dev, SlotBytes: int64(c.batch * 3 * c.crop * c.crop), Budget: c.budget,
			KeepRegistered: c.keepRegistered, Streams: c.streams})
		if err != nil {
			return err
		}
		defer func() {
			if cerr := ring.Close(); err == nil {
				err = cerr
			}
		}()
		fmt.Fprintf(info, "{\"event\":\"info\",\"device\":%q,\"ring_slots\":%d,\"slot_bytes\":%d}\n", dev.Name(), ring.Slots(), ring.SlotBytes())
	}
	_ = em.Emit(protocol.Event{Event: protocol.Start, Files: int64(files.Len()), Epochs: c.epochs})
	start := time.Now()
	cpu0 := cpuTime()
	var verified int64
	busy := map[string]float64{}
	for epoch := range c.epochs {
		g := flow.New("gpubench", flow.WithBudget(c.budget))
		read := flowsrc.Files(g, "read", files, source.Options{Epoch: epoch})
		st, err := decode.NewStage("decode", dec, decode.StageConfig{Workers: c.workers, Budget: g.Budget(),
			Transform: decode.Transform{Resize: c.resize, CenterCrop: c.crop, Layout: tensor.CHW}},
			func(s *source.Sample) decode.Encoded { return decode.Encoded{Key: s.Key, Data: s.Fields[0].Data} })
		if err != nil {
			return err
		}
		batches := flow.Batch(flow.Via(read, st), "batch", c.batch, 0, flow.QueueSize(1))
		if ring == nil {
			flow.Sink(flow.Via(batches, tensor.Collate("collate"), flow.QueueSize(1)), "consume", func(ctx context.Context, b *tensor.Batch) error {
				return em.Batch(b.Len())
			})
		} else {
			pinned := flow.Via(batches, h2d.Pin("pin", ring), flow.QueueSize(1))
			var sums sync.Map // first key → xxh3 of the staged bytes
			if c.verify {
				pinned = flow.Tap(pinned, "checksum", func(s *h2d.Staged) { sums.Store(s.Keys[0], xxh3.Hash(s.Bytes())) })
			}
			ready := flow.Via(flow.Via(pinned, h2d.H2D("h2d", ring), flow.QueueSize(1)), h2d.MarkPreemptible("mark-preemptible"), flow.QueueSize(1))
			flow.Sink(ready, "consume", func(ctx context.Context, b *h2d.DeviceBatch) error {
				if c.verify {
					back := make([]byte, b.Bytes)
					if err := b.CopyToHost(ctx, back); err != nil {
						return err
					}
					want, ok := sums.LoadAndDelete(b.Keys[0])
					if !ok || xxh3.Hash(back) != want.(uint64) {
						return fmt.Errorf("batch starting at %s: the bytes copied back differ from the bytes staged", b.Keys[0])
					}
					verified++
				}
				return em.Batch(b.Len())
			})
		}
		if err := g.Run(ctx); err != nil {
			return err
		}
		for _, s := range g.Stats() {
			busy[s.Name] += s.Busy
		}
		_ = em.EndEpoch(epoch + 1)
	}
	wall := time.Since(start)
	cpu := cpuTime() - cpu0
	line := fmt.Sprintf("{\"event\":\"info\",\"end\":%q,\"samples\":%d,\"wall_s\":%.3f,\"cpu_s\":%.3f,\"samples_per_cpu_s\":%.1f,\"verified_batches\":%d",
		c.end, em.Samples(), wall.Seconds(), cpu.Seconds(), float64(em.Samples())/cpu.Seconds(), verified)
	for _, n := range []string{"decode", "collate", "pin", "h2d", "mark-preemptible"} {
		if b, ok := busy[n]; ok {
			line += fmt.Sprintf(",\"busy_%s_s\":%.3f", strings.ReplaceAll(n, "-", "_"), b)
		}
	}
	if ring != nil {
		s := ring.Stats()
		line += fmt.Sprintf(",\"device\":%q,\"copies\":%d,\"registrations\":%d,\"marked\":%d,\"quota_waits\":%d",
			dev.Name(), s.Copies, s.Registrations, s.Marked, ring.Quota().Stats().Waits)
	}
	fmt.Fprintln(info, line+"}")
	return nil
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
