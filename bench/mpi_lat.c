/* mpi_lat.c - Open MPI peer of bench/lat for BENCHMARKS.md: the time per call of a
 * small blocking operation, back to back, as lat times goccl's.
 *
 * Build: mpicc -O2 -o mpi_lat mpi_lat.c
 * Run:   mpirun -np N ./mpi_lat OP COUNT ITERS WARMUP
 * OP is allreduce (float32 sum, in place), sendrecv (MPI_Sendrecv of COUNT float32 to
 * the next rank from the previous), pingpong (MPI_Send then MPI_Recv on rank 0, the
 * reverse on rank 1; one round trip per call), barrier, broadcast (MPI_Bcast from rank
 * 0, in place), reduce (MPI_Reduce to rank 0, float32 sum), gather and scatter (root
 * 0, blocks of COUNT float32), or allgather, reducescatter
 * (MPI_Reduce_scatter_block, float32 sum) or alltoall over blocks of COUNT float32,
 * alltoallv (the same exchange through MPI_Alltoallv with equal counts), or neighbors
 * (MPI_Irecv from the previous and the next rank, MPI_Isend of COUNT float32 to each,
 * then MPI_Waitall: goccl's BatchSendRecv).
 * Prints, on rank 0, "OP: TIME us/op". After the timed calls one more runs on inputs whose result is known
 * (element i of rank r is r*1000+i), and the program exits 1 if a rank got another.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, n;
static int *counts, *displs;

static void call(const char *op, float *x, float *y, int count) {
  int next = (rank + 1) % n, prev = (rank + n - 1) % n;
  if (!strcmp(op, "allreduce")) {
    MPI_Allreduce(MPI_IN_PLACE, x, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  } else if (!strcmp(op, "sendrecv")) {
    MPI_Sendrecv(x, count, MPI_FLOAT, next, 0, y, count, MPI_FLOAT, prev, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  } else if (!strcmp(op, "pingpong")) {
    if (rank == 0) {
      MPI_Send(x, count, MPI_FLOAT, 1, 0, MPI_COMM_WORLD);
      MPI_Recv(y, count, MPI_FLOAT, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else if (rank == 1) {
      MPI_Recv(y, count, MPI_FLOAT, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Send(x, count, MPI_FLOAT, 0, 0, MPI_COMM_WORLD);
    }
  } else if (!strcmp(op, "broadcast")) {
    MPI_Bcast(x, count, MPI_FLOAT, 0, MPI_COMM_WORLD);
  } else if (!strcmp(op, "reduce")) {
    MPI_Reduce(x, y, count, MPI_FLOAT, MPI_SUM, 0, MPI_COMM_WORLD);
  } else if (!strcmp(op, "gather")) {
    MPI_Gather(x, count, MPI_FLOAT, y, count, MPI_FLOAT, 0, MPI_COMM_WORLD);
  } else if (!strcmp(op, "scatter")) {
    MPI_Scatter(x, count, MPI_FLOAT, y, count, MPI_FLOAT, 0, MPI_COMM_WORLD);
  } else if (!strcmp(op, "allgather")) {
    MPI_Allgather(x, count, MPI_FLOAT, y, count, MPI_FLOAT, MPI_COMM_WORLD);
  } else if (!strcmp(op, "reducescatter")) {
    MPI_Reduce_scatter_block(x, y, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  } else if (!strcmp(op, "alltoall")) {
    MPI_Alltoall(x, count, MPI_FLOAT, y, count, MPI_FLOAT, MPI_COMM_WORLD);
  } else if (!strcmp(op, "alltoallv")) {
    MPI_Alltoallv(x, counts, displs, MPI_FLOAT, y, counts, displs, MPI_FLOAT, MPI_COMM_WORLD);
  } else if (!strcmp(op, "neighbors")) {
    MPI_Request req[4];
    MPI_Irecv(y, count, MPI_FLOAT, prev, 0, MPI_COMM_WORLD, &req[0]);
    MPI_Irecv(y + count, count, MPI_FLOAT, next, 0, MPI_COMM_WORLD, &req[1]);
    MPI_Isend(x, count, MPI_FLOAT, next, 0, MPI_COMM_WORLD, &req[2]);
    MPI_Isend(x, count, MPI_FLOAT, prev, 0, MPI_COMM_WORLD, &req[3]);
    MPI_Waitall(4, req, MPI_STATUSES_IGNORE);
  } else {
    MPI_Barrier(MPI_COMM_WORLD);
  }
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  if (argc != 5) {
    if (rank == 0) fprintf(stderr, "usage: mpi_lat allreduce|sendrecv|pingpong|barrier|broadcast|reduce|gather|scatter|allgather|reducescatter|alltoall|alltoallv|neighbors COUNT ITERS WARMUP\n");
    MPI_Finalize();
    return 2;
  }
  const char *op = argv[1];
  int count = atoi(argv[2]), iters = atoi(argv[3]), warm = atoi(argv[4]);
  float *x = calloc((size_t)n * count + 1, sizeof(float)), *y = calloc((size_t)n * count + 1, sizeof(float));
  counts = calloc(n, sizeof(int));
  displs = calloc(n, sizeof(int));
  for (int i = 0; i < n; i++) counts[i] = count, displs[i] = i * count;
  for (int i = 0; i < warm; i++) call(op, x, y, count);
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = MPI_Wtime();
  for (int i = 0; i < iters; i++) call(op, x, y, count);
  double us = (MPI_Wtime() - t0) / iters * 1e6;
  for (int i = 0; i < n * count; i++) x[i] = (float)(rank * 1000 + i);
  call(op, x, y, count);
  long wrong = 0, all = 0;
  int outs = count;
  if (!strcmp(op, "allgather") || !strcmp(op, "alltoall") || !strcmp(op, "alltoallv") || !strcmp(op, "gather")) outs = n * count;
  if (!strcmp(op, "neighbors")) outs = 2 * count;
  for (int i = 0; i < outs; i++) {
    float want = 0, got = y[i];
    if (!strcmp(op, "allreduce")) want = (float)(1000 * n * (n - 1) / 2 + n * i), got = x[i];
    else if (!strcmp(op, "sendrecv")) want = (float)(((rank + n - 1) % n) * 1000 + i);
    else if (!strcmp(op, "pingpong") && rank == 0) want = (float)(1000 + i);
    else if (!strcmp(op, "broadcast")) want = (float)i, got = x[i];
    else if (!strcmp(op, "reduce") && rank == 0) want = (float)(1000 * n * (n - 1) / 2 + n * i);
    else if (!strcmp(op, "gather") && rank == 0) want = (float)((i / count) * 1000 + i % count);
    else if (!strcmp(op, "scatter")) want = (float)(rank * count + i);
    else if (!strcmp(op, "allgather")) want = (float)((i / count) * 1000 + i % count);
    else if (!strcmp(op, "reducescatter")) want = (float)(1000 * n * (n - 1) / 2 + n * (rank * count + i));
    else if (!strcmp(op, "alltoall") || !strcmp(op, "alltoallv")) want = (float)((i / count) * 1000 + rank * count + i % count);
    else if (!strcmp(op, "neighbors")) want = (float)((i < count ? (rank + n - 1) % n : (rank + 1) % n) * 1000 + i % count);
    else continue;
    if (got != want) wrong++;
  }
  MPI_Allreduce(&wrong, &all, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) {
    if (all) fprintf(stderr, "mpi_lat: %s: %ld wrong elements\n", op, all);
    else printf("%s: %.2f us/op\n", op, us);
  }
  MPI_Finalize();
  return all ? 1 : 0;
}
