// Package algos holds goccl's collective algorithms and the machinery to choose among
// them. An Algorithm runs a collective over a Peers view (links to the other ranks and
// the header of the current operation) and never names a transport. Algorithms live in
// subpackages (ring, tree, naive) and register themselves by name; Lookup finds one and
// Resolve picks the algorithm for a collective, falling back to one that implements it.
// The reduce subpackage holds the element-wise kernels for every dtype and op.
//
// Choose with ParseSpec (grammar on ParseSpec, e.g. "allreduce:tree<64K,ring") and
// Spec.Resolve; "auto" asks CostModel.Predict. Unimplemented collectives fall back
// tree -> ring -> naive. Validate checks Args and trims buffers; Bytes gives the size
// the selector compares (nccl-tests' size column).
package algos
