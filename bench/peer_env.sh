# peer_env.sh - sourced by the bench scripts that run Open MPI: PEER_MALLOC, mpirun's
# flags that measure it at its best on the Firecracker guests these benchmarks run in.
#
# Open MPI's MPI_Allreduce mallocs a temporary buffer as large as the message on every
# call; glibc serves one of 64 MiB with a fresh mmap and unmaps it on free, so every call
# pays a page fault per 4 KiB, which costs 5-11 us in these guests (vader 0.23 GB/s at
# 64 MiB and 2 ranks instead of 2.95 with the setting below; BENCHMARKS.md, "Speed", 22).
# Telling glibc to keep freed memory (mmap_max=0, trim_threshold 4 GiB) removes that.
PEER_MALLOC=(-x GLIBC_TUNABLES=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=4294967296)
