package sink

import "testing"

func TestAutoSlots(t *testing.T) {
	for _, tc := range []struct {
		size int64
		want int
	}{
		{64 * 3 * 224 * 224, 4},     // uint8 batch of 64 (9.6 MB): 6 fit, at most 4
		{64 * 3 * 224 * 224 * 4, 2}, // float32 twin (38.5 MB): 1 fits, at least 2
		{20 << 20, 3},
		{16 << 20, 4},
		{AutoRingBytes, 2},
		{1 << 40, 2},
		{4096, 4},
		{0, 4},
	} {
		if got := autoSlots(tc.size); got != tc.want {
			t.Errorf("autoSlots(%d) = %d, want %d", tc.size, got, tc.want)
		}
	}
}
