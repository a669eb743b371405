package metrics_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/psiflow/psiflow/cgroup"
	"github.com/psiflow/psiflow/cgroup/cgroupmetrics"
	"github.com/psiflow/psiflow/flow"
	"github.com/psiflow/psiflow/metrics"
	"github.com/psiflow/psiflow/pipelines"
	"github.com/psiflow/psiflow/pipelines/imagefolder"
	"github.com/psiflow/psiflow/source/synth"
	"github.com/psiflow/psiflow/tensor"
)

// repoRoot is the module root, where deploy/ lives.
const repoRoot = ".."

// promServer is a Prometheus server started by a test.
type promServer struct {
	url string
	cmd *exec.Cmd
	log *bytes.Buffer
}

// startPrometheus starts /usr/bin/prometheus on a free loopback port, scraping target
// every 200ms, with its storage in a temporary directory. The server is killed when
// the test ends, whatever happens.
func startPrometheus(t *testing.T, target string) *promServer {
	t.Helper()
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Skip("no prometheus binary (Debian package prometheus; make test installs it)")
	}
	dir := t.TempDir()
	cfg := fmt.Sprintf(`global:
  scrape_interval: 200ms
  scrape_timeout: 200ms
  evaluation_interval: 1s
scrape_configs:
  - job_name: psiflow
    static_configs:
      - targets: [%q]
`, target)
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	p := &promServer{url: "http://" + addr, log: &bytes.Buffer{}}
	p.cmd = exec.Command(bin, "--config.file="+cfgPath, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	dieWithTest(p.cmd)
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { p.cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("prometheus log:\n%s", p.log.String())
		}
	})
	waitFor(t, 60*time.Second, "prometheus ready", func() (bool, error) {
		select {
		case <-exited:
			return false, fmt.Errorf("prometheus exited: %s", p.log.String())
		default:
		}
		resp, err := http.Get(p.url + "/-/ready")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	return p
}

// waitFor polls cond every 50ms until it holds, fails or the deadline passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		ok, err := cond()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

type sample struct {
	labels map[string]string
	ts     float64
	value  float64
}

// query runs an instant PromQL query through the HTTP API.
func (p *promServer) query(t *testing.T, q string) []sample {
	t.Helper()
	resp, err := http.Get(p.url + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		t.Fatalf("query %s: %v", q, err)
	}
	defer resp.Body.Close()
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatalf("query %s: %v", q, err)
	}
	if r.Status != "success" {
		t.Fatalf("query %s: %s", q, r.Error)
	}
	var out []sample
	for _, res := range r.Data.Result {
		ts, _ := res.Value[0].(float64)
		vs, _ := res.Value[1].(string)
		v, err := strconv.ParseFloat(vs, 64)
		if err != nil {
			t.Fatalf("query %s: value %q: %v", q, vs, err)
		}
		out = append(out, sample{res.Metric, ts, v})
	}
	return out
}

// one runs q and wants exactly one sample.
func (p *promServer) one(t *testing.T, q string) float64 {
	t.Helper()
	s := p.query(t, q)
	if len(s) != 1 {
		t.Fatalf("query %s: %d samples, want 1: %v", q, len(s), s)
	}
	return s[0].value
}

// TestRealPrometheusScrape runs the image-folder pipeline with its metrics served,
// has a real Prometheus scrape them, and checks what Prometheus stored against the
// run's own summary; it lints a scrape with promtool and checks that every metric the
// rules and the dashboard use was scraped.
func TestRealPrometheusScrape(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Prometheus server")
	}
	dir := t.TempDir()
	const files, epochs = 200, 4
	if _, err := synth.JPEGFiles(filepath.Join(dir, "class0"), files, synth.Image{Width: 160, Height: 120, Quality: 85, Noise: 8}, 1); err != nil {
		t.Fatal(err)
	}
	set, err := metrics.New()
	if err != nil {
		t.Fatal(err)
	}
	// Gathers are counted, so the run can wait for Prometheus to have scraped
	// while its graph, its UMA and its gate exist (an epoch here can be shorter
	// than the scrape interval).
	scrapes := &countingGatherer{g: set.Registry}
	srv, err := metrics.Serve("127.0.0.1:0", scrapes)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	prom := startPrometheus(t, srv.Addr())
	waitFor(t, 60*time.Second, "first scrape", func() (bool, error) {
		s := prom.query(t, `up{job="psiflow"}`)
		return len(s) == 1 && s[0].value == 1, nil
	})

	// The fixed memory runtime with its gate: the read pool is the registered
	// read_buffers checked below.
	const readBuffers = 8 << 20
	p, err := imagefolder.New(dir, "decode.workers=2", "batch.size=16", fmt.Sprintf("epochs=%d", epochs), "decode.resize=64", "decode.center_crop=56",
		"resources.memory_mode=fixed", "resources.pressure=gate", fmt.Sprintf("read.read_buffers=%d", readBuffers))
	if err != nil {
		t.Fatal(err)
	}
	var encoded int64 // the folder's bytes: what every epoch reads
	for _, f := range synthFiles(t, dir) {
		encoded += f
	}
	var waitOnce sync.Once
	var during []byte // a scrape taken while the graph runs
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	sum, err := pipelines.Run(ctx, p, pipelines.Hooks{
		Options:    []flow.Option{flow.WithRegistry(set.Registry)},
		Registerer: set.Registry, Reads: set.Reads, Decodes: set.Decodes,
		Batches: func(ctx context.Context, _ *tensor.Batch) error {
			waitOnce.Do(func() {
				// A scrape of our own while the first batch is in this hook: the
				// stage running it has received the batch, so its count is at
				// least 1 (a scrape when Progress first saw items could come before
				// any batch reached the sink: CI failed on that).
				during = get(t, srv.URL())
				// Two gathers after this one: at least one is Prometheus's.
				n0, deadline := scrapes.n.Load(), time.Now().Add(30*time.Second)
				for scrapes.n.Load() < n0+2 && time.Now().Before(deadline) && ctx.Err() == nil {
					time.Sleep(10 * time.Millisecond)
				}
			})
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	end := float64(time.Now().UnixNano()) / 1e9
	if sum.Items != files*epochs || sum.Elapsed <= 0 {
		t.Fatalf("summary: %d items in %v, want %d in a positive time", sum.Items, sum.Elapsed, files*epochs)
	}
	// Wait for a scrape after the end of the run: the counters are final then.
	waitFor(t, 30*time.Second, "a scrape after the run", func() (bool, error) {
		s := prom.query(t, `timestamp(psiflow_decode_images_total)`)
		return len(s) == 1 && s[0].value > end, nil
	})

	if got := prom.one(t, `psiflow_decode_images_total`); got != float64(sum.Items) {
		t.Errorf("psiflow_decode_images_total = %v, summary says %d items", got, sum.Items)
	}
	if got := prom.one(t, `sum(psiflow_read_bytes_total)`); got != float64(encoded*epochs) {
		t.Errorf("sum(psiflow_read_bytes_total) = %v, want the folder's %d bytes × %d epochs", got, encoded, epochs)
	}
	if got := prom.one(t, `sum(psiflow_read_duration_seconds_count)`); got != float64(sum.Items) {
		t.Errorf("reads observed %v, want one per file per epoch (%d)", got, sum.Items)
	}
	if got := prom.one(t, `sum(psiflow_read_errors_total) + sum(psiflow_decode_errors_total)`); got != 0 {
		t.Errorf("errors = %v", got)
	}
	// The graph's own counters are exported while an epoch runs (each epoch is a new
	// graph): the most batches the sink was seen to have is at most an epoch's.
	// Whether a 200 ms scrape lands inside an epoch is timing, so this is read
	// from the scrape taken while the first batch was in the hook, and from
	// Prometheus only when it caught one.
	perEpoch := float64(sum.Batches / epochs)
	// The hook runs in the "consumer" stage, which has received the batch it holds.
	if got, ok := scrapedValue(during, "psiflow_stage_items_in_total", `stage="consumer"`); !ok || got <= 0 || got > perEpoch {
		t.Errorf("batches at the consumer in the scrape taken during the run: %v (found %v), want in (0, %v]", got, ok, perEpoch)
	}
	// Prometheus may have scraped only between epochs (a new graph starts at 0),
	// so from it only the upper bound is certain.
	if s := prom.query(t, `max_over_time(psiflow_stage_items_in_total{stage="consume"}[5m])`); len(s) == 1 && (s[0].value < 0 || s[0].value > perEpoch) {
		t.Errorf("max batches seen at the sink %v, want in [0, %v]", s[0].value, perEpoch)
	}
	if got := prom.one(t, `max_over_time(sum(psiflow_uma_bytes)[5m:100ms])`); got != readBuffers {
		t.Errorf("UMA bytes over every state = %v, want the read pool's %d", got, readBuffers)
	}
	if set.NoCgroup == nil {
		if got := prom.one(t, `psiflow_cgroup_memory_current_bytes`); got <= 0 {
			t.Errorf("psiflow_cgroup_memory_current_bytes = %v", got)
		}
	} else {
		t.Logf("no cgroup metrics here: %v", set.NoCgroup)
	}

	// promtool lints a scrape taken while the pipeline ran.
	if len(during) == 0 {
		t.Fatal("no scrape taken during the run")
	}
	lint := exec.Command("promtool", "check", "metrics")
	lint.Stdin = bytes.NewReader(during)
	if out, err := lint.CombinedOutput(); err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}

	// Every metric the rules and the dashboard use was scraped by Prometheus (or, for
	// the few the host may not offer, is one psiflow's cgroup collector defines).
	scraped := map[string]bool{}
	for _, n := range labelValues(t, prom, "__name__") {
		scraped[n] = true
	}
	defined := definedNames(t)
	for _, f := range []string{"deploy/prometheus/psiflow-rules.yml", "deploy/grafana/psiflow.json"} {
		names := usedNames(t, filepath.Join(repoRoot, f))
		if len(names) < 10 {
			t.Errorf("%s: only %d metric names found: %v", f, len(names), names)
		}
		for _, n := range names {
			switch {
			case scraped[n]:
			case hostDependent[n] && defined[n]:
				t.Logf("%s: %s not offered by this host (a %s cgroup)", f, n, layout())
			default:
				t.Errorf("%s uses %s, which no scrape had", f, n)
			}
		}
	}
}

// hostDependent are metrics a host may not offer (cgroup v1, no limit set, not in a pids
// cgroup): they are checked against the collector's definitions instead.
var hostDependent = map[string]bool{
	"psiflow_cgroup_memory_limit_bytes":               true,
	"psiflow_cgroup_memory_reclaimed_pages_total":     true,
	"psiflow_cgroup_memory_scanned_pages_total":       true,
	"psiflow_cgroup_pids_current":                     true,
	"psiflow_cgroup_pids_limit":                       true,
	"psiflow_cgroup_pids_max_events_total":            true,
	"psiflow_cgroup_cpu_throttled_seconds_total":      true,
	"psiflow_cgroup_cpu_throttled_periods_total":      true,
	"psiflow_cgroup_memory_under_oom":                 true,
	"psiflow_host_memory_reclaimed_pages_total":       true,
	"psiflow_cgroup_memory_workingset_refaults_total": true,
	"psiflow_cgroup_memory_major_faults_total":        true,
}

func layout() string {
	l, err := cgroup.DetectLayout()
	if err != nil {
		return "unknown"
	}
	return l.String()
}

// definedNames are the metric names psiflow's cgroup and host collectors can report.
func definedNames(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	ch := make(chan *prometheus.Desc, 64)
	go func() {
		cgroupmetrics.NewHost("/proc").Describe(ch)
		if g, err := cgroup.Self(); err == nil {
			cgroupmetrics.New(g).Describe(ch)
		}
		close(ch)
	}()
	re := regexp.MustCompile(`fqName: "([^"]+)"`)
	for d := range ch {
		if m := re.FindStringSubmatch(d.String()); m != nil {
			out[m[1]] = true
		}
	}
	return out
}

var metricName = regexp.MustCompile(`\b(?:psiflow|go|process)_[a-z0-9_]+\b`)

// usedNames returns the metric names (not recording rules, which have colons) in f.
func usedNames(t *testing.T, f string) []string {
	t.Helper()
	b, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, m := range metricName.FindAllString(string(b), -1) {
		seen[m] = true
	}
	var out []string
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func labelValues(t *testing.T, p *promServer, label string) []string {
	t.Helper()
	resp, err := http.Get(p.url + "/api/v1/label/" + label + "/values")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct {
		Status string   `json:"status"`
		Data   []string `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || r.Status != "success" {
		t.Fatalf("label values of %s: %v %s", label, err, r.Status)
	}
	return r.Data
}

func get(t *testing.T, u string) []byte {
	resp, err := http.Get(u)
	if err != nil {
		t.Errorf("GET %s: %v", u, err)
		return nil
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("GET %s: %v %s", u, err, resp.Status)
	}
	return b
}

// scrapedValue finds the first sample of metric whose labels contain label in a
// text-format scrape.
func scrapedValue(scrape []byte, metric, label string) (float64, bool) {
	for _, line := range strings.Split(string(scrape), "\n") {
		if !strings.HasPrefix(line, metric+"{") || !strings.Contains(line, label) {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		return v, err == nil
	}
	return 0, false
}

// countingGatherer counts the scrapes of g.
type countingGatherer struct {
	g prometheus.Gatherer
	n atomic.Int64
}

func (c *countingGatherer) Gather() ([]*dto.MetricFamily, error) {
	c.n.Add(1)
	return c.g.Gather()
}

// synthFiles are the sizes of the files under dir.
func synthFiles(t *testing.T, dir string) []int64 {
	t.Helper()
	var sizes []int64
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		sizes = append(sizes, info.Size())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return sizes
}
