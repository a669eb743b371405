package source

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
)

// skipAllow applies the skip policy to err: nil when it may be skipped (and is
// counted); the caller reports it once it knows what was lost.
func (it *tarIter) skipAllow(err error) error {
	if !it.r.Skip {
		return err
	}
	return it.skip.allow(err)
}

// memberWhat names the member called name, and its sample, for a skip report.
func memberWhat(name string) string {
	key, _ := SplitKey(name)
	return fmt.Sprintf("member %q of sample %q", name, key)
}

// resync handles a corrupt header at start (of the member called name, when its
// header could be read): without Skip it returns err; with Skip it counts one
// skip, looks for the next 512-byte block from from on that is a valid tar header
// (checksum and fields), reopens the stream there, adds the bytes passed over to
// LostBytes and reports the skip. When none is left it moves the stream to the end
// of the shard, so the next read reports the end.
func (it *tarIter) resync(start, from int64, name string, err error) error {
	if serr := it.skipAllow(err); serr != nil {
		return serr
	}
	p := it.d.paths[it.shards[it.shard]]
	size := it.stream.f.Size
	off, ferr := findHeader(p, from, size)
	if ferr != nil {
		return errors.Join(err, ferr)
	}
	ctx := it.stream.ctx
	it.stream.close()
	it.stream, it.tr = nil, nil
	sk := &Skipped{Path: p, Off: start, Err: err}
	if off < 0 {
		sk.What, sk.Lost = "the rest of the shard", size-start
		if name != "" {
			sk.What = "the rest of the shard, from " + memberWhat(name)
		}
		it.skip.told(sk)
		it.lost += size - start
		it.offset = size
		return it.openEnd(ctx)
	}
	sk.What, sk.Lost = fmt.Sprintf("a corrupt header and what follows it, up to the next header at offset %d", off), off-start
	if name != "" {
		sk.What = fmt.Sprintf("%s and what follows it, up to the next header at offset %d", memberWhat(name), off)
	}
	it.skip.told(sk)
	it.lost += off - start
	it.offset = off
	if err := it.openStream(ctx); err != nil {
		return err
	}
	it.stream.ctx = ctx
	return nil
}

// openEnd opens an empty stream at the end of the shard after a resync found
// no further header: the shard ends there without a marker, which is counted
// as part of the loss already, not as a second error.
func (it *tarIter) openEnd(ctx context.Context) error {
	if err := it.openStream(ctx); err != nil {
		return err
	}
	it.stream.ctx = ctx
	it.tr = tar.NewReader(endMarker{})
	it.ended = true
	return nil
}

// endMarker reads as an end-of-archive marker, then EOF.
type endMarker struct{}

func (endMarker) Read(p []byte) (int, error) { return 0, io.EOF }

// findHeader returns the offset of the first 512-aligned block at or after
// from (and before size) that is a valid tar header, or -1.
func findHeader(path string, from, size int64) (int64, error) {
	o, err := openRegular(path, false, nil)
	if err != nil {
		return 0, err
	}
	f := o.f
	defer f.Close()
	from = (from + 511) / 512 * 512
	br := bufio.NewReaderSize(io.NewSectionReader(f, from, max(size-from, 0)), 64<<10)
	var blk [512]byte
	for off := from; off+512 <= size; off += 512 {
		if _, err := io.ReadFull(br, blk[:]); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return -1, nil
			}
			return 0, err
		}
		if ValidTarHeader(blk[:]) {
			return off, nil
		}
	}
	return -1, nil
}

// ValidTarHeader reports whether blk (512 bytes) is a tar header block: not
// all zeros, a checksum that matches (unsigned or signed sum, as readers
// accept both), and a size field that parses.
func ValidTarHeader(blk []byte) bool {
	if len(blk) != 512 {
		return false
	}
	zero := true
	for _, c := range blk {
		if c != 0 {
			zero = false
			break
		}
	}
	if zero {
		return false
	}
	want, ok := parseOctal(blk[148:156])
	if !ok {
		return false
	}
	var u, s int64
	for i, c := range blk {
		if i >= 148 && i < 156 {
			c = ' '
		}
		u += int64(c)
		s += int64(int8(c))
	}
	if want != u && want != s {
		return false
	}
	if blk[124]&0x80 != 0 { // base-256 size
		return true
	}
	_, ok = parseOctal(blk[124:136])
	return ok
}

// parseOctal parses a NUL- or space-terminated octal field.
func parseOctal(b []byte) (int64, bool) {
	b = bytes.Trim(b, " \x00")
	if len(b) == 0 {
		return 0, false
	}
	var v int64
	for _, c := range b {
		if c < '0' || c > '7' || v > (1<<60) {
			return 0, false
		}
		v = v<<3 | int64(c-'0')
	}
	return v, true
}
