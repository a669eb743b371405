package harness

import (
	"fmt"
	"html"
	"io"
	"math"
	"strings"
)

// plot geometry (pixels).
const (
	plotW, plotH           = 640, 280
	plotLeft, plotTop      = 60, 30
	plotRight, plotBottom  = 150, 40
	plotTicks              = 5
	plotStrokeWidth        = 1.5
	plotLimitDash          = "6,4"
	plotTimeoutMarkerWidth = 2
)

var plotColors = []string{"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"}

// WriteSVG draws the memory use of every run over time, one chart per limit, as an SVG
// image: one line per run (a colour per loader), the limit as a dashed line. It needs
// the runs' memory series (Options.Timeline); runs without one are left out.
func (r *Report) WriteSVG(w io.Writer) error {
	var limits []int64
	seen := map[int64]bool{}
	for _, run := range r.Runs {
		if !seen[run.Limit] && len(run.Memory) > 0 {
			seen[run.Limit] = true
			limits = append(limits, run.Limit)
		}
	}
	if len(limits) == 0 {
		return fmt.Errorf("harness: write SVG: no run has a memory series (set Options.Timeline)")
	}
	color := map[string]string{}
	for i, l := range r.Loaders {
		color[l.Name] = plotColors[i%len(plotColors)]
	}
	chartH := plotTop + plotH + plotBottom
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n",
		plotLeft+plotW+plotRight, chartH*len(limits))
	for i, limit := range limits {
		r.chart(&b, limit, i*chartH, color)
	}
	b.WriteString("</svg>\n")
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("harness: write SVG: %w", err)
	}
	return nil
}

func (r *Report) chart(b *strings.Builder, limit int64, y0 int, color map[string]string) {
	var runs []Result
	maxT, maxB := 1.0, float64(limit)
	for _, run := range r.Runs {
		if run.Limit != limit || len(run.Memory) == 0 {
			continue
		}
		runs = append(runs, run)
		for _, p := range run.Memory {
			maxT, maxB = math.Max(maxT, p.T), math.Max(maxB, float64(p.Bytes))
		}
	}
	maxT, maxMiB := niceCeil(maxT), niceCeil(maxB/(1<<20)*1.05)
	x := func(t float64) float64 { return plotLeft + t/maxT*plotW }
	y := func(bytes float64) float64 { return float64(y0+plotTop+plotH) - bytes/(1<<20)/maxMiB*plotH }
	fmt.Fprintf(b, `<text x="%d" y="%d" font-weight="bold">memory.current, limit %s</text>`+"\n", plotLeft, y0+18, FormatBytes(limit))
	fmt.Fprintf(b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#888"/>`+"\n", plotLeft, y0+plotTop, plotW, plotH)
	for k := 0; k <= plotTicks; k++ {
		tv, mv := maxT*float64(k)/plotTicks, maxMiB*float64(k)/plotTicks
		fmt.Fprintf(b, `<text x="%.1f" y="%d" text-anchor="middle">%g s</text>`+"\n", x(tv), y0+plotTop+plotH+16, tv)
		fmt.Fprintf(b, `<text x="%d" y="%.1f" text-anchor="end">%g MiB</text>`+"\n", plotLeft-4, y(mv*(1<<20))+4, mv)
	}
	if limit > 0 {
		fmt.Fprintf(b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#000" stroke-dasharray="%s"/>`+"\n",
			plotLeft, plotLeft+plotW, y(float64(limit)), y(float64(limit)), plotLimitDash)
	}
	for i, run := range runs {
		var pts []string
		for _, p := range run.Memory {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(p.T), y(float64(p.Bytes))))
		}
		c := color[run.Loader]
		fmt.Fprintf(b, `<polyline fill="none" stroke="%s" stroke-width="%g" points="%s"/>`+"\n", c, plotStrokeWidth, strings.Join(pts, " "))
		if run.Outcome != Finished {
			last := run.Memory[len(run.Memory)-1]
			fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="4" fill="none" stroke="%s" stroke-width="%d"/>`+"\n",
				x(last.T), y(float64(last.Bytes)), c, plotTimeoutMarkerWidth)
		}
		fmt.Fprintf(b, `<text x="%d" y="%d" fill="%s">%s r%d: %s</text>`+"\n", plotLeft+plotW+8, y0+plotTop+12+14*i, c,
			html.EscapeString(run.Loader), run.Round, run.Outcome)
	}
}

// niceCeil rounds v up to a round number (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6 or 8 times a
// power of ten).
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}
