package main

import (
	"context"
	"fmt"

	"github.com/psiflow/psiflow/stage/decode"
)

func init() {
	registerCheck(hostCheck{
		order: 500,
		name:  "JPEG decoder",
		probe: probeJPEG,
	})
}

// probeJPEG reports whether JPEGs decode through TurboJPEG (which library,
// which API) or through the standard library's fallback, and why.
func probeJPEG(ctx context.Context) (bool, string) {
	d, err := decode.NewDecoder(decode.Options{})
	if err != nil {
		return false, err.Error()
	}
	defer d.Close()
	if r := d.FallbackReason(); r != nil {
		return false, fmt.Sprintf("standard library image/jpeg (≈3× slower): %v", r)
	}
	if lib, why := d.CropDecoding(); why != nil {
		return true, d.Library() + "; crop-aware decoding off (random resized crops decode whole JPEGs): " + why.Error()
	} else {
		return true, d.Library() + "; crop-aware decoding: " + lib
	}
}
