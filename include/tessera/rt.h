/* tessera/rt.h: libtessera-rt, the persistent-kernel micro-op runtime
 * (seed 004, GPUOS; docs/runtime.md).
 *
 * A runtime serves one device: a persistent kernel whose blocks each
 * consume one lane, a ring of task descriptors in pinned host memory that
 * the host publishes and the device reads. Tasks are small tensor
 * operations (the builtin elementwise operators and reductions below) over
 * f32, f16 and bf16 tensors with any strides (0 broadcasts), computed in
 * f32. Submission takes a batch and rings one doorbell; each task gets a
 * ticket; wait(ticket) and flush() block until done.
 *
 * Ordering: tasks that touch overlapping bytes keep program order
 * (read-after-write, write-after-read, write-after-write); the host tracks
 * the outstanding accesses of every byte range and gives each task the
 * lane of the task it depends on (a dependent chain stays on one block, in
 * order, with no cross-block handoff) and, for dependencies on other
 * lanes, explicit waits in its descriptor. Independent tasks spread over
 * the lanes and run in parallel.
 *
 * Backends: TSR_RT_BACKEND_CUDA runs the persistent kernel on a GPU
 * through the CUDA driver API, on the device's primary context (the one
 * PyTorch and the runtime API use, so their pointers are valid here).
 * TSR_RT_BACKEND_CPU runs the same protocol with one host thread per lane
 * standing in for the device's blocks, over host memory: it is the test
 * double of CI and a reference.
 *
 * Threads: one thread at a time may call submit, wait, done, flush and
 * stats (the runtime is owned by a thread, or the caller serialises them);
 * alloc, free, upload and download may be called from any thread. Errors
 * are tsr_status_t (cold paths).
 */
#ifndef TESSERA_RT_H
#define TESSERA_RT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tessera/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TSR_RT_MAX_DIMS 8
#define TSR_RT_MAX_INPUTS 4      /* a JIT operator's inputs (A, B, C, D) */
#define TSR_RT_OP_JIT_FIRST 1024 /* the op code of the first JIT operator registered */
#define TSR_RT_JIT_OPS 256       /* JIT operators a runtime holds, replaced ones included */

typedef enum tsr_rt_dtype_e {
  TSR_RT_F32 = 1,
  TSR_RT_F16 = 2,
  TSR_RT_BF16 = 3,
  TSR_RT_BOOL = 4, /* one byte, 0 or 1: comparisons' outputs, where's condition
                    * (read as 0.f or 1.f; stored as value != 0) */
} tsr_rt_dtype_t;

/* Builtin operators. Unary ones read in[0], binary ones in[0] and in[1],
 * ternary ones in[0..2]; the scalar parameters are in
 * tsr_rt_task_t.scalar. Any input of an elementwise operator may be a
 * number instead of a tensor (tsr_rt_task_t.imm_mask). Codes are stable:
 * new operators are added at the end. */
typedef enum tsr_rt_op_e {
  TSR_RT_OP_ADD = 1,
  TSR_RT_OP_SUB,
  TSR_RT_OP_MUL,
  TSR_RT_OP_DIV,
  TSR_RT_OP_MAXIMUM,
  TSR_RT_OP_MINIMUM,
  TSR_RT_OP_POW,
  TSR_RT_OP_RELU,
  TSR_RT_OP_SIGMOID,
  TSR_RT_OP_TANH,
  TSR_RT_OP_EXP,
  TSR_RT_OP_LOG,
  TSR_RT_OP_SQRT,
  TSR_RT_OP_ABS,
  TSR_RT_OP_SIN,
  TSR_RT_OP_COS,
  TSR_RT_OP_GELU,
  TSR_RT_OP_HARDSIGMOID,
  TSR_RT_OP_HARDSWISH,
  TSR_RT_OP_LEAKY_RELU, /* scalar[0]: negative slope */
  TSR_RT_OP_HARDTANH,   /* scalar[0], scalar[1]: min, max */
  TSR_RT_OP_ELU,        /* scalar[0]: alpha */
  TSR_RT_OP_SOFTPLUS,   /* beta 1, threshold 20 (PyTorch's defaults) */
  TSR_RT_OP_CLAMP,      /* scalar[0], scalar[1]: min, max */
  TSR_RT_OP_CLAMP_MIN,  /* scalar[0] */
  TSR_RT_OP_CLAMP_MAX,  /* scalar[0] */
  TSR_RT_OP_COPY,       /* out = in[0], converting dtype and layout */
  TSR_RT_OP_SUM,        /* over the dims in reduce_mask */
  TSR_RT_OP_MEAN,
  /* unary */
  TSR_RT_OP_NEG,
  TSR_RT_OP_RECIPROCAL,
  TSR_RT_OP_RSQRT,
  TSR_RT_OP_SQUARE,
  TSR_RT_OP_EXP2,
  TSR_RT_OP_LOG1P,
  TSR_RT_OP_EXPM1,
  TSR_RT_OP_SILU,
  TSR_RT_OP_MISH,
  /* binary */
  TSR_RT_OP_LERP, /* in[0] + scalar[0] * (in[1] - in[0]), PyTorch's two-sided form */
  TSR_RT_OP_EQ,   /* comparisons: 1 or 0 (a bool out stores them as such) */
  TSR_RT_OP_NE,
  TSR_RT_OP_LT,
  TSR_RT_OP_LE,
  TSR_RT_OP_GT,
  TSR_RT_OP_GE,
  /* ternary */
  TSR_RT_OP_ADDCMUL, /* in[0] + scalar[0] * in[1] * in[2] */
  TSR_RT_OP_ADDCDIV, /* in[0] + scalar[0] * (in[1] / in[2]) */
  TSR_RT_OP_LERP_T,  /* lerp with in[2] the weight */
  TSR_RT_OP_WHERE,   /* in[0] != 0 ? in[1] : in[2] */
  TSR_RT_OP_CLAMP_T, /* minimum(maximum(in[0], in[1]), in[2]) */
  /* the optimizers' updates, one pass each (binary, then ternary) */
  TSR_RT_OP_AXPBY,       /* scalar[0] * in[0] + scalar[1] * in[1] */
  TSR_RT_OP_AXPBYZ,      /* scalar[0] * in[0] + scalar[1] * in[1] * in[2] */
  TSR_RT_OP_ADAM_UPDATE, /* in[0] + scalar[0] * in[1] / (sqrt(in[2]) + scalar[1]) */
  TSR_RT_OP_COUNT_       /* one past the last */
} tsr_rt_op_t;

/* A tensor as a task sees it: `data` is a device pointer (host memory for
 * the CPU backend) to element [0, ..., 0]; strides in elements, any sign,
 * 0 for a broadcast dim. ndim 0 is a scalar (one element). */
typedef struct tsr_rt_tensor_s {
  void *data;
  tsr_rt_dtype_t dtype;
  uint32_t ndim;
  int64_t sizes[TSR_RT_MAX_DIMS];
  int64_t strides[TSR_RT_MAX_DIMS];
} tsr_rt_tensor_t;

/* One task. Elementwise: every input broadcasts to out's shape (same
 * ndim; an input dim of size 1 or stride 0 repeats). Reductions (SUM,
 * MEAN): in[0] has the full shape, reduce_mask the dims reduced (bit d =
 * dim d); out has in[0]'s ndim with the reduced dims of size 1 (keepdim)
 * or without them (keepdim false). The output must not overlap an input
 * unless it is the same tensor elementwise (in-place). */
typedef struct tsr_rt_task_s {
  tsr_rt_op_t op; /* a builtin operator, or a code tsr_rt_register gave */
  float scalar[2];
  uint32_t reduce_mask;
  bool keepdim;
  tsr_rt_tensor_t out;
  tsr_rt_tensor_t in[TSR_RT_MAX_INPUTS]; /* builtins: in[0] .. in[arity - 1]; JIT: its arity */
  /* Numbers as inputs of an elementwise task: bit i set, in[i] is not
   * read (not a tensor, no memory, no dependency) and every element of it
   * is imm[i] (PyTorch's `x + 0.5`, `3.0 - x`, `where(c, x, 0.0)`). */
  uint32_t imm_mask;
  float imm[TSR_RT_MAX_INPUTS];
} tsr_rt_task_t;

typedef enum tsr_rt_backend_e {
  TSR_RT_BACKEND_CUDA = 1,
  TSR_RT_BACKEND_CPU = 2,
} tsr_rt_backend_t;

typedef struct tsr_rt_options_s {
  tsr_rt_backend_t backend; /* 0: CUDA */
  uint32_t device;          /* CUDA device ordinal */
  uint32_t lanes;           /* 0: one per SM (CUDA), 4 (CPU) */
  uint32_t lane_slots;      /* ring slots per lane, a power of two; 0: 256 */
  uint32_t threads;         /* threads per block, a multiple of 32; 0: 256 */
  uint32_t cpu_jitter_us;   /* CPU backend: each lane sleeps a random 0 .. this
                             * many us before each task (tests: it shakes out
                             * any ordering the protocol does not enforce) */
  uint32_t idle_us;         /* CUDA: how long the persistent kernel stays with
                             * nothing to do before it ends (its blocks hold
                             * the SMs meanwhile; tsr_rt_park ends it sooner);
                             * 0: 200; at most 10,000,000 */
} tsr_rt_options_t;

typedef struct tsr_rt_s tsr_rt_t;
typedef uint64_t tsr_rt_ticket_t; /* 1, 2, ... in submission order */

/* Starts a runtime: maps the ring, loads the kernel and launches it (CUDA),
 * or starts the lane threads (CPU). `options` may be NULL (defaults). */
TSR_MUST_USE tsr_status_t tsr_rt_create(const tsr_rt_options_t *options, tsr_rt_t **out_rt);

/* Stops it: every task submitted before runs to the end, then the kernel
 * (or the threads) stop and everything is freed. Returns the first error a
 * task reported, if any. */
TSR_MUST_USE tsr_status_t tsr_rt_destroy(tsr_rt_t *rt);

/* Validates every task of the batch (shapes, strides, dtypes, pointers,
 * operator): one bad task refuses the whole batch, nothing enqueued, and
 * the error names its index and what is wrong. Then enqueues them in order
 * and rings the doorbell once. Blocks while a lane's ring is full (the
 * device frees slots as it goes; no copy per task). *out_last (may be NULL)
 * is the last task's ticket; the batch's are consecutive. */
TSR_MUST_USE tsr_status_t tsr_rt_submit(tsr_rt_t *rt, const tsr_rt_task_t *tasks, size_t count,
                                        tsr_rt_ticket_t *out_last);

/* As tsr_rt_submit, for a caller that submits a task or a few at a time
 * (a framework's operator calls, python/csrc): the newest descriptors of
 * the lane written last may stay unposted, unseen by the device, until 8
 * have gathered there, a task goes to another lane, or the next
 * tsr_rt_submit, tsr_rt_post, tsr_rt_wait, tsr_rt_done (when not done yet)
 * or tsr_rt_flush; and independent tasks go to a lane in runs of 8 across
 * calls instead of to the next lane each call. It saves a store per call
 * to a line the device polls (about 0.5-1.5 us each on a GPU host). Tasks
 * keep their order and dependencies whichever way they were submitted. */
TSR_MUST_USE tsr_status_t tsr_rt_submit_deferred(tsr_rt_t *rt, const tsr_rt_task_t *tasks, size_t count,
                                                 tsr_rt_ticket_t *out_last);

/* Posts every descriptor written (after tsr_rt_submit_deferred): the
 * device sees all of it. Cheap when nothing is unposted. */
void tsr_rt_post(tsr_rt_t *rt);

/* Hands the device to other work for a while (a framework's own kernels):
 * the persistent kernel ends as soon as every lane has run what is posted
 * (within microseconds, the pending work done first), instead of after its
 * idle time, during which its blocks hold every SM and another kernel
 * that cannot fit beside them waits (a 64x64 cuBLAS GEMM waited about
 * 200 us on the H200, 2026-11-28). The next submit starts it again (a
 * launch, about 10-20 us). Call it before launching other device work
 * after tasks; cheap when the kernel has already ended. Nothing on the
 * CPU backend. */
void tsr_rt_park(tsr_rt_t *rt);

/* A group: `count` tasks of one shape, each with operands of its own, as
 * a framework's foreach operators make them (one add per tensor of a
 * list, an optimizer's step over every parameter). Item i is `task` with
 * out.data = out[i] and in[k].data = in[k][i]; `task`'s own data pointers
 * are not read. */
typedef struct tsr_rt_group_s {
  tsr_rt_task_t task;                 /* op, scalars, reduce fields, every operand's dtype, ndim, sizes, strides */
  size_t count;                       /* items */
  void *const *out;                   /* count outputs */
  void *const *in[TSR_RT_MAX_INPUTS]; /* for each input the operator takes: count pointers */
} tsr_rt_group_t;

/* Submits a group: the result is that of a tsr_rt_submit of its `count`
 * tasks in item order (the same validation, an error naming the item and
 * nothing enqueued; the same ordering against everything before and
 * after and among the items). For an elementwise task whose operands are
 * all contiguous of out's shape it costs the host a fraction of that: the
 * shape is checked once, the items go up to 32 to a descriptor that one
 * block runs (an item that touches what an earlier item of the same
 * descriptor writes starts the next one), and the accesses of each
 * operand are tracked once a descriptor as the range its items span when
 * they lie close together (a false dependency on what lies between them
 * is possible, a missed one never). Other shapes are submitted task by
 * task. Tickets and the stats count descriptors: the group's are
 * *out_first .. *out_last (consecutive; first > last when count is 0), and
 * every item is done once each of those is (tsr_rt_flush, or tsr_rt_wait
 * on each). Either pointer may be NULL. */
TSR_MUST_USE tsr_status_t tsr_rt_submit_group(tsr_rt_t *rt, const tsr_rt_group_t *group, tsr_rt_ticket_t *out_first,
                                              tsr_rt_ticket_t *out_last);

/* JIT operators: an expression over up to four inputs named A, B, C, D
 * ("A * B + C", "sigmoid(A) * (B - 0.5)"; the grammar and functions are in
 * docs/runtime.md), computed in f32 elementwise with broadcasting like the
 * builtins. Its arity is the last input letter it uses (A*C takes three
 * inputs; B is then given and ignored). tsr_rt_register parses it (an error
 * names the column) and returns its op code (TSR_RT_OP_JIT_FIRST and up).
 * On the CUDA backend it is compiled by NVRTC (through the compiled-operator
 * cache) into the next generation of the persistent kernel. */
TSR_MUST_USE tsr_status_t tsr_rt_register(tsr_rt_t *rt, const char *expression, tsr_rt_op_t *out_op);

/* Hot swap: operator `op` computes `expression` (of the same arity) for
 * every task submitted from now on; tasks submitted before it run the old
 * expression, never a mix. The old version's slot is reclaimed once every
 * task that used it has completed. */
TSR_MUST_USE tsr_status_t tsr_rt_replace(tsr_rt_t *rt, tsr_rt_op_t op, const char *expression);

/* Whether ticket `t` has completed (no blocking). */
bool tsr_rt_done(tsr_rt_t *rt, tsr_rt_ticket_t t);

/* Blocks until ticket `t` completed; an error if the runtime failed (a
 * device fault: then every later wait fails too, and destroy reports it). */
TSR_MUST_USE tsr_status_t tsr_rt_wait(tsr_rt_t *rt, tsr_rt_ticket_t t);

/* Blocks until every task submitted so far completed. */
TSR_MUST_USE tsr_status_t tsr_rt_flush(tsr_rt_t *rt);

/* Memory in the runtime's address space (device memory on its context, or
 * host memory for the CPU backend), and copies to and from the host that
 * complete before they return. For tests, benchmarks and simple callers;
 * memory from anywhere else on the same context is as good. */
TSR_MUST_USE tsr_status_t tsr_rt_alloc(tsr_rt_t *rt, size_t bytes, void **out_ptr);
void tsr_rt_free(tsr_rt_t *rt, void *ptr);
TSR_MUST_USE tsr_status_t tsr_rt_upload(tsr_rt_t *rt, void *dst, const void *src, size_t bytes);
TSR_MUST_USE tsr_status_t tsr_rt_download(tsr_rt_t *rt, void *dst, const void *src, size_t bytes);

/* Counters: tasks submitted and completed, and the lanes. */
typedef struct tsr_rt_stats_s {
  uint64_t submitted, completed;
  uint32_t lanes, lane_slots, threads;
  uint64_t cross_lane_waits; /* dependencies on another lane's task */
  uint64_t host_waits;       /* submits that waited for the device */
  uint64_t dep_prunes;       /* the dependency table was full: finished tasks' accesses dropped */
  uint64_t dep_drains;       /* ... and still full: the host waited for everything in flight */
  /* The consumers' own counters, summed over lanes (the CUDA backend; 0
   * on the CPU backend): batches fetched from the rings, tasks run, and
   * the time spent, in SM clock cycles, fetching batches (reading the
   * posted count and the descriptors across PCIe), running tasks (their
   * barriers included), waiting on other lanes, and publishing done counts.
   * device_clock_khz is the SM clock the driver reports, to turn cycles
   * into time (the clock may boost above it). */
  uint64_t device_batches, device_tasks;
  uint64_t device_fetch_cycles, device_run_cycles, device_wait_cycles, device_publish_cycles;
  uint32_t device_clock_khz;
  uint64_t device_launches; /* persistent kernels started: the first, and each
                             * after one ended idle or parked, or a generation */
} tsr_rt_stats_t;
void tsr_rt_stats(tsr_rt_t *rt, tsr_rt_stats_t *out_stats);

/* The size of one task descriptor in the ring, bytes (GPUOS's: 496). */
size_t tsr_rt_descriptor_bytes(void);

/* Helpers for callers: a contiguous tensor of `ndim` sizes, and the number
 * of elements of a tensor (UINT64_MAX when the product of its sizes does
 * not fit 64 bits; 0 when a size is 0 or negative). */
void tsr_rt_tensor_contiguous(tsr_rt_tensor_t *t, void *data, tsr_rt_dtype_t dtype, uint32_t ndim,
                              const int64_t *sizes);
uint64_t tsr_rt_tensor_numel(const tsr_rt_tensor_t *t);
const char *tsr_rt_op_name(tsr_rt_op_t op);

#ifdef __cplusplus
}
#endif
#endif
