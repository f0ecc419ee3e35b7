// Package cuda runs dp's data-parallel training on CUDA devices: Device is a dp.Device
// whose flat parameter, gradient, master-weight and moment buffers (and the bucket
// views the Engine cuts from them) live in GPU memory, with the casts, the fp16
// overflow check and the fused AdamW step as NVRTC-compiled kernels (nccl/kernels); and
// Trainer is dp/mlp's Trainer on the GPU, with activations in device memory, the
// matrix products through cuBLAS (nccl/cublas) and the element-wise steps as kernels.
// DDP and ZeRO 1, 2 and 3 run unchanged above the device interface; the collectives
// move device buffers through NCCL or through the communicator's staging in pinned
// host memory (shm, tcp), one rank per GPU or several ranks sharing one.
//
//	dev, err := cuda.Open(cuda.Options{Ordinal: -1, Rank: comm.Rank(), Params: cfg.Params})
//	if err != nil { return err } // errors.Is(err, transport.ErrNotSupported): no CUDA device
//	defer dev.Close()
//	eng, err := dp.NewOn(ctx, cuda.Collectives(dp.Comm(comm), dev), model.Specs(seed), dp.Options{Device: dev, Stage: 3})
//	tr, err := cuda.NewTrainer(eng, dev, model, data, batch)
//	st, err := tr.Step(ctx, step, true)
//
// Every Device method returns with its GPU work finished: the communicator stages and
// NCCL reads the same buffers on streams of their own, which nothing else orders with
// the Device's stream. Without a GPU or a library, Open returns an error wrapping
// transport.ErrNotSupported and ErrNoDevice that says what is missing; everything else
// in goccl keeps working on the host.
//
// The tests run on the fake CUDA stack of nccl/kernels/kerneltest (the same kernels,
// executed on the CPU) and, with GOCCL_GPU_CHECK=1 on a GPU machine, on the real one.
package cuda
