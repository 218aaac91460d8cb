/* Which descriptors the host marks TSR_RT_DESC_REG and TSR_RT_DESC_FOLLOW
 * (rt/desc.h): a FOLLOW task runs with no barrier after the task before
 * it in its lane, so a wrong mark is a data race on the GPU that the CPU
 * backend would never show. The runtime here has one lane (every task in
 * it, in order); the descriptors are read back from the ring after a
 * flush. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "rt/internal.h"

enum { N = 1024, SLOTS = 256 };
static tsr_rt_t *rt;
static float *buf;      /* 64 windows of N floats, 16-byte aligned */
static uint64_t base_n; /* the lane's task count before the test's tasks */

static void setup(void) {
  tsr_rt_options_t o = {.backend = TSR_RT_BACKEND_CPU, .lanes = 1, .lane_slots = SLOTS};
  tsr_status_t st = tsr_rt_create(&o, &rt);
  cr_assert_null(st, "%s", st ? tsr_status_message(st) : "");
  buf = aligned_alloc(64, 64 * N * sizeof(float) + 64);
  memset(buf, 0, 64 * N * sizeof(float) + 64);
  base_n = rt->tail[0];
}
static void teardown(void) {
  tsr_status_free(tsr_rt_destroy(rt));
  free(buf);
}
TestSuite(rt_follow, .init = setup, .fini = teardown);

static tsr_rt_task_t bin(tsr_rt_op_t op, float *out, float *a, float *b, int64_t n, tsr_rt_dtype_t dt) {
  tsr_rt_task_t t = {.op = op};
  tsr_rt_tensor_contiguous(&t.out, out, dt, 1, &n);
  tsr_rt_tensor_contiguous(&t.in[0], a, dt, 1, &n);
  if (b) tsr_rt_tensor_contiguous(&t.in[1], b, dt, 1, &n);
  return t;
}
static float *win(int i) { return buf + (size_t)i * N; }

/* Submits the tasks one batch, waits, returns the flags of each. */
static void flags_of(const tsr_rt_task_t *ts, size_t n, uint8_t *out) {
  tsr_status_t st = tsr_rt_submit(rt, ts, n, NULL);
  cr_assert_null(st, "%s", st ? tsr_status_message(st) : "");
  st = tsr_rt_flush(rt);
  cr_assert_null(st, "%s", st ? tsr_status_message(st) : "");
  for (size_t i = 0; i < n; i++) out[i] = rt->desc[(base_n + i) & (SLOTS - 1)].flags;
  base_n += n;
}
#define REG TSR_RT_DESC_REG
#define FOLLOW TSR_RT_DESC_FOLLOW
#define MARKS(f) ((f) & (REG | FOLLOW))

Test(rt_follow, a_chain_follows_after_its_first_task) {
  tsr_rt_task_t t[3];
  for (int i = 0; i < 3; i++) t[i] = bin(TSR_RT_OP_ADD, win(0), win(0), win(1), N, TSR_RT_F32);
  uint8_t f[3];
  flags_of(t, 3, f);
  cr_assert_eq(MARKS(f[0]), REG);
  cr_assert_eq(MARKS(f[1]), REG | FOLLOW);
  cr_assert_eq(MARKS(f[2]), REG | FOLLOW);
}

Test(rt_follow, disjoint_tasks_and_shared_reads_follow) {
  /* w2 = w0 * w1, then w3 = w1 + w0: no byte written is touched by another */
  tsr_rt_task_t t[2] = {bin(TSR_RT_OP_MUL, win(2), win(0), win(1), N, TSR_RT_F32),
                        bin(TSR_RT_OP_ADD, win(3), win(1), win(0), N, TSR_RT_F32)};
  uint8_t f[2];
  flags_of(t, 2, f);
  cr_assert_eq(MARKS(f[1]), REG | FOLLOW);
}

Test(rt_follow, a_partly_overlapping_range_needs_a_barrier) {
  /* the second reads half of what the first wrote: other threads' bytes */
  tsr_rt_task_t t[2] = {bin(TSR_RT_OP_ADD, win(0), win(2), win(3), N, TSR_RT_F32),
                        bin(TSR_RT_OP_RELU, win(4), win(0) + N / 2, NULL, N, TSR_RT_F32)};
  uint8_t f[2];
  flags_of(t, 2, f);
  cr_assert_eq(MARKS(f[1]), REG);
  /* a write over half of what an earlier task of the run read */
  tsr_rt_task_t u[2] = {bin(TSR_RT_OP_ADD, win(6), win(8), win(9), N, TSR_RT_F32),
                        bin(TSR_RT_OP_RELU, win(8) + N / 2, win(10), NULL, N, TSR_RT_F32)};
  flags_of(u, 2, f);
  cr_assert_eq(MARKS(f[1]), REG);
  /* two tasks back counts too: w0 written, w5 in between, then half of w0 read */
  tsr_rt_task_t v[3] = {bin(TSR_RT_OP_ADD, win(0), win(2), win(3), N, TSR_RT_F32),
                        bin(TSR_RT_OP_ADD, win(5), win(2), win(3), N, TSR_RT_F32),
                        bin(TSR_RT_OP_RELU, win(7), win(0) + N / 2, NULL, N, TSR_RT_F32)};
  uint8_t g[3];
  flags_of(v, 3, g);
  cr_assert_eq(MARKS(g[1]), REG | FOLLOW);
  cr_assert_eq(MARKS(g[2]), REG);
}

Test(rt_follow, what_the_register_path_does_not_take) {
  uint8_t f[2];
  /* not a multiple of 4 */
  tsr_rt_task_t a[2] = {bin(TSR_RT_OP_ADD, win(0), win(0), win(1), N - 2, TSR_RT_F32),
                        bin(TSR_RT_OP_ADD, win(0), win(0), win(1), N - 2, TSR_RT_F32)};
  flags_of(a, 2, f);
  cr_assert_eq(MARKS(f[0]) | MARKS(f[1]), 0);
  /* past TSR_RT_REG_VEC float4 a thread (256 threads: 4096 floats), and at it */
  int64_t most = 4 * TSR_RT_REG_VEC * rt->opt.threads;
  tsr_rt_task_t b[2] = {bin(TSR_RT_OP_ADD, win(0), win(0), win(8), most, TSR_RT_F32),
                        bin(TSR_RT_OP_ADD, win(16), win(16), win(24), most + 4, TSR_RT_F32)};
  flags_of(b, 2, f);
  cr_assert_eq(MARKS(f[0]), REG);
  cr_assert_eq(MARKS(f[1]), 0);
  /* half floats; an operand not 16-byte aligned */
  tsr_rt_task_t c[2] = {bin(TSR_RT_OP_ADD, win(0), win(0), win(1), N, TSR_RT_F16),
                        bin(TSR_RT_OP_ADD, win(2) + 1, win(2) + 1, win(3), N - 4, TSR_RT_F32)};
  flags_of(c, 2, f);
  cr_assert_eq(MARKS(f[0]) | MARKS(f[1]), 0);
}

Test(rt_follow, a_new_size_a_reduction_or_a_full_run_start_again) {
  uint8_t f[3];
  tsr_rt_task_t a[2] = {bin(TSR_RT_OP_ADD, win(0), win(0), win(1), N, TSR_RT_F32),
                        bin(TSR_RT_OP_ADD, win(0), win(0), win(1), N / 2, TSR_RT_F32)};
  flags_of(a, 2, f);
  cr_assert_eq(MARKS(f[1]), REG);
  /* a reduction between two steps of a chain */
  tsr_rt_task_t b[3] = {bin(TSR_RT_OP_ADD, win(0), win(0), win(1), N, TSR_RT_F32),
                        {.op = TSR_RT_OP_SUM},
                        bin(TSR_RT_OP_ADD, win(0), win(0), win(1), N, TSR_RT_F32)};
  int64_t n = N, one = 1;
  tsr_rt_tensor_contiguous(&b[1].in[0], win(4), TSR_RT_F32, 1, &n);
  tsr_rt_tensor_contiguous(&b[1].out, win(5), TSR_RT_F32, 1, &one);
  b[1].reduce_mask = 1;
  b[1].keepdim = true;
  flags_of(b, 3, f);
  cr_assert_eq(MARKS(f[1]), 0);
  cr_assert_eq(MARKS(f[2]), REG);
  /* writes to more distinct ranges than a run keeps */
  enum { M = TSR__RT_RUN_RANGES + 2 };
  tsr_rt_task_t c[M];
  uint8_t g[M];
  c[0] = bin(TSR_RT_OP_ADD, win(0), win(0), win(1), N - 2, TSR_RT_F32); /* ends the run before */
  for (int i = 1; i < M; i++) c[i] = bin(TSR_RT_OP_RELU, win(20 + i), win(40), NULL, N, TSR_RT_F32);
  flags_of(c, M, g);
  cr_assert_eq(MARKS(g[1]), REG);
  for (int i = 2; i < M - 1; i++) cr_assert_eq(MARKS(g[i]), REG | FOLLOW, "task %d", i);
  cr_assert_eq(MARKS(g[M - 1]), REG);
}
