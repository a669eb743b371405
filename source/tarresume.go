package source

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
)

// readRef reads one sample back from its Ref (used on resume).
func (it *tarIter) readRef(ctx context.Context, ref Ref) (*Sample, error) {
	if ref.Shard < 0 || ref.Shard >= len(it.d.paths) || ref.End < ref.Off {
		return nil, fmt.Errorf("source: bad sample reference %+v", ref)
	}
	p := it.d.paths[ref.Shard]
	f, err := it.reader.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if ref.Off < 0 || ref.End > f.Size {
		return nil, fmt.Errorf("source: sample reference %+v is outside shard %s (%d bytes)", ref, p, f.Size)
	}
	buf := make([]byte, ref.End-ref.Off)
	if err := it.reader.Submit(Request{File: f, Off: ref.Off, Buf: buf}); err != nil {
		return nil, err
	}
	c := make([]Completion, 1)
	if _, err := it.reader.Reap(ctx, c, 1); err != nil {
		return nil, err
	}
	if c[0].Err != nil {
		return nil, c[0].Err
	}
	tr := tar.NewReader(bytes.NewReader(buf[:c[0].N]))
	s := &Sample{Shard: p, Off: ref.Off, Index: tarIndex(ref.Shard, ref.Off), Epoch: int64(it.r.Epoch)}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, &ReadError{Op: "tar", Path: p, Off: ref.Off, Err: err}
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return nil, &ReadError{Op: "tar", Path: p, Off: ref.Off, Err: err}
		}
		key, field := SplitKey(h.Name)
		s.Key = key
		s.Fields = append(s.Fields, Field{Name: field, Data: data})
		s.bytes += int64(len(data))
	}
	if len(s.Fields) == 0 {
		return nil, &ReadError{Op: "tar", Path: p, Off: ref.Off, Err: errors.New("no member at reference")}
	}
	return s, nil
}

func (it *tarIter) Position() Position {
	p := it.r.position()
	p.Next = it.consumed
	p.Shard, p.Offset = it.shard, it.offset
	for _, b := range it.buf {
		p.Pending = append(p.Pending, b.ref)
	}
	if it.r.ShuffleBuffer > 1 {
		p.RNG, _ = it.src.MarshalBinary()
	}
	return p
}
