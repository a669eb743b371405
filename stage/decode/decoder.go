package decode

import (
	"errors"
	"fmt"
	"sync"

	"github.com/psiflow/psiflow/stage/decode/turbojpeg"
)

// Backend selects the JPEG decoder.
type Backend int

const (
	// BackendAuto uses TurboJPEG when the library loads and the standard
	// library otherwise (the reason is kept in [Decoder.FallbackReason]).
	BackendAuto Backend = iota
	// BackendTurbo requires TurboJPEG: [NewDecoder] fails without it.
	BackendTurbo
	// BackendStd always uses the standard library's image/jpeg.
	BackendStd
)

// String names the backend.
func (b Backend) String() string {
	switch b {
	case BackendAuto:
		return "auto"
	case BackendTurbo:
		return "turbojpeg"
	case BackendStd:
		return "stdlib"
	}
	return fmt.Sprintf("backend(%d)", int(b))
}

// Options configure a [Decoder]. The zero value is the recommended setting:
// TurboJPEG when available, accurate DCT (bit-exact with Pillow), and DCT
// scaling where the caller allows it ([Transform.Exact] for a [Processor],
// minShort for [Decoder.Decode]).
type Options struct {
	// Backend selects the JPEG decoder.
	Backend Backend
	// FastDCT trades ≈1 level of mean error for a few percent of speed.
	FastDCT bool
	// NoDCTScaling always decodes JPEGs at full size, whatever a
	// [Transform] or a minShort given to [Decoder.Decode] allows (what
	// Pillow without draft does).
	NoDCTScaling bool
	// DCTScaleMargin is, for [Decoder.Decode] with a minShort, how many
	// times larger than minShort the scaled image's shorter side must stay;
	// 0 means 2. A [Processor] does not use it: it decodes at reduced size
	// when the transform's next size is at most half the source (see
	// [Transform.Exact]). Only the factors 1/2, 1/4 and 1/8 are used
	// (libjpeg-turbo's others are no faster than the next of these).
	DCTScaleMargin float64
	// MaxPixels is the largest width × height decoded; a larger image is
	// refused from its header, before anything is allocated, with a
	// [*LimitError]. 0 means [DefaultMaxPixels] (Pillow's limit); a
	// negative value turns the limit off (the header is still checked and
	// the decoded size still reserved from a stage's budget).
	MaxPixels int64
	// MaxPixelsOption names the setting that raises MaxPixels where the user
	// set it (a flag, a pipeline file's key), for the [*LimitError] message;
	// "" names Options.MaxPixels.
	MaxPixelsOption string
	// NoCropDecoding decodes every JPEG whole. By default a [Processor]
	// whose transform is a RandomResizedCrop decodes only the rows and
	// columns of a baseline JPEG that the drawn box needs (libjpeg's
	// partial decoding, [turbojpeg.RegionDecoder]); the output is the same
	// bytes either way.
	NoCropDecoding bool
}

// limitErr names the option that raises the limit in the *LimitError err
// holds, if any, before err is wrapped.
func (d *Decoder) limitErr(err error) error {
	var le *LimitError
	if d.opts.MaxPixelsOption != "" && errors.As(err, &le) && le.Option == "" {
		le.Option = d.opts.MaxPixelsOption
	}
	return err
}

// MaxPixels returns the pixel limit in force (0: none).
func (d *Decoder) MaxPixels() int64 {
	switch m := d.opts.MaxPixels; {
	case m == 0:
		return DefaultMaxPixels
	case m < 0:
		return 0
	default:
		return m
	}
}

// Decoder decodes JPEG and PNG samples into RGB [Image] values. It is safe
// for concurrent use: each call borrows a TurboJPEG handle from a pool, so
// there is one handle per concurrently decoding goroutine.
type Decoder struct {
	opts     Options
	lib      *turbojpeg.Lib
	fallback error
	region   *turbojpeg.RegionLib      // nil: every JPEG is decoded whole
	noRegion error                     // why region is nil
	factors  []turbojpeg.ScalingFactor // ≤ 1/2, smallest first

	mu     sync.Mutex
	free   []*jpegWorker
	closed bool
}

// jpegWorker is a pooled TurboJPEG handle with its scratch buffer.
type jpegWorker struct {
	d    *turbojpeg.Decompressor
	r    *turbojpeg.RegionDecoder // made on first use
	cmyk []byte
}

func (w *jpegWorker) close() error {
	err := w.d.Close()
	if w.r != nil {
		err = errors.Join(err, w.r.Close())
	}
	return err
}

// NewDecoder returns a decoder. It fails only when opts.Backend is
// [BackendTurbo] and the library cannot be loaded.
func NewDecoder(opts Options) (*Decoder, error) {
	d := &Decoder{opts: opts}
	switch opts.Backend {
	case BackendStd:
		d.fallback = errors.New("standard library selected by configuration")
		d.noRegion = d.fallback
	case BackendAuto, BackendTurbo:
		lib, err := turbojpeg.Default()
		if err != nil {
			if opts.Backend == BackendTurbo {
				return nil, fmt.Errorf("decode: %w", err)
			}
			d.fallback = err
			d.noRegion = err
			break
		}
		d.lib = lib
		if opts.NoCropDecoding {
			d.noRegion = errors.New("turned off by Options.NoCropDecoding")
		} else if d.region, err = turbojpeg.DefaultRegion(); err != nil {
			d.noRegion = err
		}
		for _, f := range lib.ScalingFactors() {
			// 1/2, 1/4 and 1/8 only: libjpeg-turbo's other reduced IDCTs
			// (3/8, 5/8…7/8) have no SIMD code and decode no faster than
			// the next larger of these (measured: docs/DECODE.md)
			if f.Num == 1 && (f.Denom == 2 || f.Denom == 4 || f.Denom == 8) {
				d.factors = append(d.factors, f)
			}
		}
		// smallest factor first
		for i := 1; i < len(d.factors); i++ {
			for j := i; j > 0 && less(d.factors[j], d.factors[j-1]); j-- {
				d.factors[j], d.factors[j-1] = d.factors[j-1], d.factors[j]
			}
		}
	default:
		return nil, fmt.Errorf("decode: unknown backend %d", int(opts.Backend))
	}
	return d, nil
}

// Backend returns the JPEG decoder in use: "turbojpeg" or "stdlib".
func (d *Decoder) Backend() string {
	if d.lib != nil {
		return BackendTurbo.String()
	}
	return BackendStd.String()
}

// Library describes the TurboJPEG library in use, or "" with the fallback.
func (d *Decoder) Library() string {
	if d.lib == nil {
		return ""
	}
	return d.lib.Describe()
}

// FallbackReason says why the standard library decodes JPEGs, or nil when
// TurboJPEG does.
func (d *Decoder) FallbackReason() error { return d.fallback }

// CropDecoding describes the library that decodes only a random resized
// crop's box ("" when none), and err says why every JPEG is decoded whole
// instead (nil when crop decoding is on).
func (d *Decoder) CropDecoding() (lib string, err error) {
	if d.region == nil {
		return "", d.noRegion
	}
	return d.region.Describe(), nil
}

// Close destroys the pooled TurboJPEG handles. Handles in use are destroyed
// when returned. Decoding after Close is an error.
func (d *Decoder) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closed = true
	var errs []error
	for _, w := range d.free {
		errs = append(errs, w.close())
	}
	d.free = nil
	return errors.Join(errs...)
}

var errClosed = errors.New("decoder is closed")

func (d *Decoder) get() (*jpegWorker, error) {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil, errClosed
	}
	if n := len(d.free); n > 0 {
		w := d.free[n-1]
		d.free[n-1] = nil
		d.free = d.free[:n-1]
		d.mu.Unlock()
		return w, nil
	}
	d.mu.Unlock()
	h, err := d.lib.NewDecompressor()
	if err != nil {
		return nil, err
	}
	return &jpegWorker{d: h}, nil
}

func (d *Decoder) put(w *jpegWorker) {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		_ = w.close()
		return
	}
	d.free = append(d.free, w)
	d.mu.Unlock()
}

// Decode decodes the JPEG or PNG in data into dst as RGB. name identifies the
// sample in errors. minShort is the shorter side the caller will resize to
// (0 if unknown): when DCT scaling is enabled and a JPEG's shorter side can be
// scaled by 1/2, 1/4 or 1/8 while staying at least minShort × margin
// ([Options.DCTScaleMargin]), TurboJPEG decodes at that smaller size. The header is read first ([Decoder.Inspect]): an
// image over the pixel limit is refused before anything is allocated.
// Errors are [*Error] values.
func (d *Decoder) Decode(dst *Image, data []byte, name string, minShort int) error {
	info, err := d.Inspect(data, name, minShort)
	if err != nil {
		return err
	}
	return d.decodeAt(dst, data, name, info, d.pickScale(info.Width, info.Height, minShort))
}

// decodeAt decodes data, whose header info was read by inspect, at scale f
// (TurboJPEG only; other decoders ignore it).
func (d *Decoder) decodeAt(dst *Image, data []byte, name string, info Info, f turbojpeg.ScalingFactor) error {
	var err error
	switch info.Format {
	case "jpeg":
		if d.lib != nil {
			err = d.decodeTurbo(dst, data, f, info)
		} else {
			err = decodeStdJPEG(dst, data)
		}
	case "png":
		err = decodeStdPNG(dst, data)
	}
	if err != nil {
		return &Error{Name: name, Format: info.Format, Err: err}
	}
	return nil
}

// Inspect reads data's header (nothing is decoded or allocated beyond a few
// bytes) and returns the image's size and what decoding it with minShort
// (as for [Decoder.Decode]) will allocate. An image over the pixel limit is
// a [*LimitError]; a header that cannot be parsed, or claims an empty or
// impossible size, is an error too. Errors are [*Error] values naming name.
func (d *Decoder) Inspect(data []byte, name string, minShort int) (Info, error) {
	f := Format(data)
	info, err := d.inspect(f, data, func(w, h int) turbojpeg.ScalingFactor { return d.pickScale(w, h, minShort) })
	if err != nil {
		return Info{}, &Error{Name: name, Format: f, Err: err}
	}
	return info, nil
}

// inspect reads the header of data (format f) and sizes the decode at the
// scale pick returns for the image's size (TurboJPEG only).
func (d *Decoder) inspect(f string, data []byte, pick func(w, h int) turbojpeg.ScalingFactor) (Info, error) {
	limit := d.MaxPixels()
	switch f {
	case "jpeg":
		h, err := parseJPEGHeader(data)
		if err != nil {
			return Info{}, err
		}
		if err := checkPixels("image", int64(h.w), int64(h.h), limit); err != nil {
			return Info{}, d.limitErr(err)
		}
		in := Info{Format: f, Width: h.w, Height: h.h, Components: h.comps, Progressive: h.progressive, BitDepth: 8}
		// the image padded to whole MCUs, as the decoders allocate it
		mw, mh := int64(8*h.hmax), int64(8*h.vmax)
		padded := satMul((int64(h.w)+mw-1)/mw*mw, (int64(h.h)+mh-1)/mh*mh)
		comps := int64(h.comps)
		if d.lib != nil {
			sf := pick(h.w, h.h)
			in.DecodedW, in.DecodedH = sf.Scale(h.w), sf.Scale(h.h)
			out := satMul(int64(in.DecodedW), int64(in.DecodedH))
			in.DecodeBytes = satMul(out, 3)
			if h.comps == 4 {
				in.DecodeBytes = satAdd(in.DecodeBytes, satMul(out, 4)) // CMYK scratch
			}
			if h.progressive {
				// libjpeg keeps every coefficient (a 16-bit JCOEF) of the image
				in.DecodeBytes = satAdd(in.DecodeBytes, satMul(padded, 2*comps))
			}
			return in, nil
		}
		in.DecodedW, in.DecodedH = h.w, h.h
		planes := satMul(padded, 3) // Y + Cb + Cr at most
		switch h.comps {
		case 1:
			planes = padded
		case 4:
			planes = satMul(padded, 8) // YCbCr + K, then the CMYK image
		}
		if h.progressive {
			// image/jpeg keeps a [64]int32 block per 8×8 of every component
			planes = satAdd(planes, satMul(padded, 4*comps))
		}
		in.DecodeBytes = satAdd(planes, satMul(satMul(int64(h.w), int64(h.h)), 3))
		return in, nil
	case "png":
		h, err := parsePNGHeader(data)
		if err != nil {
			return Info{}, err
		}
		if err := checkPixels("image", int64(h.w), int64(h.h), limit); err != nil {
			return Info{}, d.limitErr(err)
		}
		px := satMul(int64(h.w), int64(h.h))
		img := satMul(px, h.bytesPerPixel())
		if h.interlaced {
			img = satMul(img, 2) // the seven pass images, then the whole one
		}
		rows := satMul(satMul(int64(h.w), int64(h.channels()*max(h.depth, 8)/8)+1), 2)
		return Info{Format: f, Width: h.w, Height: h.h, Components: h.channels(), Progressive: h.interlaced,
			BitDepth: h.depth, DecodedW: h.w, DecodedH: h.h,
			DecodeBytes: satAdd(satAdd(img, rows), satMul(px, 3))}, nil
	}
	n := min(len(data), 8)
	if n == 0 {
		return Info{}, errors.New("empty data (0 bytes)")
	}
	return Info{}, fmt.Errorf("unrecognised data (first bytes % x)", data[:n])
}

func (d *Decoder) decodeTurbo(dst *Image, data []byte, f turbojpeg.ScalingFactor, info Info) error {
	w, err := d.get()
	if err != nil {
		return err
	}
	defer d.put(w)
	hdr, err := w.d.Header(data)
	if err == nil && (hdr.Width != info.Width || hdr.Height != info.Height) {
		// both read the first SOF; a difference means a file built to confuse
		return fmt.Errorf("TurboJPEG reads a %d×%d header where the frame header says %d×%d", hdr.Width, hdr.Height, info.Width, info.Height)
	}
	if err != nil {
		// TurboJPEG 2.x refuses some valid layouts (4:1:0 subsampling:
		// "Could not determine subsampling type"); libjpeg proper and the
		// standard library decode them. Keep TurboJPEG's error when the
		// standard library fails too.
		if stdErr := decodeStdJPEG(dst, data); stdErr != nil {
			return fmt.Errorf("%w (standard library: %v)", err, stdErr)
		}
		return nil
	}
	sw, sh := f.Scale(hdr.Width), f.Scale(hdr.Height)
	flags := turbojpeg.FlagLimitScans
	if d.opts.FastDCT {
		flags |= turbojpeg.FlagFastDCT
	}
	dst.Reset(sw, sh, 3)
	dst.SrcW, dst.SrcH = hdr.Width, hdr.Height
	switch hdr.Colorspace {
	case turbojpeg.ColorspaceCMYK, turbojpeg.ColorspaceYCCK:
		n := sw * sh * 4
		if cap(w.cmyk) < n {
			w.cmyk = make([]byte, n)
		}
		buf := w.cmyk[:n]
		if n > maxRetained {
			w.cmyk = nil // a rare large image's scratch is not kept
		}
		if err := w.d.Decompress(data, hdr, f, turbojpeg.PixelCMYK, flags, buf); err != nil {
			return err
		}
		cmykToRGB(dst.Pix, buf, hasAdobeMarker(data))
		return nil
	default:
		return w.d.Decompress(data, hdr, f, turbojpeg.PixelRGB, flags, dst.Pix)
	}
}

// decodeRegion decodes, at scale f, the part of the JPEG in data (header
// info, read by inspect) that holds rect of the scaled image into dst, and
// returns where dst lies in the scaled image; ok is false, with nothing
// done, when the image cannot be decoded in part (no region library, a
// progressive or CMYK JPEG, a layout TurboJPEG refuses): the caller decodes
// it whole. The pixels of rect are those of the whole decode.
func (d *Decoder) decodeRegion(dst *Image, data []byte, name string, info Info, f turbojpeg.ScalingFactor, rect turbojpeg.Region) (turbojpeg.Region, bool, error) {
	if d.region == nil || info.Format != "jpeg" || info.Progressive || (info.Components != 1 && info.Components != 3) {
		return turbojpeg.Region{}, false, nil
	}
	w, err := d.get()
	if err != nil {
		return turbojpeg.Region{}, false, &Error{Name: name, Format: info.Format, Err: err}
	}
	defer d.put(w)
	// the same header check as a whole decode: a layout TurboJPEG refuses
	// goes the whole decode's way (its standard-library fallback)
	hdr, err := w.d.Header(data)
	if err != nil || hdr.Width != info.Width || hdr.Height != info.Height {
		return turbojpeg.Region{}, false, nil
	}
	switch hdr.Colorspace {
	case turbojpeg.ColorspaceYCbCr, turbojpeg.ColorspaceGray, turbojpeg.ColorspaceRGB:
	default:
		return turbojpeg.Region{}, false, nil
	}
	if w.r == nil {
		if w.r, err = d.region.NewRegionDecoder(); err != nil {
			return turbojpeg.Region{}, false, &Error{Name: name, Format: info.Format, Err: err}
		}
	}
	var flags turbojpeg.Flags
	if d.opts.FastDCT {
		flags |= turbojpeg.FlagFastDCT
	}
	reg, pix, err := w.r.DecodeRegion(data, f, turbojpeg.PixelRGB, flags, rect, dst.Pix[:cap(dst.Pix)])
	if err != nil {
		return turbojpeg.Region{}, false, &Error{Name: name, Format: info.Format, Err: err}
	}
	dst.Pix = pix
	dst.W, dst.H, dst.C = reg.W, reg.H, 3
	dst.SrcW, dst.SrcH = hdr.Width, hdr.Height
	return reg, true, nil
}
