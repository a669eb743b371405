package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// readmeBlock returns the first fenced block of kind lang ("sh", "python")
// after the heading of README.md's section named section.
func readmeBlock(t *testing.T, section, lang string) string {
	t.Helper()
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	i := strings.Index(text, "\n## "+section+"\n")
	if i < 0 {
		t.Fatalf("README.md has no section %q", section)
	}
	text = text[i:]
	if j := strings.Index(text[1:], "\n## "); j >= 0 {
		text = text[:j+1]
	}
	start := strings.Index(text, "\n```"+lang+"\n")
	if start < 0 {
		t.Fatalf("README.md's %q has no ```%s block", section, lang)
	}
	body := text[start+len("\n```"+lang+"\n"):]
	end := strings.Index(body, "\n```")
	if end < 0 {
		t.Fatalf("README.md's %q: unterminated ```%s block", section, lang)
	}
	return body[:end+1]
}

// installPython runs README.md's install commands (From Python) verbatim with
// Debian's python3 in a fresh folder whose ./python is this repository's
// python/, and returns the virtual environment's python.
func installPython(t *testing.T) string {
	t.Helper()
	pythonWithNumpy(t)
	dir := t.TempDir()
	repoPython, err := filepath.Abs("../../python")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(repoPython, filepath.Join(dir, "python")); err != nil {
		t.Fatal(err)
	}
	script := readmeBlock(t, "From Python", "sh")
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = dir
	// Debian's python3 first: the python3 first on PATH here has no numpy.
	cmd.Env = append(withoutEnv("PSIFLOW_BIN", "PATH", "PYTHONPATH"), "PATH=/usr/bin:"+os.Getenv("PATH"))
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("README.md's install commands failed: %v\n%s\n%s", err, script, out)
	}
	t.Logf("installed as README.md says in %s:\n%s", time.Since(start).Round(time.Second), script)
	return filepath.Join(dir, ".venv", "bin", "python")
}

// withoutEnv returns the environment less the named variables.
func withoutEnv(names ...string) []string {
	var out []string
	for _, kv := range os.Environ() {
		keep := true
		for _, n := range names {
			if strings.HasPrefix(kv, n+"=") {
				keep = false
			}
		}
		if keep {
			out = append(out, kv)
		}
	}
	return out
}

// TestPythonInstall installs the package as the README says, in a fresh
// virtual environment, and runs a loop from outside the repository with no
// PSIFLOW_BIN: the installed module must find its own psiflow binary, and the
// `psiflow` command pip installed must run it.
func TestPythonInstall(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and installs the Python package")
	}
	py := installPython(t)
	data := filepath.Join(t.TempDir(), "data")
	for _, class := range []string{"a", "b"} {
		var out bytes.Buffer
		if code := dispatch(context.Background(), &out, &out, []string{"gen", "jpeg", "-out", filepath.Join(data, class), "-n", "9", "-width", "64", "-height", "48"}); code != 0 {
			t.Fatalf("gen: exit %d: %s", code, out.String())
		}
	}
	loop := `
import os, sys, psiflow
assert psiflow.__file__.startswith(sys.prefix), "imported " + psiflow.__file__ + ", not the installed package"
from psiflow import _binary
assert _binary.find() == _binary.PACKAGED, _binary.find()
n, labels = 0, set()
loader = psiflow.DataLoader(sys.argv[1], batch_size=4)   # the defaults: shuffled, val transform
assert len(loader) == 5, len(loader)
for images, y in loader:
    assert tuple(images.shape[1:]) == (3, 224, 224), images.shape
    n += len(images)
    labels.update(int(v) for v in y)
print("samples", n, "labels", sorted(labels))
`
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, "-c", loop, data)
	cmd.Dir = t.TempDir() // not the repository: python/ must not shadow the installed package
	cmd.Env = withoutEnv("PSIFLOW_BIN", "PYTHONPATH")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "samples 18 labels [0, 1]") {
		t.Fatalf("loop in the installed package: %v\n%s", err, out)
	}
	cli := exec.CommandContext(ctx, filepath.Join(filepath.Dir(py), "psiflow"), "help")
	cli.Env = withoutEnv("PSIFLOW_BIN")
	if out, err := cli.CombinedOutput(); err != nil || !strings.Contains(string(out), "Usage: psiflow") {
		t.Fatalf("the installed psiflow command: %v\n%s", err, out)
	}
}
