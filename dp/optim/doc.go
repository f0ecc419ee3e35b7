// Package optim holds dp's optimizer kernels on host memory: a fused AdamW update over
// float32 slices (master weights, first and second moments, gradient). dp's Host device
// calls it for whole buffers or for one rank's shard under ZeRO; a device implementation
// runs the same arithmetic in its own kernels.
//
// The update is PyTorch's torch.optim.AdamW (decoupled weight decay):
//
//	m = b1*m + (1-b1)*g
//	v = b2*v + (1-b2)*g*g
//	p = p - lr*wd*p - lr * (m/(1-b1^t)) / (sqrt(v/(1-b2^t)) + eps)
package optim
