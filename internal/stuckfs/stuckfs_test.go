package stuckfs

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestReadsHangUntilUnblocked(t *testing.T) {
	data := bytes.Repeat([]byte("psiflow "), 5000)
	f := MountT(t, Options{Files: map[string][]byte{"a.bin": data, "sub/b.bin": data[:100]}, Stuck: []string{"a.bin"}})
	got, err := os.ReadFile(filepath.Join(f.Dir, "sub", "b.bin"))
	if err != nil || !bytes.Equal(got, data[:100]) {
		t.Fatalf("a file that does not hang: %v, %d bytes", err, len(got))
	}
	done := make(chan error, 1)
	var read []byte
	go func() {
		var err error
		read, err = os.ReadFile(filepath.Join(f.Dir, "a.bin"))
		done <- err
	}()
	select {
	case name := <-f.ReadStarted():
		if name != "a.bin" {
			t.Fatalf("started read of %q", name)
		}
	case <-time.After(time.Minute):
		t.Fatal("the read never reached the file system")
	}
	select {
	case err := <-done:
		t.Fatalf("a stuck read returned (%v)", err)
	case <-time.After(50 * time.Millisecond):
	}
	if f.Hanging() != 1 {
		t.Fatalf("%d reads hanging, want 1", f.Hanging())
	}
	f.Unblock()
	select {
	case err := <-done:
		if err != nil || !bytes.Equal(read, data) {
			t.Fatalf("after Unblock: %v, %d bytes", err, len(read))
		}
	case <-time.After(time.Minute):
		t.Fatal("Unblock did not release the read")
	}
}
