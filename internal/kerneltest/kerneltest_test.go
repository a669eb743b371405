package kerneltest

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestSkipFailsWhenRequiredAndSupported runs this test binary again, in a
// child, with the switch on and off around a test that skips on a feature.
func TestSkipFailsWhenRequiredAndSupported(t *testing.T) {
	if os.Getenv("KERNELTEST_CHILD") != "" {
		t.Skip("parent only")
	}
	// A feature this host has, if any.
	var have Feature
	for _, f := range []Feature{PSI, Reclaim, IOUring, Cgroups} {
		if ok, _ := Supported(f); ok {
			have = f
			break
		}
	}
	run := func(require string, f Feature) (string, error) {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestChildSkips$", "-test.v")
		cmd.Env = append(os.Environ(), "KERNELTEST_CHILD="+string(f), EnvRequire+"="+require)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := run("1", "no-such-feature"); err != nil || !strings.Contains(out, "SKIP") {
		t.Errorf("an unsupported feature with the switch on must skip: %v\n%s", err, out)
	}
	if have == "" {
		t.Logf("this host supports none of the features; only the skip side was checked")
		return
	}
	if out, err := run("0", have); err != nil || !strings.Contains(out, "SKIP") {
		t.Errorf("switch off: a skip must stay a skip: %v\n%s", err, out)
	}
	if out, err := run("1", have); err == nil || !strings.Contains(out, "FAIL") || !strings.Contains(out, string(have)) {
		t.Errorf("switch on and %s supported: the skip must fail: %v\n%s", have, err, out)
	}
}

func TestChildSkips(t *testing.T) {
	f := os.Getenv("KERNELTEST_CHILD")
	if f == "" {
		t.Skip("child only")
	}
	Skip(t, Feature(f), "the test could not get %s", f)
	t.Fatal("Skip returned")
}

func TestProbesAnswer(t *testing.T) {
	for _, f := range []Feature{PSI, Cgroups, IOUring, Reclaim} {
		ok, why := Supported(f)
		if why == "" {
			t.Errorf("%s: probe gave no reason", f)
		}
		t.Logf("%s: %v (%s)", f, ok, why)
	}
	if ok, _ := Supported("no-such-feature"); ok {
		t.Error("an unknown feature is supported")
	}
}
