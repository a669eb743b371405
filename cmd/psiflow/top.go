package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/psiflow/psiflow/internal/bytesize"
)

func init() {
	register(command{
		name:    "top",
		summary: "live view of a running pipeline's metrics (stage rates, bottleneck, budget, pressure, memory) from its -metrics endpoint",
		run:     runTop,
	})
}

func runTop(ctx context.Context, stdout io.Writer, args []string) error {
	fs := newFlagSet("top", stdout)
	interval := fs.Duration("interval", time.Second, "time between scrapes; rates are over one interval")
	once := fs.Bool("once", false, "scrape twice, one interval apart, print one view and exit")
	plain := fs.Bool("plain", !isTerminal(stdout), "print each view as plain lines instead of redrawing the screen (default when stdout is not a terminal)")
	fs.Usage = func() {
		fmt.Fprintln(stdout, "usage: psiflow top [flags] ADDR|URL   (the -metrics address of psiflow demo or psiflow-imagefolder, e.g. localhost:9464)")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%w: top takes one address (host:port or URL of /metrics)", errUsage)
	}
	if *interval <= 0 {
		return fmt.Errorf("%w: -interval %v: must be positive", errUsage, *interval)
	}
	url := metricsURL(fs.Arg(0))
	client := &http.Client{Timeout: max(2*time.Second, *interval)}
	prev, err := scrapeOnce(ctx, client, url)
	if err != nil {
		return err
	}
	tick := time.NewTicker(*interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			sayStopped(ctx, "top") // a signal is how a live view ends: exit 0
			return nil
		case <-tick.C:
		}
		cur, err := scrapeOnce(ctx, client, url)
		if err != nil {
			if *once {
				return err
			}
			fmt.Fprintf(stdout, "%s: %v\n", time.Now().Format(time.TimeOnly), err)
			continue
		}
		v := buildView(prev, cur)
		if !*plain {
			fmt.Fprint(stdout, "\x1b[H\x1b[2J")
		}
		v.write(stdout, url)
		if *once {
			return nil
		}
		if *plain {
			fmt.Fprintln(stdout)
		}
		prev = cur
	}
}

// metricsURL turns host:port into http://host:port/metrics; a URL is kept.
func metricsURL(s string) string {
	if strings.Contains(s, "://") {
		return s
	}
	return "http://" + s + "/metrics"
}

// scrape is one parsed /metrics response.
type scrape struct {
	at  time.Time
	fam map[string]*dto.MetricFamily
}

func scrapeOnce(ctx context.Context, c *http.Client, url string) (scrape, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return scrape{}, fmt.Errorf("top: %w", err)
	}
	resp, err := c.Do(req)
	if err != nil {
		return scrape{}, fmt.Errorf("top: scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return scrape{}, fmt.Errorf("top: scrape %s: %s", url, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fam, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return scrape{}, fmt.Errorf("top: scrape %s: %w", url, err)
	}
	return scrape{at: time.Now(), fam: fam}, nil
}

// series returns every sample of a family as label string -> value.
func (s scrape) series(name string) map[string]float64 {
	out := map[string]float64{}
	f := s.fam[name]
	if f == nil {
		return out
	}
	for _, m := range f.GetMetric() {
		var v float64
		switch {
		case m.Counter != nil:
			v = m.Counter.GetValue()
		case m.Gauge != nil:
			v = m.Gauge.GetValue()
		case m.Untyped != nil:
			v = m.Untyped.GetValue()
		default:
			continue
		}
		out[labelKey(m)] = v
	}
	return out
}

func labelKey(m *dto.Metric) string {
	var ls []string
	for _, l := range m.GetLabel() {
		ls = append(ls, l.GetName()+"="+l.GetValue())
	}
	sort.Strings(ls)
	return strings.Join(ls, ",")
}

func label(key, name string) string {
	for _, kv := range strings.Split(key, ",") {
		if k, v, ok := strings.Cut(kv, "="); ok && k == name {
			return v
		}
	}
	return ""
}

// sum adds every series of a family; ok is false when there is none.
func (s scrape) sum(name string) (v float64, ok bool) {
	for _, x := range s.series(name) {
		v += x
		ok = true
	}
	return v, ok
}

// stageRow is one stage's rates over the interval.
type stageRow struct {
	name, kind              string
	workers                 float64
	outPerSec, busy, waitIn float64
	waitOut                 float64
}

// view is what top shows, computed from two scrapes.
type view struct {
	secs                          float64
	samplesPerSec, readBps        float64
	haveSamples, haveRead         bool
	stages                        []stageRow
	bottleneck                    string
	budgetUse, budgetLimit        float64
	haveBudget                    bool
	level                         float64
	haveLevel                     bool
	permits, permitsUsed, waiting float64
	memCur, memLimit              float64
	haveMem, haveLimit            bool
	memTypes                      map[string]float64
	psi                           map[string]float64 // "memory some" -> share of time
	uma                           map[string]float64
}

func buildView(a, b scrape) view {
	v := view{secs: b.at.Sub(a.at).Seconds(), memTypes: map[string]float64{}, psi: map[string]float64{}, uma: map[string]float64{}}
	rate := func(name string) (float64, bool) {
		x, ok1 := a.sum(name)
		y, ok2 := b.sum(name)
		if !ok2 {
			return 0, false
		}
		if !ok1 || y < x { // new series or a reset (a new graph per epoch)
			x = 0
		}
		return (y - x) / v.secs, true
	}
	v.samplesPerSec, v.haveSamples = rate("psiflow_decode_images_total")
	v.readBps, v.haveRead = rate("psiflow_read_bytes_total")

	delta := func(name, key string) float64 {
		y := b.series(name)[key]
		x, ok := a.series(name)[key]
		if !ok || y < x {
			x = 0
		}
		return (y - x) / v.secs
	}
	workers := b.series("psiflow_stage_workers")
	keys := make([]string, 0, len(workers))
	for k := range workers {
		keys = append(keys, k)
	}
	// Sources first, sinks last, by name within a kind.
	order := map[string]int{"source": 0, "stage": 1, "sink": 2}
	sort.Slice(keys, func(i, j int) bool {
		oi, oj := order[label(keys[i], "kind")], order[label(keys[j], "kind")]
		if oi != oj {
			return oi < oj
		}
		return keys[i] < keys[j]
	})
	best := -1.0
	for _, k := range keys {
		r := stageRow{name: label(k, "stage"), kind: label(k, "kind"), workers: workers[k]}
		r.outPerSec = delta("psiflow_stage_items_out_total", k)
		if r.kind == "sink" {
			r.outPerSec = delta("psiflow_stage_items_in_total", k)
		}
		w := math.Max(r.workers, 1)
		r.busy = delta("psiflow_stage_busy_seconds_total", k) / w
		r.waitIn = delta("psiflow_stage_wait_input_seconds_total", k) / w
		r.waitOut = delta("psiflow_stage_wait_output_seconds_total", k) / w
		if r.busy > best {
			best, v.bottleneck = r.busy, r.name
		}
		v.stages = append(v.stages, r)
	}
	v.budgetUse, v.haveBudget = b.sum("psiflow_budget_in_use_bytes")
	v.budgetLimit, _ = b.sum("psiflow_budget_limit_bytes")
	v.level, v.haveLevel = b.sum("psiflow_pressure_level")
	v.permits, _ = b.sum("psiflow_pressure_gate_permits")
	v.permitsUsed, _ = b.sum("psiflow_pressure_gate_permits_in_use")
	v.waiting, _ = b.sum("psiflow_pressure_gate_waiting")
	v.memCur, v.haveMem = b.sum("psiflow_cgroup_memory_current_bytes")
	v.memLimit, v.haveLimit = b.sum("psiflow_cgroup_memory_limit_bytes")
	for k, x := range b.series("psiflow_cgroup_memory_bytes") {
		v.memTypes[label(k, "type")] = x
	}
	for k := range b.series("psiflow_cgroup_pressure_stalled_seconds_total") {
		v.psi[label(k, "resource")+" "+label(k, "kind")] = delta("psiflow_cgroup_pressure_stalled_seconds_total", k)
	}
	for k, x := range b.series("psiflow_uma_bytes") {
		if x > 0 {
			v.uma[label(k, "state")] = x
		}
	}
	return v
}

var levelWords = []string{"normal", "some", "full", "critical"}

func (v view) write(w io.Writer, url string) {
	fmt.Fprintf(w, "psiflow top  %s  %s  (rates over %.1fs)\n", url, time.Now().Format(time.TimeOnly), v.secs)
	var parts []string
	if v.haveSamples {
		parts = append(parts, fmt.Sprintf("%.0f samples/s", v.samplesPerSec))
	}
	if v.haveRead {
		parts = append(parts, fmt.Sprintf("read %s/s", bytesize.Human(int64(v.readBps))))
	}
	if v.bottleneck != "" {
		parts = append(parts, "bottleneck "+v.bottleneck)
	}
	if len(parts) > 0 {
		fmt.Fprintln(w, strings.Join(parts, "  "))
	}
	if v.haveBudget {
		pct := 0.0
		if v.budgetLimit > 0 {
			pct = 100 * v.budgetUse / v.budgetLimit
		}
		fmt.Fprintf(w, "budget   %s / %s (%.0f%%)\n", bytesize.Human(int64(v.budgetUse)), bytesize.Human(int64(v.budgetLimit)), pct)
	}
	if v.haveLevel {
		l := "?"
		if i := int(v.level); i >= 0 && i < len(levelWords) {
			l = levelWords[i]
		}
		fmt.Fprintf(w, "pressure %s  permits %.0f/%.0f in use, %.0f waiting\n", l, v.permitsUsed, v.permits, v.waiting)
	}
	if v.haveMem {
		fmt.Fprintf(w, "memory   %s", bytesize.Human(int64(v.memCur)))
		if v.haveLimit {
			fmt.Fprintf(w, " of %s (%.0f%%)", bytesize.Human(int64(v.memLimit)), 100*v.memCur/v.memLimit)
		}
		for _, t := range []string{"anon", "file"} {
			if x, ok := v.memTypes[t]; ok {
				fmt.Fprintf(w, "  %s %s", t, bytesize.Human(int64(x)))
			}
		}
		fmt.Fprintln(w)
	}
	if len(v.psi) > 0 {
		keys := make([]string, 0, len(v.psi))
		for k := range v.psi {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		fmt.Fprint(w, "psi     ")
		for _, k := range keys {
			// Totals are read at most every cgroupmetrics.MinPSIInterval: clamp the skew.
			fmt.Fprintf(w, " %s %.1f%%", k, 100*min(max(v.psi[k], 0), 1))
		}
		fmt.Fprintln(w)
	}
	if len(v.uma) > 0 {
		keys := make([]string, 0, len(v.uma))
		for k := range v.uma {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		fmt.Fprint(w, "uma     ")
		for _, k := range keys {
			fmt.Fprintf(w, " %s %s", k, bytesize.Human(int64(v.uma[k])))
		}
		fmt.Fprintln(w)
	}
	if len(v.stages) == 0 {
		fmt.Fprintln(w, "no graph running (no psiflow_stage_* metrics)")
		return
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "STAGE\tKIND\tWORKERS\tITEMS/s\tBUSY\tWAIT IN\tWAIT OUT\t")
	for _, r := range v.stages {
		mark := ""
		if r.name == v.bottleneck {
			mark = " *"
		}
		fmt.Fprintf(tw, "%s%s\t%s\t%.0f\t%.0f\t%.0f%%\t%.0f%%\t%.0f%%\t\n", r.name, mark, r.kind, r.workers, r.outPerSec, 100*r.busy, 100*r.waitIn, 100*r.waitOut)
	}
	tw.Flush()
}
