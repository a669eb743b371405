// Package decode turns encoded samples into fixed-size tensors: JPEG through
// libjpeg-turbo's TurboJPEG API loaded at run time (package
// [github.com/psiflow/psiflow/stage/decode/turbojpeg]) with the standard
// library's image/jpeg as the fallback, PNG through the standard library,
// and raw bytes; then the image transforms a training loader
// needs: resize of the shorter side with antialiasing (bit-compatible with
// Pillow's bilinear resize, which torchvision's Resize uses on PIL images),
// center and random crop, torchvision's RandomResizedCrop, horizontal flip,
// HWC or CHW layout and optional normalisation to float32.
//
// # What it owns
//
//   - [Decoder]: format sniffing, the TurboJPEG handle pool (one handle per
//     goroutine at a time), DCT-scaled (reduced-size) decoding, CMYK and
//     grayscale conversion to RGB, and the fallback decision with its reason
//     ([Decoder.FallbackReason]).
//   - Transforms on packed RGB buffers ([Image]): [Resizer] (with
//     [Resizer.ResizedCrop], torchvision's resized_crop), [CenterCrop],
//     [RandomCrop], [HFlip], [ToTensor]; [RandomResizedCropBox], torchvision's
//     sampling rule. They reuse caller-owned buffers and allocate nothing in
//     steady state.
//   - Per-sample randomness: a sample's crop and flip come from
//     (seed, [Encoded.Epoch], [Encoded.Index]) through a counter-based
//     derivation ([SampleRand]), not from a stream shared by a worker, so a
//     re-run or resumed epoch gets the same crops whatever the worker count
//     or order.
//   - [Processor]: decode plus a [Transform] with reusable scratch, the unit a
//     stage worker runs; [NewStage], the parallel decode stage built on it
//     (pooled [tensor.Sample] outputs), and [Images], the graph step that is
//     NewStage with its choices made (a decoder of its own, GOMAXPROCS
//     workers, the graph's budget) over any [Input] (package source's samples).
//
// # What it does not own
//
// Reading files (package source), batching and parallelism (package stage),
// the tensor, sample and batch types and collation (package tensor), Arrow
// columns as tensors (package tensor/tensorarrow),
// where tensor memory comes from (the caller passes buffers; UMA-backed ones
// work), and anything GPU.
//
// # Fidelity
//
// With [Transform.Exact] (TurboJPEG's accurate DCT, every JPEG at full
// size), decode + Resize(256) + CenterCrop(224), and RandomResizedCrop for a
// given box, produce the same bytes as Pillow + torchvision on PIL images;
// the tests run both as references. By default a JPEG whose next size is at
// most half the source in both directions is decoded at 1/2, 1/4 or 1/8
// scale (reduced-size decoding) and resized the rest of the way: those
// images differ from torchvision's by about half a level to a few levels on
// average (PSNR ≈ 35–46 dB, docs/DECODE.md has the figures); the others are
// unchanged. The image/jpeg fallback differs by about one level on average.
//
// The resize keeps Pillow's integer arithmetic exactly (22-bit fixed-point
// taps, horizontal pass into an 8-bit intermediate, then vertical, clip8) and
// is fast by how it schedules it: windows zero-padded to a fixed tap count
// (no per-pixel branch), only the source rows and output columns a crop
// keeps, and on amd64 with AVX2 two assembly kernels (the horizontal pass
// eight output pixels per step with one gather per tap, the vertical pass
// eight bytes per step) that compute the same 32-bit sums. Other CPUs run
// the portable Go loops, with the same results.
//
// # Hostile input
//
// Every image's header is read first ([Decoder.Inspect]: psiflow's own JPEG
// SOF and PNG IHDR parsers, every length checked): an image over
// [Options.MaxPixels] ([DefaultMaxPixels], Pillow's limit, by default) is a
// [*LimitError] before anything is allocated, and so are crop, resize and
// resize-result sizes over it. [Processor.Plan] bounds the bytes one image
// needs; [NewStage] reserves them from the graph's byte budget
// ([StageConfig.Budget]) before decoding, with a bounded wait and then a
// one-image overdraft instead of a deadlock, and skips bad images under
// [StageConfig.Skip]. See docs/HOSTILE-INPUT-decode.md.
//
// # Errors
//
// Every decoding error is an [*Error] naming the sample (file name or key)
// and the format, wrapping the cause; a truncated or corrupt JPEG is an error,
// never grey rows.
package decode
