package decode

import (
	"context"
	"errors"
	"runtime"

	"github.com/psiflow/psiflow/flow"
	"github.com/psiflow/psiflow/stage"
	"github.com/psiflow/psiflow/tensor"
)

// Input is an element that carries its encoded image, so that [Images]
// needs no accessor: package source's *Sample is one (its EncodedImage takes
// the field named jpg, jpeg or png, else its only field).
type Input interface {
	// EncodedImage returns the image's key (named in errors), its encoded
	// bytes (JPEG or PNG), its index in its dataset and the epoch it is read
	// in (what a random transform draws from: [Encoded.Index]), and, when it
	// has no image, why ([Encoded.Err]).
	EncodedImage() (key string, data []byte, index, epoch int64, err error)
}

// Images adds a decode stage named name after in: each element's image is
// decoded and transformed by tr into a pooled [*tensor.Sample] (label -1: an
// Input carries none), the input released as soon as it is decoded. It is
// [NewStage] with what most pipelines want, chosen for them: a decoder of its
// own with the recommended [Options] (TurboJPEG, loaded at run time, else the
// standard library), closed when the stage ends; GOMAXPROCS workers in
// completion order; each image's decoded bytes reserved from the graph's byte
// budget (when it has one) before they are allocated; a bad image stops the
// graph with an error naming it. A mistake in tr is reported by the graph's
// Run, naming the stage, before anything starts. For other choices (an
// ordered stage, a skip policy, labels, a decoder shared between stages)
// build the stage with NewStage and add it with flow.Via.
func Images[I Input](in flow.Stream[I], name string, tr Transform, opts ...flow.NodeOption) flow.Stream[*tensor.Sample] {
	st := &imagesStage[I]{name: name}
	cfg := StageConfig{Workers: runtime.GOMAXPROCS(0), Transform: tr}
	if g := in.Graph(); g != nil {
		if b := g.Budget(); b != nil {
			cfg.Budget = b
		}
	}
	if st.dec, st.err = imagesDecoder(); st.err == nil {
		st.inner, st.err = NewStage(name, st.dec, cfg, encodedOf[I])
	}
	return flow.Via(in, stage.Stage[I, *tensor.Sample](st), opts...)
}

// imagesDecoder makes the decoder of an [Images] stage (tests watch it).
var imagesDecoder = func() (*Decoder, error) { return NewDecoder(Options{}) }

// encodedOf is the accessor [Images] gives NewStage.
func encodedOf[I Input](v I) Encoded {
	key, data, index, epoch, err := v.EncodedImage()
	return Encoded{Key: key, Data: data, Label: -1, Index: index, Epoch: epoch, Err: err}
}

// imagesStage is [NewStage]'s stage with the decoder it owns.
type imagesStage[I Input] struct {
	name  string
	dec   *Decoder
	inner stage.Stage[I, *tensor.Sample]
	err   error // NewStage's, reported when the stage is added
}

func (s *imagesStage[I]) Name() string { return s.name }

// Validate returns what NewStage refused (the graph reports it naming the stage).
func (s *imagesStage[I]) Validate() error { return s.err }

// Run decodes, then closes the decoder (the graph runs a stage once).
func (s *imagesStage[I]) Run(ctx context.Context, in stage.In[I], out stage.Out[*tensor.Sample]) error {
	if s.err != nil {
		return s.err
	}
	err := s.inner.Run(ctx, in, out)
	return errors.Join(err, s.dec.Close())
}
