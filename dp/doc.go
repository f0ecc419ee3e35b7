// Package dp is data-parallel training on goccl: DDP with gradient buckets that
// overlap backward, gradient accumulation, and ZeRO stages 1, 2 and 3 with a sharded
// AdamW, over any goccl communicator.
//
// An Engine holds one rank's parameters, gradients, fp32 master weights and Adam
// moments as flat buffers on a Device (host memory now; a CUDA device plugs in behind
// the same interface). Tensors are registered once, in the model's order, with Spec;
// every rank must register the same list, which New checks. Rank 0's initial values
// are broadcast so that all replicas start equal.
//
// The training loop calls the Engine where PyTorch's DDP and FSDP put their hooks:
//
//	for each layer l, forward order:  BeginForward(l); read Param(i); compute; EndForward(l)
//	for each layer l, backward order: BeginBackward(l); add into Grad(i); MarkReady(i); EndBackward(l)
//	Wait()   // after every backward pass (micro-step)
//	Step()   // after the last micro-step: AdamW, then the parameters are current again
//
// Stages, as in the ZeRO paper and the seeds' table (N parameters, W ranks, bytes per
// rank with 2-byte working types): stage 0 is DDP (16N: everything replicated,
// buckets all-reduced with Avg as their last gradient is marked ready); stage 1
// shards the fp32 master weights and moments (4N+12N/W: buckets reduce-scattered,
// each rank updates its shard, parameters all-gathered after the step); stage 2 also
// keeps only the gradient shard (2N+14N/W: a bucket lives only until reduce-scattered);
// stage 3 also shards the parameters (16N/W: a layer is all-gathered before its
// forward and again before its backward, the next one prefetched, and freed after).
// Shards pad each communication unit to a multiple of W; Memory reports exactly what
// is held. With fp32 working types the parameters are the master weights (K = 8).
//
// Buckets follow PyTorch: parameters in reverse registration order, the first bucket
// closed at 1 MiB, later ones at 25 MiB, issued in bucket order on every rank (ZeRO-3
// communicates per layer). Gradients are averaged over the world; for accumulation the
// loss is divided by AccumSteps, as in PyTorch, and DDP and ZeRO-1 communicate only on
// the last micro-step (or while NoSync is off). fp16 uses dynamic loss scaling: scale
// the loss by LossScale; a step whose gradients overflow on any rank is skipped.
//
// The Engine is used from one goroutine; its collectives run behind it on the
// communicator in issue order. Misuse (a gradient marked ready twice, Step before
// Wait, Step after a no-sync micro-step, ranks with different parameters) is an error
// wrapping transport.ErrInvalid or transport.ErrMismatch that says what to do.
package dp
