// Package tensor holds what flows out of decoding and into sinks and devices:
// dense tensors ([Tensor], with its [DType] and, for images, its [Layout]),
// labelled samples ([Sample]) and collated batches ([Batch]) with their keys,
// labels and release.
//
// # What it owns
//
//   - [Tensor]: a dense uint8 or float32 tensor whose buffers are reused
//     ([Tensor.ReuseU8], [Tensor.ReuseF32]), so a producer can hand in memory
//     it owns, and its bytes without a copy ([Tensor.Bytes]).
//   - [Sample]: one tensor with its key and label, pooled ([SamplePool]); the
//     graph releases it when its life ends.
//   - [Batch] and [Collate]: samples of one shape copied into one contiguous
//     tensor [n, shape...] with the samples' keys and labels; [Batches] groups
//     and collates in one stage.
//   - Package [github.com/psiflow/psiflow/tensor/tensorarrow]: Arrow columns
//     as tensors, the one place they are converted.
//
// # What it does not own
//
// Decoding and image transforms (package stage/decode, which produces
// Samples), where batches go (package sink), device memory (package gpu).
// A sink or a device imports this package and never a decoder.
package tensor
