/* mpi_allreduce.c - Open MPI peer for BENCHMARKS.md: MPI_Allreduce float32 sum,
 * out-of-place, timed the way nccl-tests and `goccl perf` time it: warm-up, barrier,
 * N back-to-back calls, time per call averaged over ranks (nccl-tests -a 1), then one
 * checked call on data whose exact sum is known.
 *
 * Build: mpicc -O2 -o mpi_allreduce mpi_allreduce.c
 * Run:   mpirun -np 2 ./mpi_allreduce MINBYTES MAXBYTES ITERS WARMUP
 * Prints one tab-separated line per size: size_bytes time_us algbw_GBps busbw_GBps wrong
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, n;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  if (argc != 5) {
    if (rank == 0) fprintf(stderr, "usage: mpi_allreduce MINBYTES MAXBYTES ITERS WARMUP\n");
    MPI_Finalize();
    return 2;
  }
  long minb = atol(argv[1]), maxb = atol(argv[2]);
  int iters = atoi(argv[3]), warmup = atoi(argv[4]);
  float *send = malloc(maxb), *recv = malloc(maxb);
  memset(send, 0, maxb);
  memset(recv, 0, maxb);
  for (long size = minb; size <= maxb; size *= 2) {
    int count = (int)(size / sizeof(float));
    for (int i = 0; i < warmup; i++) MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < iters; i++) MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double sec = (MPI_Wtime() - t0) / iters, avg;
    MPI_Allreduce(&sec, &avg, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    avg /= n;
    /* check: element i of rank r is (i % 7) + r, so the sum is n*(i%7) + n(n-1)/2 */
    for (int i = 0; i < count; i++) send[i] = (float)(i % 7 + rank);
    MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    long wrong = 0, all;
    for (int i = 0; i < count; i++)
      if (recv[i] != (float)(n * (i % 7) + n * (n - 1) / 2)) wrong++;
    MPI_Allreduce(&wrong, &all, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    memset(send, 0, size);
    double alg = (double)count * sizeof(float) / 1e9 / avg;
    if (rank == 0) printf("%ld\t%.2f\t%.4f\t%.4f\t%ld\n", size, avg * 1e6, alg, alg * 2.0 * (n - 1) / n, all);
    fflush(stdout);
  }
  free(send);
  free(recv);
  MPI_Finalize();
  return 0;
}
