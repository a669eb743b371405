package pressure

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestTriggerValidate(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name       string
		trig       Trigger
		privileged bool
		wantErr    string
		needPriv   bool
	}{
		{name: "2s unprivileged", trig: Trigger{Stall: 100 * ms, Window: 2 * time.Second}},
		{name: "10s full unprivileged", trig: Trigger{Full: true, Stall: 10 * time.Second, Window: 10 * time.Second}},
		{name: "500ms privileged", trig: Trigger{Stall: 50 * ms, Window: 500 * ms}, privileged: true},
		{name: "500ms unprivileged", trig: Trigger{Stall: 50 * ms, Window: 500 * ms}, wantErr: "multiple of 2s", needPriv: true},
		{name: "3s unprivileged", trig: Trigger{Stall: 50 * ms, Window: 3 * time.Second}, wantErr: "CAP_SYS_RESOURCE", needPriv: true},
		{name: "window too short", trig: Trigger{Stall: 50 * ms, Window: 400 * ms}, privileged: true, wantErr: "outside the kernel's range"},
		{name: "window too long", trig: Trigger{Stall: 50 * ms, Window: 12 * time.Second}, privileged: true, wantErr: "outside the kernel's range"},
		{name: "stall over window", trig: Trigger{Stall: 3 * time.Second, Window: 2 * time.Second}, wantErr: "exceeds the window"},
		{name: "zero stall", trig: Trigger{Window: 2 * time.Second}, wantErr: "must be positive"},
		{name: "sub-microsecond stall", trig: Trigger{Stall: 1500 * time.Nanosecond, Window: 2 * time.Second}, wantErr: "whole number of microseconds"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.trig.Validate(tt.privileged)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Validate error = %v, want one containing %q", err, tt.wantErr)
			}
			if got := errors.Is(err, ErrNeedsPrivilege); got != tt.needPriv {
				t.Fatalf("errors.Is(err, ErrNeedsPrivilege) = %v, want %v (err %v)", got, tt.needPriv, err)
			}
		})
	}
}

func TestParseTrigger(t *testing.T) {
	tests := []struct {
		in      string
		want    Trigger
		wantErr bool
	}{
		{in: "some 100000 2000000", want: Trigger{Stall: 100 * time.Millisecond, Window: 2 * time.Second}},
		{in: "full 500 500000", want: Trigger{Full: true, Stall: 500 * time.Microsecond, Window: 500 * time.Millisecond}},
		{in: "most 1 2", wantErr: true},
		{in: "some 1", wantErr: true},
		{in: "some -1 2", wantErr: true},
		{in: "some 1 99999999999", wantErr: true},
	}
	for _, tt := range tests {
		got, err := ParseTrigger(tt.in)
		if (err != nil) != tt.wantErr {
			t.Errorf("ParseTrigger(%q) error = %v, want error %v", tt.in, err, tt.wantErr)
			continue
		}
		if err == nil {
			if got != tt.want {
				t.Errorf("ParseTrigger(%q) = %+v, want %+v", tt.in, got, tt.want)
			}
			if got.String() != tt.in {
				t.Errorf("ParseTrigger(%q).String() = %q", tt.in, got.String())
			}
		}
	}
}

func TestThresholdsFor(t *testing.T) {
	tests := []struct {
		name       string
		cfg        ThresholdsConfig
		some, full string
		wantErr    string
	}{
		{name: "seed example", cfg: ThresholdsConfig{TargetIOPS: 50000, ReclaimP99: 150 * time.Millisecond},
			some: "some 100 2000000", full: "full 450000 2000000"},
		{name: "safety 10 at 1000 IOPS", cfg: ThresholdsConfig{TargetIOPS: 1000, Safety: 10, ReclaimP99: 20 * time.Millisecond, Window: 4 * time.Second},
			some: "some 10000 4000000", full: "full 60000 4000000"},
		{name: "rounds up to a microsecond", cfg: ThresholdsConfig{TargetIOPS: 3e6, Safety: 1, ReclaimP99: time.Millisecond},
			some: "some 1 2000000", full: "full 3000 2000000"},
		{name: "privileged window", cfg: ThresholdsConfig{TargetIOPS: 50000, ReclaimP99: 100 * time.Millisecond, Window: 500 * time.Millisecond},
			some: "some 100 500000", full: "full 300000 500000"},
		{name: "full over window", cfg: ThresholdsConfig{TargetIOPS: 50000, ReclaimP99: time.Second}, wantErr: "exceeds the window"},
		{name: "no IOPS", cfg: ThresholdsConfig{ReclaimP99: time.Second}, wantErr: "target IOPS"},
		{name: "no reclaim latency", cfg: ThresholdsConfig{TargetIOPS: 10}, wantErr: "reclaim p99"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			some, full, err := ThresholdsFor(tt.cfg)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if some.String() != tt.some || full.String() != tt.full {
				t.Fatalf("got %q, %q; want %q, %q", some, full, tt.some, tt.full)
			}
		})
	}
}
