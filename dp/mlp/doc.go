// Package mlp is the model `goccl train` trains: a multi-layer perceptron classifier in
// pure Go (float32 matrix products through gonum's BLAS), a deterministic synthetic
// data set and a CSV loader, and a Trainer that drives it data-parallel on a
// dp.Engine with the hooks in the right places. It exists to exercise dp end to end
// and to measure it; it is not a general deep-learning library.
package mlp
