//go:build linux

package main

import "testing"

func TestParseSize(t *testing.T) {
	cases := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"0", 0, true},
		{"256M", 256 << 20, true},
		{"128MiB", 128 << 20, true},
		{"1G", 1 << 30, true},
		{"4096", 4096, true},
		{"12K", 12 << 10, true},
		{"-1", 0, false},
		{"lots", 0, false},
	}
	for _, c := range cases {
		got, err := parseSize(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("parseSize(%q) = %d, %v; want %d, ok=%v", c.in, got, err, c.want, c.ok)
		}
	}
}
