package stage

import "context"

// Filter passes on the elements for which keep returns true, in order. The
// graph ends a dropped element (its claim dropped, its resources released).
//
//	in:  -- 1 -- 2 -- 3 -- 4 --|
//	Filter(even)
//	out: ------- 2 ------- 4 --|
func Filter[T any](name string, keep func(ctx context.Context, v T) (bool, error)) Stage[T, T] {
	return New(name, func(ctx context.Context, in In[T], out Out[T]) error {
		for {
			e, ok := in.Recv(ctx)
			if !ok {
				return nil
			}
			k, err := guard(in, e, func() (bool, error) { return keep(ctx, e.Value) })
			if err != nil {
				in.Discard(e)
				return err
			}
			if !k {
				in.Discard(e)
				continue
			}
			if err := out.Send(ctx, e); err != nil {
				return err
			}
		}
	})
}

// guard runs f, which works on e; if f panics, e is discarded before the
// panic goes on (to become the stage's error).
func guard[T, R any](in In[T], e Envelope[T], f func() (R, error)) (r R, err error) {
	done := false
	defer func() {
		if !done {
			in.Discard(e)
		}
	}()
	r, err = f()
	done = true
	return r, err
}
