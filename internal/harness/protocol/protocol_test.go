package protocol

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		line    string
		want    Event
		ok      bool
		wantErr bool
	}{
		{name: "batch", line: `{"event":"batch","n":64,"t":1.5}`, want: Event{Event: Batch, N: 64, T: 1.5}, ok: true},
		{name: "done", line: `{"event":"done","samples":2000,"t":9}` + "\n", want: Event{Event: Done, Samples: 2000, T: 9}, ok: true},
		{name: "done with error", line: `  {"event":"done","error":"boom","t":2}`, want: Event{Event: Done, Error: "boom", T: 2}, ok: true},
		{name: "other event", line: `{"event":"start","t":0.1}`, want: Event{Event: "start", T: 0.1}, ok: true},
		{name: "log line", line: "loading 2000 images", ok: false},
		{name: "blank", line: "", ok: false},
		{name: "broken json", line: `{"event":"batch","n":`, ok: false},
		{name: "json without event", line: `{"n":3}`, ok: false},
		{name: "negative n", line: `{"event":"batch","n":-1,"t":1}`, ok: true, wantErr: true},
		{name: "negative t", line: `{"event":"batch","n":1,"t":-1}`, ok: true, wantErr: true},
		{name: "co-tenant ramp", line: `{"event":"ramp","bytes":4096,"t":0.2}`, want: Event{Event: Ramp, Bytes: 4096, T: 0.2}, ok: true},
		{name: "co-tenant held", line: `{"event":"held","bytes":8192,"t":5}`, want: Event{Event: Held, Bytes: 8192, T: 5}, ok: true},
		{name: "negative bytes", line: `{"event":"held","bytes":-1,"t":5}`, ok: true, wantErr: true},
		{name: "co-tenant fell", line: `{"event":"fell","bytes":4096,"t":9}`, want: Event{Event: Fell, Bytes: 4096, T: 9}, ok: true},
		{name: "start with files", line: `{"event":"start","files":1000,"epochs":3,"t":0.1}`, want: Event{Event: Start, Files: 1000, Epochs: 3, T: 0.1}, ok: true},
		{name: "negative files", line: `{"event":"start","files":-1,"t":0.1}`, ok: true, wantErr: true},
		{name: "batch with keys", line: `{"event":"batch","n":2,"keys":["a/1.jpg","a/2.jpg"],"t":1}`, want: Event{Event: Batch, N: 2, Keys: []string{"a/1.jpg", "a/2.jpg"}, T: 1}, ok: true},
		{name: "keys and n disagree", line: `{"event":"batch","n":3,"keys":["a/1.jpg","a/2.jpg"],"t":1}`, ok: true, wantErr: true},
		{name: "epoch", line: `{"event":"epoch","epoch":2,"t":4}`, want: Event{Event: Epoch, Epoch: 2, T: 4}, ok: true},
		{name: "epoch 0", line: `{"event":"epoch","t":4}`, ok: true, wantErr: true},
		{name: "pause", line: `{"event":"pause","t":4}`, want: Event{Event: Pause, T: 4}, ok: true},
		{name: "resume", line: `{"event":"resume","t":6}`, want: Event{Event: Resume, T: 6}, ok: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev, ok, err := Parse([]byte(tt.line))
			if ok != tt.ok || (err != nil) != tt.wantErr {
				t.Fatalf("Parse(%q) = ok %v, err %v; want ok %v, error %v", tt.line, ok, err, tt.ok, tt.wantErr)
			}
			if !tt.wantErr && !reflect.DeepEqual(ev, tt.want) {
				t.Errorf("Parse(%q) = %+v, want %+v", tt.line, ev, tt.want)
			}
		})
	}
}

func TestEmitterRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	e := NewEmitter(&buf)
	sizes := []int{64, 64, 17}
	for _, n := range sizes {
		if err := e.Batch(n); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Done(errors.New("disk on fire")); err != nil {
		t.Fatal(err)
	}
	var got []Event
	sc := bufio.NewScanner(&buf)
	for sc.Scan() {
		ev, ok, err := Parse(sc.Bytes())
		if !ok || err != nil {
			t.Fatalf("line %q: ok %v err %v", sc.Text(), ok, err)
		}
		got = append(got, ev)
	}
	if len(got) != len(sizes)+1 {
		t.Fatalf("got %d events, want %d", len(got), len(sizes)+1)
	}
	last := 0.0
	for i, ev := range got {
		if ev.T < last {
			t.Errorf("event %d: time %v goes back from %v", i, ev.T, last)
		}
		last = ev.T
		if i < len(sizes) && (ev.Event != Batch || ev.N != sizes[i]) {
			t.Errorf("event %d = %+v, want batch of %d", i, ev, sizes[i])
		}
	}
	if d := got[len(got)-1]; d.Event != Done || d.Samples != 145 || d.Error != "disk on fire" {
		t.Errorf("done = %+v, want 145 samples and the error", d)
	}
	if e.Samples() != 145 {
		t.Errorf("Samples() = %d, want 145", e.Samples())
	}
}

func TestEmitterKeysAndEpochs(t *testing.T) {
	var buf bytes.Buffer
	e := NewEmitter(&buf)
	if err := e.BatchKeys([]string{"a/1.jpg", "a/2.jpg"}); err != nil {
		t.Fatal(err)
	}
	if err := e.EndEpoch(1); err != nil {
		t.Fatal(err)
	}
	if err := e.BatchKeys([]string{"a/2.jpg"}); err != nil {
		t.Fatal(err)
	}
	var got []Event
	sc := bufio.NewScanner(&buf)
	for sc.Scan() {
		ev, ok, err := Parse(sc.Bytes())
		if !ok || err != nil {
			t.Fatalf("line %q: ok %v err %v", sc.Text(), ok, err)
		}
		ev.T = 0
		got = append(got, ev)
	}
	want := []Event{
		{Event: Batch, N: 2, Keys: []string{"a/1.jpg", "a/2.jpg"}},
		{Event: Epoch, Epoch: 1},
		{Event: Batch, N: 1, Keys: []string{"a/2.jpg"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("events %+v, want %+v", got, want)
	}
	if e.Samples() != 3 {
		t.Errorf("Samples() = %d, want 3", e.Samples())
	}
}

type failWriter struct{ n int }

func (f *failWriter) Write(p []byte) (int, error) {
	f.n++
	return 0, errors.New("broken pipe")
}

func TestEmitterStopsAfterWriteError(t *testing.T) {
	w := &failWriter{}
	e := NewEmitter(w)
	if err := e.Batch(1); err == nil || !strings.Contains(err.Error(), "batch") {
		t.Fatalf("Batch error = %v, want one naming the batch event", err)
	}
	if err := e.Done(nil); err == nil {
		t.Fatal("Done after a failed write succeeded")
	}
	if w.n != 1 {
		t.Errorf("writer called %d times, want 1 (no writes after the first failure)", w.n)
	}
}

func ExampleEmitter() {
	e := NewEmitter(os.Stdout)
	for range 3 {
		// ... deliver a batch of 64 samples to the consumer, then:
		_ = e.Batch(64)
	}
	_ = e.Done(nil)
	fmt.Println(e.Samples(), "samples reported")
}

func ExampleParse() {
	ev, ok, err := Parse([]byte(`{"event":"batch","n":64,"t":0.5}`))
	fmt.Println(ev.Event, ev.N, ev.T, ok, err)
	_, ok, _ = Parse([]byte("epoch 1 starting"))
	fmt.Println(ok)
	// Output:
	// batch 64 0.5 true <nil>
	// false
}
