package decode

import (
	"strings"
	"testing"

	"github.com/psiflow/psiflow/tensor"
)

func TestRawToTensor(t *testing.T) {
	var tt tensor.Tensor
	if err := RawToTensor(&tt, []byte{1, 2, 3, 4, 5, 6}, []int{1, 2, 3}, "k"); err != nil || tt.Len() != 6 || tt.U8[5] != 6 {
		t.Fatalf("RawToTensor: %v %v", err, tt)
	}
	err := RawToTensor(&tt, []byte{1, 2, 3}, []int{2, 2}, "sample-7")
	if err == nil || !strings.Contains(err.Error(), "sample-7") {
		t.Fatalf("length mismatch: %v", err)
	}
}
