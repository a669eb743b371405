package metrics_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

type dashboard struct {
	Title  string `json:"title"`
	UID    string `json:"uid"`
	Panels []struct {
		ID      int    `json:"id"`
		Type    string `json:"type"`
		Title   string `json:"title"`
		Targets []struct {
			Expr  string `json:"expr"`
			RefID string `json:"refId"`
		} `json:"targets"`
	} `json:"panels"`
}

// TestDashboard checks the Grafana dashboard's structure and has promtool parse every
// expression in it (as recording rules in a temporary rule file).
func TestDashboard(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot, "deploy/grafana/psiflow.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("deploy/grafana/psiflow.json: %v", err)
	}
	if d.UID == "" || d.Title == "" {
		t.Error("dashboard without a uid or title")
	}
	ids := map[int]bool{}
	var rules strings.Builder
	rules.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	n := 0
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d used twice", p.ID)
		}
		ids[p.ID] = true
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			if strings.TrimSpace(tg.Expr) == "" || tg.RefID == "" {
				t.Errorf("panel %q: empty query or refId", p.Title)
			}
			// Grafana's variables are plain strings inside label matchers.
			expr := strings.ReplaceAll(tg.Expr, "$instance", ".*")
			fmt.Fprintf(&rules, "      - record: dashboard:q%d\n        expr: %q\n", n, expr)
			n++
		}
	}
	if n < 20 {
		t.Errorf("only %d queries in the dashboard", n)
	}
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("no promtool (Debian package prometheus; make test installs it)")
	}
	f := filepath.Join(t.TempDir(), "dashboard-rules.yml")
	if err := os.WriteFile(f, []byte(rules.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool, "check", "rules", f).CombinedOutput(); err != nil {
		t.Errorf("promtool check rules on the dashboard's queries: %v\n%s", err, out)
	}
}
