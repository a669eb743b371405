package stage

import "context"

// keepKey is the context key under which a map worker puts its [keeper].
type keepKey struct{}

// keeper records whether the function of the current element called [Keep].
type keeper struct{ kept bool }

// Keep tells the stage that calls this function that its input element
// lives on in what the function returns: the output shares the input's
// memory (a view into its buffer, a struct that embeds it). The input's
// resources are then released when the output's life ends, not when the
// function returns. ctx is the context the function was given. Keep reports
// whether the calling stage honours it: map stages ([Apply], [FlatMap], and
// flow's Map and OrderedMap) do; elsewhere (a filter, a tap, a sink) it does
// nothing and returns false, since those elements end when the function
// returns or travel on unchanged.
//
// A map function that returns its input value itself needs no Keep.
func Keep(ctx context.Context) bool {
	k, ok := ctx.Value(keepKey{}).(*keeper)
	if ok {
		k.kept = true
	}
	return ok
}

// withKeeper returns a context for a worker's calls and the keeper that
// records their Keep.
func withKeeper(ctx context.Context) (context.Context, *keeper) {
	k := &keeper{}
	return context.WithValue(ctx, keepKey{}, k), k
}
