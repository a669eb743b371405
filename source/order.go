package source

// Order returns the paths of one epoch for one rank in the order [Files.Samples]
// reads them with the same opts (the rank's share of the epoch's file order, then
// the bounded shuffle), without reading anything. A caller that serves some
// samples from elsewhere (a cache) uses it to keep the epoch's order and sharding,
// then reads the rest through [NewFiles] with Rank 0 of WorldSize 1 and no shuffle.
func (d *Files) Order(opts Options) ([]string, error) {
	r, err := resolve(opts)
	if err != nil {
		return nil, err
	}
	order := shuffleRefs(r.rankShards(len(d.paths)), r.ShuffleBuffer, r.sampleRNG())
	out := make([]string, len(order))
	for i, k := range order {
		out[i] = d.paths[k]
	}
	return out, nil
}
