package pkgtest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

const repo = "../.."

// The virtual environment every test uses, made once by [install] and removed
// by TestMain.
var (
	installOnce sync.Once
	installDir  string
	installErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if installDir != "" {
		os.RemoveAll(installDir)
	}
	os.Exit(code)
}

// block is one fenced code block of a Markdown file.
type block struct {
	lang, text string
	line       int
}

// blocks returns the fenced blocks of file (relative to the repository) in
// order; with section set, only those under the "## section" heading.
func blocks(t *testing.T, file, section string) []block {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repo, file))
	if err != nil {
		t.Fatal(err)
	}
	var out []block
	in, cur := section == "", (*block)(nil)
	for i, line := range strings.Split(string(raw), "\n") {
		switch {
		case cur != nil && line == "```":
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.text += line + "\n"
		case strings.HasPrefix(line, "## ") && section != "":
			in = line == "## "+section
		case in && strings.HasPrefix(line, "```"):
			cur = &block{lang: strings.TrimPrefix(line, "```"), line: i + 1}
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s: no code blocks (section %q)", file, section)
	}
	return out
}

// need returns Debian's python3 when it imports every module, else skips the
// test (fails it under PSIFLOW_REQUIRE_PYTHON=1, as make test sets).
func need(t *testing.T, modules ...string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("installs and runs the Python package")
	}
	py := "/usr/bin/python3"
	for _, m := range modules {
		if out, err := exec.Command(py, "-c", "import "+m).CombinedOutput(); err != nil {
			msg := fmt.Sprintf("%s cannot import %s (make test installs it from Debian): %v\n%s", py, m, err, out)
			if os.Getenv("PSIFLOW_REQUIRE_PYTHON") == "1" {
				t.Fatal(msg)
			}
			t.Skip(msg)
		}
	}
	return py
}

// env is the environment the user's commands run in: Debian's python3 first
// on PATH (the python3 first on this machine's PATH has no numpy), nothing that
// would point psiflow elsewhere or shard it.
func env() []string {
	var out []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch name {
		case "PSIFLOW_BIN", "PYTHONPATH", "RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "PATH":
			continue
		}
		out = append(out, kv)
	}
	return append(out, "PATH=/usr/bin:"+os.Getenv("PATH"), "PYTHONDONTWRITEBYTECODE=1", "OMP_NUM_THREADS=1")
}

// install runs README.md's install commands (the first sh block of "From
// Python") verbatim, once, in a fresh folder whose ./python is this
// repository's python/, and returns that folder; its .venv holds the package.
func install(t *testing.T) string {
	t.Helper()
	need(t, "numpy", "venv", "setuptools", "wheel")
	installOnce.Do(func() {
		dir, err := os.MkdirTemp("", "psiflow-pkgtest-")
		if err != nil {
			installErr = err
			return
		}
		installDir = dir
		abs, err := filepath.Abs(filepath.Join(repo, "python"))
		if err == nil {
			err = os.Symlink(abs, filepath.Join(dir, "python"))
		}
		if err != nil {
			installErr = err
			return
		}
		b := blocks(t, "README.md", "From Python")[0]
		start := time.Now()
		if out, err := runBlock(dir, b, 8*time.Minute); err != nil {
			installErr = fmt.Errorf("README.md:%d, the install commands: %v\n%s%s", b.line, err, b.text, out)
			return
		}
		t.Logf("installed as README.md says in %s", time.Since(start).Round(time.Second))
	})
	if installErr != nil {
		t.Fatal(installErr)
	}
	return installDir
}

// runBlock runs a sh block with bash, or a python block with the
// environment's python (a block whose first line is "# NAME.py" is written to
// NAME.py instead), in dir.
func runBlock(dir string, b block, timeout time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var cmd *exec.Cmd
	switch b.lang {
	case "sh":
		cmd = exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", b.text)
	case "python":
		first, _, _ := strings.Cut(b.text, "\n")
		if name, ok := strings.CutPrefix(first, "# "); ok && strings.HasSuffix(name, ".py") && !strings.Contains(name, " ") {
			return "", os.WriteFile(filepath.Join(dir, name), []byte(b.text), 0o644)
		}
		cmd = exec.CommandContext(ctx, filepath.Join(dir, ".venv", "bin", "python"), "-c", b.text)
	default:
		return "", fmt.Errorf("block of kind %q: not runnable", b.lang)
	}
	cmd.Dir = dir
	cmd.Env = env()
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestInstall checks what the install gave: from outside the repository and
// without PSIFLOW_BIN, the module imported is the installed one, it runs its
// own binary, a loop with the defaults delivers every image with its label, and
// the psiflow command pip installed runs the program.
func TestInstall(t *testing.T) {
	t.Parallel()
	dir := install(t)
	py := filepath.Join(dir, ".venv", "bin", "python")
	data := filepath.Join(t.TempDir(), "data")
	gen(t, dir, data, 9)
	loop := `
import sys, psiflow
from psiflow import _binary
assert psiflow.__file__.startswith(sys.prefix), "imported " + psiflow.__file__ + ", not the installed package"
assert _binary.find() == _binary.PACKAGED, _binary.find()
loader = psiflow.DataLoader(sys.argv[1], batch_size=4)   # the defaults: shuffled, val transform
assert len(loader) == 5, len(loader)
n, labels = 0, set()
for images, y in loader:
    assert tuple(images.shape[1:]) == (3, 224, 224), images.shape
    n += len(images)
    labels.update(int(v) for v in y)
print("samples", n, "labels", sorted(labels))
`
	cmd := exec.Command(py, "-c", loop, data)
	cmd.Dir = t.TempDir() // not the repository: python/ must not shadow the installed package
	cmd.Env = env()
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "samples 18 labels [0, 1]") {
		t.Fatalf("a loop over the installed package: %v\n%s", err, out)
	}
	cli := exec.Command(filepath.Join(dir, ".venv", "bin", "psiflow"), "help")
	cli.Env = env()
	if out, err := cli.CombinedOutput(); err != nil || !strings.Contains(string(out), "Usage: psiflow") {
		t.Fatalf("the installed psiflow command: %v\n%s", err, out)
	}
}

// gen writes an ImageFolder of two classes of n small JPEGs with the
// installed psiflow.
func gen(t *testing.T, dir, data string, n int) {
	t.Helper()
	for _, class := range []string{"cat", "dog"} {
		cmd := exec.Command(filepath.Join(dir, ".venv", "bin", "psiflow"), "gen", "jpeg", "-out", filepath.Join(data, class),
			"-n", fmt.Sprint(n), "-width", "64", "-height", "48")
		cmd.Env = env()
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("psiflow gen: %v\n%s", err, out)
		}
	}
}

// TestDocs runs, verbatim and in order, the code of README.md's "From Python"
// after the install (an ImageFolder, then the loop) and every block of
// docs/PYTORCH.md, in the installed folder; a block the same as one already run
// (the install, the ImageFolder) runs once.
func TestDocs(t *testing.T) {
	t.Parallel()
	dir := install(t)
	need(t, "torch")
	ran := map[string]bool{blocks(t, "README.md", "From Python")[0].text: true} // install ran it
	for _, doc := range []struct{ file, section string }{{"README.md", "From Python"}, {"docs/PYTORCH.md", ""}} {
		for _, b := range blocks(t, doc.file, doc.section) {
			if ran[b.text] { // the same commands on both pages (install, the ImageFolder)
				continue
			}
			ran[b.text] = true
			start := time.Now()
			out, err := runBlock(dir, b, 5*time.Minute)
			if err != nil {
				t.Fatalf("%s:%d: %v\n%s\n%s", doc.file, b.line, err, b.text, out)
			}
			t.Logf("%s:%d (%s, %s):\n%s", doc.file, b.line, b.lang, time.Since(start).Round(100*time.Millisecond), out)
		}
	}
}

// TestTorchrun launches two ranks with torch.distributed.run (Debian's torch
// 1.13, gloo on CPU; --redirects 1 --tee 1, since its defaults fail on Python
// 3.11), each with a psiflow.DataLoader taking its rank from torch.distributed:
// every file exactly once per epoch across ranks, a new order every epoch, and
// rank 1 SIGKILLed mid-epoch, restarted by torchrun from its last state_dict,
// completing the epoch exactly once. python/tests/torchrun_worker.py checks
// it all and prints TORCHRUN-OK.
func TestTorchrun(t *testing.T) {
	t.Parallel()
	dir := install(t)
	need(t, "torch.distributed.run")
	work := t.TempDir()
	data := filepath.Join(work, "data")
	gen(t, dir, data, 10)
	ckpt := filepath.Join(work, "ckpt")
	if err := os.Mkdir(ckpt, 0o755); err != nil {
		t.Fatal(err)
	}
	worker, err := filepath.Abs(filepath.Join(repo, "python", "tests", "torchrun_worker.py"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(dir, ".venv", "bin", "python"), "-m", "torch.distributed.run",
		// A free port: --standalone's fixed 29400 joins another job's rendezvous.
		"--nnodes", "1", "--rdzv_backend", "c10d", "--rdzv_endpoint", "localhost:0",
		"--nproc_per_node", "2", "--max_restarts", "1", "--redirects", "1", "--tee", "1",
		worker, data, ckpt)
	cmd.Dir = work
	cmd.Env = env()
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "TORCHRUN-OK") {
		t.Fatalf("torchrun: %v\n%s", err, out)
	}
	for _, want := range []string{"rank 1: killing itself", "rank 1: resumed at epoch 2, offset 12"} {
		if !strings.Contains(string(out), want) {
			t.Fatalf("torchrun output lacks %q:\n%s", want, out)
		}
	}
}
