package source

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/psiflow/psiflow/source/synth"
)

// elem is what the conformance suite sees of any source's element.
type elem struct {
	id   string
	data []byte // canonical bytes of the element
	rel  func()
}

// kind is one dataset kind under test.
type kind struct {
	name string
	// build writes a dataset into dir and returns how to iterate it, the
	// expected canonical bytes by id in base order, and the paths.
	build func(t *testing.T, dir string) (iter func(Options) (Iterator[elem], error), want []elem, paths []string)
	// corrupt damages path and returns what the error must mention.
	corrupt func(t *testing.T, path string) string
	// deals is true when the kind deals samples to ranks as DistributedSampler
	// (files: the same count on every rank, the remainder padded); otherwise
	// it deals whole shards.
	deals bool
}

// adapt turns an Iterator of T into an Iterator of elem.
type adapt[T any] struct {
	Iterator[T]
	conv func(T) elem
}

func (a adapt[T]) Next(ctx context.Context) (elem, error) {
	v, err := a.Iterator.Next(ctx)
	if err != nil {
		return elem{}, err
	}
	return a.conv(v), nil
}

func sampleElem(s *Sample) elem {
	var b bytes.Buffer
	for _, f := range s.Fields {
		fmt.Fprintf(&b, "%s=%d:", f.Name, len(f.Data))
		b.Write(f.Data)
	}
	return elem{id: s.Key, data: b.Bytes(), rel: s.Release}
}

func batchElem(bt *Batch) elem {
	return elem{id: fmt.Sprintf("%s#%d", filepath.Base(bt.File), bt.Index), data: recordCanon(bt.Record), rel: bt.Release}
}

// recordCanon serialises the id and payload columns.
func recordCanon(rec arrow.RecordBatch) []byte {
	var b bytes.Buffer
	for i, f := range rec.Schema().Fields() {
		switch c := rec.Column(i).(type) {
		case *array.Int64:
			fmt.Fprintf(&b, "%s:", f.Name)
			for j := 0; j < c.Len(); j++ {
				binary.Write(&b, binary.LittleEndian, c.Value(j))
			}
		case *array.Binary:
			fmt.Fprintf(&b, "%s:", f.Name)
			for j := 0; j < c.Len(); j++ {
				b.Write(c.Value(j))
			}
		}
	}
	return b.Bytes()
}

var smallImage = synth.Image{Width: 48, Height: 40}

func kinds() []kind {
	return []kind{
		{
			name: "files",
			build: func(t *testing.T, dir string) (func(Options) (Iterator[elem], error), []elem, []string) {
				_, err := synth.JPEGFiles(dir, 23, smallImage, 5)
				if err != nil {
					t.Fatal(err)
				}
				// one empty file and one larger than a default pool slot
				writeFileP(t, dir, "zz-empty.bin", 0)
				writeFileP(t, dir, "zz-large.bin", 300<<10+17)
				d, err := Dir(dir)
				if err != nil {
					t.Fatal(err)
				}
				var want []elem
				for _, p := range d.Paths() {
					b, err := os.ReadFile(p)
					if err != nil {
						t.Fatal(err)
					}
					want = append(want, elem{id: p, data: []byte(fmt.Sprintf("%s=%d:%s", extOf(p), len(b), b))})
				}
				return func(o Options) (Iterator[elem], error) {
					it, err := d.Samples(o)
					if err != nil {
						return nil, err
					}
					return adapt[*Sample]{it, sampleElem}, nil
				}, want, d.Paths()
			},
			corrupt: func(t *testing.T, p string) string {
				if err := os.Remove(p); err != nil {
					t.Fatal(err)
				}
				return p
			},
			deals: true,
		},
		{
			name: "tar",
			build: func(t *testing.T, dir string) (func(Options) (Iterator[elem], error), []elem, []string) {
				paths, err := synth.TarShards(dir, synth.Shards{Shards: 5, Samples: 7, Image: smallImage}, 6)
				if err != nil {
					t.Fatal(err)
				}
				d := NewTar(paths)
				var want []elem
				for _, p := range paths {
					want = append(want, readTarIndependently(t, p)...)
				}
				return func(o Options) (Iterator[elem], error) {
					o.ChunkSize = 8 << 10 // many chunk boundaries inside members
					it, err := d.Samples(o)
					if err != nil {
						return nil, err
					}
					return adapt[*Sample]{it, sampleElem}, nil
				}, want, paths
			},
			corrupt: func(t *testing.T, p string) string {
				st, _ := os.Stat(p)
				if err := os.Truncate(p, st.Size()/2+100); err != nil {
					t.Fatal(err)
				}
				return p + " at offset"
			},
		},
		tableKind("parquet", Parquet),
		tableKind("arrow", ArrowIPC),
	}
}

func tableKind(name string, format TableFormat) kind {
	tab := synth.Table{Files: 3, Batches: 4, Rows: 9, PayloadBytes: 16}
	return kind{
		name: name,
		build: func(t *testing.T, dir string) (func(Options) (Iterator[elem], error), []elem, []string) {
			var paths []string
			var err error
			if format == Parquet {
				paths, err = synth.ParquetFiles(dir, tab, 8)
			} else {
				paths, err = synth.ArrowFiles(dir, tab, 8)
			}
			if err != nil {
				t.Fatal(err)
			}
			var want []elem
			for f := range tab.Files {
				for b := range tab.Batches {
					rec := synth.Batch(tab, 8, f, b)
					proj := project(rec, []int{0, 3})
					want = append(want, elem{id: fmt.Sprintf("%s#%d", filepath.Base(paths[f]), b), data: recordCanon(proj)})
					proj.Release()
					rec.Release()
				}
			}
			var d *Tables
			if format == Parquet {
				d = NewParquet(paths, "id", "payload")
			} else {
				d = NewArrowIPC(paths, "id", "payload")
			}
			return func(o Options) (Iterator[elem], error) {
				it, err := d.Batches(o)
				if err != nil {
					return nil, err
				}
				return adapt[*Batch]{it, batchElem}, nil
			}, want, paths
		},
		corrupt: func(t *testing.T, p string) string {
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			for i := len(b) - 64; i < len(b)-4; i++ { // scramble the footer
				b[i] ^= 0x5a
			}
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
			return p
		},
	}
}

func writeFileP(t *testing.T, dir, name string, n int) string {
	p, _ := writeFile(t, dir, name, n, uint64(n))
	return p
}

func readTarIndependently(t *testing.T, p string) []elem {
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	var out []elem
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(tr)
		key, field := SplitKey(h.Name)
		if len(out) == 0 || out[len(out)-1].id != key {
			out = append(out, elem{id: key})
		}
		e := &out[len(out)-1]
		e.data = append(e.data, fmt.Sprintf("%s=%d:", field, len(data))...)
		e.data = append(e.data, data...)
	}
}

// drain reads up to n elements (all when n < 0), checking bytes against want.
func drain(t *testing.T, it Iterator[elem], n int, want map[string][]byte) []string {
	t.Helper()
	var ids []string
	for n < 0 || len(ids) < n {
		e, err := it.Next(context.Background())
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if w, ok := want[e.id]; !ok {
			t.Fatalf("unexpected element %q", e.id)
		} else if !bytes.Equal(w, e.data) {
			t.Fatalf("element %q: bytes differ (%d vs %d)", e.id, len(e.data), len(w))
		}
		ids = append(ids, e.id)
		e.rel()
	}
	return ids
}

type countBudget struct{ inUse atomic.Int64 }

func (b *countBudget) Acquire(ctx context.Context, n int64) error {
	if err := ctx.Err(); err != nil {
		return err // a refused acquisition holds nothing
	}
	b.inUse.Add(n)
	return nil
}
func (b *countBudget) Release(n int64) { b.inUse.Add(-n) }

func TestConformance(t *testing.T) {
	for _, k := range kinds() {
		for _, backend := range backends(t) {
			t.Run(k.name+"/"+string(backend), func(t *testing.T) {
				dir := t.TempDir()
				iter, wantList, paths := k.build(t, dir)
				want := map[string][]byte{}
				var baseOrder []string
				for _, e := range wantList {
					want[e.id] = e.data
					baseOrder = append(baseOrder, e.id)
				}
				base := Options{WorldSize: 1, Reader: ReaderOptions{Backend: backend, QueueDepth: 4}, Workers: 3}
				open := func(t *testing.T, o Options) Iterator[elem] {
					t.Helper()
					it, err := iter(o)
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { it.Close() })
					return it
				}

				t.Run("exact-bytes-and-base-order", func(t *testing.T) {
					gate, budget := &countGate{}, &countBudget{}
					o := base
					o.Gate, o.Budget = gate, budget
					fds := openFDs(t)
					it := open(t, o)
					got := drain(t, it, -1, want)
					if err := it.Close(); err != nil {
						t.Fatal(err)
					}
					if after := openFDs(t); after != fds {
						t.Fatalf("%d file descriptors open after Close, %d before", after, fds)
					}
					if !slices.Equal(got, baseOrder) {
						t.Fatalf("order without shuffle:\n got %v\nwant %v", got, baseOrder)
					}
					if gate.held.Load() != 0 || budget.inUse.Load() != 0 {
						t.Fatalf("after releasing everything: %d permits, %d budget bytes held", gate.held.Load(), budget.inUse.Load())
					}
				})

				shuffled := base
				shuffled.Shuffle, shuffled.ShuffleBuffer, shuffled.Seed = true, 5, 42
				t.Run("shuffle-is-seeded-per-epoch", func(t *testing.T) {
					a := drain(t, open(t, shuffled), -1, want)
					b := drain(t, open(t, shuffled), -1, want)
					e1 := shuffled
					e1.Epoch = 1
					c := drain(t, open(t, e1), -1, want)
					if !slices.Equal(a, b) {
						t.Fatal("same seed and epoch gave different orders")
					}
					if slices.Equal(a, c) || slices.Equal(a, baseOrder) {
						t.Fatal("shuffle did not change the order across epochs")
					}
					if s := slices.Sorted(slices.Values(a)); !slices.Equal(s, slices.Sorted(slices.Values(baseOrder))) {
						t.Fatal("shuffled epoch is not a permutation of the dataset")
					}
				})

				t.Run("sharding-partitions-exactly", func(t *testing.T) {
					seen := map[string]int{}
					var counts []int
					for rank := range 3 {
						o := shuffled
						o.Rank, o.WorldSize = rank, 3
						got := drain(t, open(t, o), -1, want)
						counts = append(counts, len(got))
						for _, id := range got {
							seen[id]++
						}
					}
					repeats := 0
					for _, id := range baseOrder {
						if seen[id] < 1 || seen[id] > 1 && !k.deals {
							t.Fatalf("element %q seen %d times across ranks", id, seen[id])
						}
						repeats += seen[id] - 1
					}
					if len(seen) != len(baseOrder) {
						t.Fatalf("%d distinct elements, want %d", len(seen), len(baseOrder))
					}
					if k.deals && (repeats >= 3 || counts[0] != counts[1] || counts[1] != counts[2]) {
						t.Fatalf("ranks read %v elements with %d repeats: want equal counts, fewer than 3 repeats (padding)", counts, repeats)
					}
				})

				t.Run("zero-value-ignores-environment", func(t *testing.T) {
					t.Setenv("RANK", "1")
					t.Setenv("WORLD_SIZE", "2")
					o := base
					o.WorldSize = 0
					it := open(t, o)
					if p := it.Position(); p.Rank != 0 || p.WorldSize != 1 {
						t.Fatalf("position %+v, want rank 0 of 1: the library must not read RANK", p)
					}
					if got := drain(t, it, -1, want); !slices.Equal(got, baseOrder) {
						t.Fatalf("zero WorldSize read %d of %d elements", len(got), len(baseOrder))
					}
					sh, err := EnvSharding()
					if err != nil {
						t.Fatal(err)
					}
					fromEnv, explicit := base, base
					fromEnv.Rank, fromEnv.WorldSize = sh.Rank, sh.WorldSize
					explicit.Rank, explicit.WorldSize = 1, 2
					if a, b := drain(t, open(t, fromEnv), -1, want), drain(t, open(t, explicit), -1, want); !slices.Equal(a, b) {
						t.Fatal("EnvSharding and explicit rank disagree")
					}
				})

				t.Run("resume-yields-exactly-the-rest", func(t *testing.T) {
					for _, cut := range []int{0, 1, len(baseOrder) / 2, len(baseOrder) - 1, len(baseOrder)} {
						full := drain(t, open(t, shuffled), -1, want)
						it := open(t, shuffled)
						head := drain(t, it, cut, want)
						js, err := json.Marshal(it.Position())
						if err != nil {
							t.Fatal(err)
						}
						it.Close()
						var pos Position
						if err := json.Unmarshal(js, &pos); err != nil {
							t.Fatal(err)
						}
						o := shuffled
						o.Resume = &pos
						rest := drain(t, open(t, o), -1, want)
						if got := append(head, rest...); !slices.Equal(got, full) {
							t.Fatalf("cut %d (position %s): resumed sequence\n got %v\nwant %v", cut, js, got, full)
						}
					}
					bad := shuffled
					bad.Resume = &Position{Seed: 7, WorldSize: 1}
					if _, err := iter(bad); err == nil {
						t.Fatal("resume with another seed accepted")
					}
				})

				t.Run("bad-input", func(t *testing.T) {
					victim := paths[len(paths)/2]
					mention := k.corrupt(t, victim)
					it, err := iter(base)
					if err == nil {
						t.Cleanup(func() { it.Close() })
					}
					for err == nil {
						var e elem
						e, err = it.Next(context.Background())
						if err == nil {
							e.rel()
						}
					}
					if errors.Is(err, io.EOF) {
						// table kinds fail at open time; others during iteration
						t.Fatal("corrupt input read to the end without an error")
					}
					if !strings.Contains(err.Error(), mention) {
						t.Fatalf("error %q does not mention %q", err, mention)
					}
				})
			})
		}
	}
}

func TestConformanceBadInputAtOpen(t *testing.T) {
	// Table kinds read footers when the iterator is created: a corrupt file
	// fails there by default, and is skipped and counted with Skip.
	for _, k := range kinds() {
		t.Run(k.name, func(t *testing.T) {
			dir := t.TempDir()
			iter, want, paths := k.build(t, dir)
			victim := paths[len(paths)/2]
			mention := k.corrupt(t, victim)
			it, err := iter(Options{WorldSize: 1})
			if err == nil {
				var got error
				for got == nil {
					var e elem
					e, got = it.Next(context.Background())
					if got == nil {
						e.rel()
					}
				}
				err = got
				it.Close()
			}
			if errors.Is(err, io.EOF) || !strings.Contains(err.Error(), mention) {
				t.Fatalf("default policy: error %v does not mention %q", err, mention)
			}
			var re *ReadError
			if !errors.As(err, &re) || re.Path != victim {
				t.Fatalf("error %v is not a ReadError naming %s", err, victim)
			}

			it, err = iter(Options{WorldSize: 1, Skip: true})
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for {
				e, err := it.Next(context.Background())
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				e.rel()
				n++
			}
			if it.Skipped() < 1 || n == 0 || n >= len(want)+1 {
				t.Fatalf("skip policy: %d read, %d skipped", n, it.Skipped())
			}
			it.Close()

		})
	}
}

func TestTooManySkips(t *testing.T) {
	dir := t.TempDir()
	var paths []string
	for i := range 4 {
		paths = append(paths, filepath.Join(dir, fmt.Sprintf("missing-%d", i)))
	}
	it, err := NewFiles(paths).Samples(Options{WorldSize: 1, Skip: true, MaxSkips: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	_, err = it.Next(context.Background())
	if !errors.Is(err, ErrTooManySkips) || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("error %v, want ErrTooManySkips wrapping the cause", err)
	}
}

// TestHoldingSamplesDoesNotHang holds every sample before releasing any, as a
// batch stage does, with far fewer pool slots than samples.
func TestHoldingSamplesDoesNotHang(t *testing.T) {
	dir := t.TempDir()
	var paths []string
	for i := range 40 {
		p, _ := writeFile(t, dir, fmt.Sprintf("f%02d.bin", i), 3000+i, uint64(i))
		paths = append(paths, p)
	}
	for _, b := range backends(t) {
		t.Run(string(b), func(t *testing.T) {
			it, err := NewFiles(paths).Samples(Options{WorldSize: 1, Workers: 1, Reader: ReaderOptions{Backend: b, QueueDepth: 2}})
			if err != nil {
				t.Fatal(err)
			}
			defer it.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var held []*Sample
			for {
				s, err := it.Next(ctx)
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatalf("after %d samples: %v", len(held), err)
				}
				held = append(held, s)
			}
			if len(held) != len(paths) {
				t.Fatalf("%d samples, want %d", len(held), len(paths))
			}
			for _, s := range held {
				s.Release()
			}
		})
	}
}

// openFDs counts this process's open file descriptors (-1 where /proc is absent).
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(ents)
}
