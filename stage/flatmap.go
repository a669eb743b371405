package stage

import "context"

// FlatMap calls f for every element; f emits zero or more outputs, which are
// sent downstream as they are emitted (nothing is collected in a slice). The
// outputs share the input's claim, whose bytes are returned when the last of
// them is done; with no outputs at once. As with [Apply], the graph releases
// the input's resources when f returns, or with the last output if f called
// [Keep].
//
//	in:  -- "a b" ------ "c" --|
//	FlatMap(split)
//	out: -- "a" - "b" -- "c" --|
func FlatMap[I, O any](name string, f func(ctx context.Context, v I, emit func(O) error) error) Stage[I, O] {
	return New(name, func(ctx context.Context, in In[I], out Out[O]) error {
		fctx, k := withKeeper(ctx)
		for {
			e, ok := in.Recv(ctx)
			if !ok {
				return nil
			}
			if err := flatOne(ctx, fctx, k, e, out, f); err != nil {
				return err
			}
		}
	})
}

// flatOne runs f on one element and ends the element, also if f panics.
func flatOne[I, O any](ctx, fctx context.Context, k *keeper, e Envelope[I], out Out[O], f func(ctx context.Context, v I, emit func(O) error) error) error {
	// The input's own resource is taken out of the claim the outputs will
	// share, and put back only if f keeps it.
	var res Releaser
	if c := e.Claim; c != nil && c.refs.Load() == 1 {
		res, c.res = c.res, nil
	}
	k.kept = false
	defer func() {
		if res != nil {
			if k.kept {
				// Released with the last output, which may still be in
				// flight even if f failed or panicked afterwards.
				e.Claim.res = res
			} else {
				res.Release()
			}
		}
		e.Claim.Drop()
	}()
	return f(fctx, e.Value, func(v O) error {
		return out.Send(ctx, Envelope[O]{Value: v, Claim: e.Claim.Retain()})
	})
}
