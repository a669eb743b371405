package stage

import "context"

// Tap calls observe for every element and passes it on unchanged. observe
// must not keep the value: the element travels on.
//
//	in:  -- 1 -- 2 --|
//	Tap(log)
//	out: -- 1 -- 2 --|
func Tap[T any](name string, observe func(v T)) Stage[T, T] {
	return New(name, func(ctx context.Context, in In[T], out Out[T]) error {
		for {
			e, ok := in.Recv(ctx)
			if !ok {
				return nil
			}
			_, _ = guard(in, e, func() (struct{}, error) { observe(e.Value); return struct{}{}, nil })
			if err := out.Send(ctx, e); err != nil {
				return err
			}
		}
	})
}
