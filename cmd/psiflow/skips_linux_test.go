package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSummarySaysWhereSamplesWereSkipped runs demo -data with its default flags
// but -on-error skip over a folder with one file that is not an image: the
// summary counts the skip at decode, apart from the read skips (they were one
// count).
func TestSummarySaysWhereSamplesWereSkipped(t *testing.T) {
	data := genFolder(t, 4)
	bad := filepath.Join(data, "cat", "zz-not-an-image.jpg")
	if err := os.WriteFile(bad, []byte("not an image at all"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	code := dispatch(context.Background(), &out, &errOut, []string{"demo", "-data", data, "-on-error", "skip"})
	if code != 0 {
		t.Fatalf("exit %d:\n%s\n%s", code, out.String(), errOut.String())
	}
	if want := "1 bad samples skipped: 0 at read, 1 at decode (each named on standard error)"; !strings.Contains(out.String(), want) {
		t.Errorf("the summary lacks %q:\n%s", want, out.String())
	}
}
