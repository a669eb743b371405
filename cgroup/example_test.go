package cgroup_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/psiflow/psiflow/cgroup"
)

// A loader starts its worker in a memory-limited group, so that the worker's memory is
// charged there from its first page, and removes the group when the worker is done.
func ExampleGroup_Start() {
	g, err := cgroup.New(fmt.Sprintf("loader-%d", os.Getpid()))
	if err != nil {
		log.Fatal(err)
	}
	defer g.Remove()
	if err := g.SetMemoryMax(2 << 30); err != nil {
		log.Fatal(err)
	}
	cmd := exec.Command("/usr/bin/env", "true")
	if err := g.Start(cmd); err != nil {
		log.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		log.Fatal(err)
	}
	ev, _ := g.MemoryEvents()
	fmt.Println("OOM kills:", ev.OOMKill)
}

// OpenTree reads any directory laid out like a cgroup file system; here a fake pure-v2
// tree in which the process's parent cgroup is limited to 4 GiB.
func ExampleOpenTree() {
	root, err := os.MkdirTemp("", "cgroup-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(root)
	for path, text := range map[string]string{
		"cgroup.controllers":       "cpu io memory pids\n",
		"job.slice/memory.max":     "4294967296\n",
		"job.slice/app/memory.max": "max\n",
		"proc/self/cgroup":         "0::/job.slice/app\n",
		"proc/meminfo":             "MemTotal: 16777216 kB\n",
	} {
		os.MkdirAll(filepath.Dir(filepath.Join(root, path)), 0o755)
		os.WriteFile(filepath.Join(root, path), []byte(text), 0o644)
	}
	tree, err := cgroup.OpenTree(root, cgroup.WithProc(filepath.Join(root, "proc")))
	if err != nil {
		log.Fatal(err)
	}
	limit, source, err := tree.SelfMemoryLimit()
	if err != nil {
		log.Fatal(err)
	}
	rel, _ := filepath.Rel(root, source)
	fmt.Println(tree.Layout(), limit>>30, "GiB from", rel)
	// Output: v2 4 GiB from job.slice/memory.max
}

func ExampleWeightToShares() {
	fmt.Println(cgroup.WeightToShares(100), cgroup.WeightToShares(200), cgroup.SharesToWeight(512))
	// Output: 1024 2048 50
}

// The controller raises a group's quota by 10 % while it is throttled more than 500 ms
// a second and lowers it by 10 % while it idles, between half a CPU and two CPUs.
func ExampleNewQuotaController() {
	g, err := cgroup.New(fmt.Sprintf("decode-%d", os.Getpid()))
	if err != nil {
		log.Fatal(err)
	}
	defer g.Remove()
	c, err := cgroup.NewQuotaController(g, cgroup.QuotaConfig{
		Min: 50 * time.Millisecond, Max: 200 * time.Millisecond, Initial: 100 * time.Millisecond,
		OnChange: func(d cgroup.QuotaDecision) { log.Printf("cpu quota %v -> %v (%s)", d.Old, d.New, d.Reason) },
	})
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_ = c.Run(ctx)
}

// WatchPids reports forks refused by pids.max.
func ExampleWatchPids() {
	g, err := cgroup.New(fmt.Sprintf("workers-%d", os.Getpid()))
	if err != nil {
		log.Fatal(err)
	}
	defer g.Remove()
	if err := g.SetPidsMax(256); err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_ = cgroup.WatchPids(ctx, g, 0, func(total, delta uint64) {
		log.Printf("%d forks refused by pids.max (%d in all)", delta, total)
	})
}
