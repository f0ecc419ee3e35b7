"""gloo_allreduce.py - PyTorch gloo peer for BENCHMARKS.md.

dist.all_reduce of a float32 tensor (SUM; torch reduces in place), timed the way
nccl-tests and `goccl perf` time it: warm-up, barrier, ITERS back-to-back calls, time per
call averaged over ranks, then one checked call on data whose exact sum is known.

Run: python3 gloo_allreduce.py WORLD MINBYTES MAXBYTES ITERS WARMUP
Prints one tab-separated line per size: size_bytes time_us algbw_GBps busbw_GBps wrong
"""
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def worker(rank, world, port, minb, maxb, iters, warmup):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    size = minb
    while size <= maxb:
        count = size // 4
        t = torch.zeros(count, dtype=torch.float32)
        for _ in range(warmup):
            dist.all_reduce(t)
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(iters):
            dist.all_reduce(t)
        sec = torch.tensor([(time.perf_counter() - t0) / iters], dtype=torch.float64)
        dist.all_reduce(sec)
        avg = sec.item() / world
        idx = torch.arange(count, dtype=torch.int64)
        t = ((idx % 7) + rank).to(torch.float32)
        dist.all_reduce(t)
        want = (world * (idx % 7) + world * (world - 1) // 2).to(torch.float32)
        wrong = torch.tensor([int((t != want).sum().item())], dtype=torch.int64)
        dist.all_reduce(wrong)
        if rank == 0:
            alg = count * 4 / 1e9 / avg
            print(f"{size}\t{avg * 1e6:.2f}\t{alg:.4f}\t{alg * 2 * (world - 1) / world:.4f}\t{wrong.item()}", flush=True)
        size *= 2
    dist.destroy_process_group()


def main():
    if len(sys.argv) != 6:
        sys.exit("usage: gloo_allreduce.py WORLD MINBYTES MAXBYTES ITERS WARMUP")
    world, minb, maxb, iters, warmup = (int(a) for a in sys.argv[1:])
    port = 29500 + os.getpid() % 2000
    mp.spawn(worker, args=(world, port, minb, maxb, iters, warmup), nprocs=world, join=True)


if __name__ == "__main__":
    main()
