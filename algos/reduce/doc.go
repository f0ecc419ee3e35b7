// Package reduce holds the element-wise reduction kernels behind every goccl collective:
// one entry point per shape (Apply: dst = dst op src; Apply3: dst = a op b; Finish: the
// post-step of Avg), for every transport.DType and transport.Op.
//
// Semantics, chosen to match NCCL so results agree with the nccl transport:
//   - Integers wrap on overflow (Sum, Prod) and Avg divides the wrapped sum by the world
//     size, truncating toward zero, in 64-bit arithmetic.
//   - Avg combines exactly like Sum; Finish divides once, on the fully reduced value.
//   - float16 and bfloat16 widen exactly to float32, combine there, and round back to
//     nearest even once per Apply; the conversions are exported (Float16ToFloat32 ...)
//     and get NaN, Inf, subnormals and overflow right.
//   - Max and Min use Go's builtin max/min: a NaN operand gives NaN (the IEEE 754-2019
//     maximum/minimum, as PyTorch does), and -0 is below +0.
//
// Buffers are byte slices in native byte order, as the caller's typed memory lies. They
// need not be aligned to the element size: aligned operands are reinterpreted in place
// (no copy), misaligned ones are staged through aligned stack blocks, because Go's
// checkptr (enabled by -race) rejects misaligned pointer conversions even on amd64.
//
// On amd64 CPUs that have AVX2 (detected with golang.org/x/sys/cpu), assembly kernels
// run every op on every dtype (float16 and bfloat16 through float32, with F16C for
// float16), Avg's division of the floats, and the two-rank ring's two-output sums and
// averages (Apply3Dual).
// Go loops run everything else, every tail and every other CPU; the tests hold the
// kernels to those loops bit for bit on random data and special values, at odd lengths
// and offsets, and to an independent reference.
//
//	// dst = dst + src, element-wise, as float32
//	err := reduce.Apply(transport.Float32, transport.Sum, dst, src)
package reduce
