/* Shared between the fake libcudart.so.12 and the fake libnccl.so.2 built by the nccl
 * package's TestMain. These fakes emulate just enough of CUDA and NCCL, on host memory
 * and in one process, to check goccl's loader, trampolines and transport logic: the
 * argument order, by-value structs, enum values and error translation. They are a
 * contract test of goccl's side of the ABI, not evidence that real NCCL works. */
#ifndef GOCCL_FAKE_H
#define GOCCL_FAKE_H
#include <stddef.h>

struct fake_op;
typedef int (*fake_try_fn)(struct fake_op *op); /* 1 = complete, 0 = not yet */

/* An operation queued on a fake stream; executed in order by fake_progress. */
struct fake_op {
	fake_try_fn try_run;
	struct fake_op *next;
	void *arg;
};

void fake_lock(void);
void fake_unlock(void);
/* fake_enqueue appends op to stream (lock held); a NULL stream runs it synchronously. */
void fake_enqueue(void *stream, struct fake_op *op);
/* fake_progress advances every stream as far as it can (lock held). */
void fake_progress(void);
/* fake_log appends one line to $FAKE_LOG. */
void fake_log(const char *fmt, ...);
/* fake_fail returns the code configured for name in $FAKE_FAIL ("name=code,..."), or 0. */
int fake_fail(const char *name);
int fake_cur_dev(void);
#endif
