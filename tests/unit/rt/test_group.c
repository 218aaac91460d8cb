/* tsr_rt_submit_group through the CPU backend, whose lanes run a group
 * descriptor's items last to first (the device runs them in no order), so
 * a descriptor packed with items that depend on each other gives a wrong
 * answer here too. A group must equal its tasks submitted one by one:
 * random groups over shared memory (in place, shared inputs, items that
 * read, overwrite or partly overlap what other items write, mixed dtypes,
 * broadcast and strided shapes that go task by task, a JIT operator),
 * interleaved with single tasks, under lane jitter; the packing and the
 * tickets; every refusal, with nothing enqueued. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_rt.h"
#include "reference.h"
#include "rt/ops.h"
#include "tessera/rt.h"

static uint64_t rng = 0x2545f4914f6cdd1dull;
static double urand(double lo, double hi) { return tsr_test_urand(&rng, lo, hi); }
static unsigned pick(unsigned n) { return (unsigned)urand(0, n) % n; }

static uint64_t submitted(tsr_rt_t *rt) {
  tsr_rt_stats_t s;
  tsr_rt_stats(rt, &s);
  return s.submitted;
}

/* ---- the differential test ----------------------------------------------- */

/* Memory of each dtype (elements; a side has one of each): the group's
 * side and the tasks' side start equal and must end equal. */
enum { POOL = 4096 };
typedef struct {
  float f32[POOL];
  uint16_t f16[POOL], bf16[POOL];
} pools_t;

static void *pool_at(pools_t *p, tsr_rt_dtype_t t, int64_t i) {
  return t == TSR_RT_F32 ? (void *)&p->f32[i] : t == TSR_RT_F16 ? (void *)&p->f16[i] : (void *)&p->bf16[i];
}
static int64_t pool_index(pools_t *p, tsr_rt_dtype_t t, const void *ptr) {
  const char *base = (const char *)pool_at(p, t, 0);
  return ((const char *)ptr - base) / (t == TSR_RT_F32 ? 4 : 2);
}

static void fill_pools(pools_t *p) {
  for (int i = 0; i < POOL; i++) {
    p->f32[i] = (float)urand(-2, 2);
    p->f16[i] = tsr_rt_f32_to_f16((float)urand(-2, 2));
    p->bf16[i] = tsr_rt_f32_to_bf16((float)urand(-2, 2));
  }
}

static const tsr_rt_op_t ops[] = {
    TSR_RT_OP_ADD,     TSR_RT_OP_SUB,    TSR_RT_OP_MUL,   TSR_RT_OP_MAXIMUM,  TSR_RT_OP_MINIMUM, TSR_RT_OP_TANH,
    TSR_RT_OP_SIGMOID, TSR_RT_OP_RELU,   TSR_RT_OP_SIN,   TSR_RT_OP_HARDTANH, TSR_RT_OP_ADDCMUL, TSR_RT_OP_ADDCDIV,
    TSR_RT_OP_LERP,    TSR_RT_OP_LERP_T, TSR_RT_OP_WHERE, TSR_RT_OP_CLAMP_T,  TSR_RT_OP_NEG,     TSR_RT_OP_SILU,
    TSR_RT_OP_GT,      TSR_RT_OP_AXPBY,  TSR_RT_OP_AXPBYZ};

/* A template: op, dtypes and a shape of `numel` elements (contiguous, or,
 * with `odd`, one with a broadcast input or a transposed out). */
static int template_task(tsr_rt_task_t *k, tsr_rt_op_t op, int nin, int64_t *numel, bool odd) {
  *k = (tsr_rt_task_t){.op = op, .scalar = {-1.f, 1.f}};
  static const int64_t shapes[][2] = {{1, 4}, {1, 7}, {4, 16}, {1, 64}, {10, 10}, {3, 33}};
  const int64_t *sh = shapes[pick(6)];
  int64_t sz[2] = {sh[0], sh[1]};
  *numel = sz[0] * sz[1];
  for (int r = 0; r <= nin; r++) {
    tsr_rt_tensor_t *t = r ? &k->in[r - 1] : &k->out;
    static const tsr_rt_dtype_t dts[] = {TSR_RT_F32, TSR_RT_F32, TSR_RT_F16, TSR_RT_BF16};
    tsr_rt_tensor_contiguous(t, NULL, dts[pick(4)], 2, sz);
  }
  if (!odd || sz[0] == 1) return 0;
  if (pick(2) && nin) {
    k->in[nin - 1].sizes[0] = 1; /* a row, broadcast over the rows */
  } else {
    /* out transposed: strides (1, rows) over the same elements */
    k->out.strides[0] = 1;
    k->out.strides[1] = sz[0];
  }
  return 1;
}

/* An operand's element index for an item: on a slot of `numel` (the same
 * as or apart from others), anywhere (partial overlaps), or an earlier
 * item's out of the same dtype (an item that reads or overwrites it). */
static int64_t place(int64_t numel, int64_t span, int64_t prev_out) {
  unsigned m = pick(20);
  if (m < 4 && prev_out >= 0) return prev_out;
  if (m < 8) return (int64_t)pick((unsigned)(POOL - span));
  return (int64_t)pick((unsigned)((POOL - span) / numel)) * numel;
}

/* Whether bytes [a, a + an) and [b, b + bn) overlap. */
static bool overlap(const char *a, size_t an, const char *b, size_t bn) { return a < b + bn && b < a + an; }

Test(rt_group, a_group_equals_its_tasks_one_by_one) {
  tsr_rt_t *rt = tsr_test_cpu_rt(4, 16, 20);
  tsr_rt_op_t jit = 0;
  cr_assert_null(tsr_rt_register(rt, "A * 0.5 + B - sigmoid(C)", &jit));
  pools_t *A = malloc(sizeof(*A)), *B = malloc(sizeof(*B));
  fill_pools(A);
  memcpy(B, A, sizeof(*A));
  enum { ROUNDS = 120, MAXN = 100 };
  static void *outs[MAXN], *ins[TSR_RT_MAX_INPUTS][MAXN];
  static tsr_rt_task_t tasks[MAXN];
  uint64_t packed_groups = 0, items_all = 0, descriptors_all = 0;
  for (int round = 0; round < ROUNDS; round++) {
    bool use_jit = pick(6) == 0;
    tsr_rt_op_t op = use_jit ? jit : ops[pick(sizeof(ops) / sizeof(ops[0]))];
    int nin = use_jit ? 3 : tsr_test_arity(op);
    int64_t numel;
    tsr_rt_task_t k;
    bool odd = template_task(&k, op, nin, &numel, pick(5) == 0);
    /* some inputs numbers instead of tensors (any of them, all included) */
    if (pick(3) == 0) {
      k.imm_mask = (uint32_t)pick(1u << nin);
      for (int r = 0; r < nin; r++) k.imm[r] = (float)urand(-2, 2);
      if (odd && nin) k.imm_mask &= ~(1u << (nin - 1)); /* the input that may broadcast stays a tensor */
    }
    size_t count = 1 + pick(MAXN);
    int64_t span = numel * 2; /* room for a transposed or broadcast operand */
    int64_t last_out = -1;
    for (size_t i = 0; i < count; i++) {
      int64_t o = place(numel, span, last_out);
      /* an out of another dtype than the last out's cannot reuse it */
      outs[i] = pool_at(A, k.out.dtype, o);
      last_out = o;
      for (int r = 1; r <= nin; r++) {
        tsr_rt_tensor_t *t = &k.in[r - 1];
        if ((k.imm_mask >> (r - 1)) & 1u) {
          ins[r - 1][i] = NULL; /* a number: never read */
          continue;
        }
        size_t bytes = (size_t)span * (t->dtype == TSR_RT_F32 ? 4 : 2);
        size_t obytes = (size_t)span * (k.out.dtype == TSR_RT_F32 ? 4 : 2);
        for (;;) {
          int64_t at = pick(4) == 0 && t->dtype == k.out.dtype && !odd ? o : place(numel, span, o);
          ins[r - 1][i] = pool_at(A, t->dtype, at);
          /* its own out: the same tensor (in place) or apart */
          bool same = ins[r - 1][i] == outs[i] && t->dtype == k.out.dtype && !odd;
          if (same || !overlap(ins[r - 1][i], bytes, outs[i], obytes)) break;
        }
      }
    }
    /* a single task first, on both sides, touching the same memory */
    if (pick(2)) {
      tsr_rt_task_t one = {.op = TSR_RT_OP_SIGMOID};
      int64_t n = 16, at = (int64_t)pick(POOL - 16), from = (int64_t)pick(POOL - 16);
      if (at < from + 16 && from < at + 16) from = at;
      tsr_rt_tensor_contiguous(&one.out, &A->f32[at], TSR_RT_F32, 1, &n);
      tsr_rt_tensor_contiguous(&one.in[0], &A->f32[from], TSR_RT_F32, 1, &n);
      cr_assert_null(tsr_rt_submit(rt, &one, 1, NULL));
      one.out.data = &B->f32[at];
      one.in[0].data = &B->f32[from];
      cr_assert_null(tsr_rt_submit(rt, &one, 1, NULL));
    }
    tsr_rt_group_t g = {.task = k, .count = count, .out = outs};
    for (int r = 0; r < nin; r++) g.in[r] = ins[r];
    uint64_t s0 = submitted(rt);
    tsr_rt_ticket_t first = 0, last = 0;
    tsr_status_t st = tsr_rt_submit_group(rt, &g, &first, &last);
    cr_assert_null(st, "round %d: %s", round, tsr_status_message(st));
    uint64_t descs = submitted(rt) - s0;
    cr_assert_eq(last - first + 1, descs, "round %d: tickets %llu..%llu for %llu descriptors", round,
                 (unsigned long long)first, (unsigned long long)last, (unsigned long long)descs);
    if (odd)
      cr_assert_eq(descs, count, "round %d: a group of this shape goes task by task", round);
    else
      packed_groups++, items_all += count, descriptors_all += descs;
    /* the same items as tasks, on the other side */
    for (size_t i = 0; i < count; i++) {
      tasks[i] = k;
      tasks[i].out.data = pool_at(B, k.out.dtype, pool_index(A, k.out.dtype, outs[i]));
      for (int r = 0; r < nin; r++)
        if (!((k.imm_mask >> r) & 1u))
          tasks[i].in[r].data = pool_at(B, k.in[r].dtype, pool_index(A, k.in[r].dtype, ins[r][i]));
    }
    cr_assert_null(tsr_rt_submit(rt, tasks, count, NULL));
  }
  cr_assert_null(tsr_rt_flush(rt));
  cr_assert(memcmp(A->f32, B->f32, sizeof(A->f32)) == 0, "f32 memory differs");
  cr_assert(memcmp(A->f16, B->f16, sizeof(A->f16)) == 0, "f16 memory differs");
  cr_assert(memcmp(A->bf16, B->bf16, sizeof(A->bf16)) == 0, "bf16 memory differs");
  /* and the packing happened: fewer descriptors than items */
  cr_assert_gt(packed_groups, ROUNDS / 2);
  cr_assert_lt(descriptors_all * 2, items_all, "%llu descriptors for %llu items", (unsigned long long)descriptors_all,
               (unsigned long long)items_all);
  free(A);
  free(B);
  tsr_test_cpu_rt_done(rt);
}

/* ---- packing, tickets, dependencies -------------------------------------- */

Test(rt_group, independent_items_pack_by_the_operands_a_descriptor_holds) {
  tsr_rt_t *rt = tsr_test_cpu_rt(3, 64, 0);
  enum { N = 100, E = 8 };
  static float x[N][E], y[N][E], o[N][E];
  void *po[N], *px[N], *py[N];
  for (int i = 0; i < N; i++) {
    for (int e = 0; e < E; e++) x[i][e] = (float)urand(-1, 1), y[i][e] = (float)urand(-1, 1);
    po[i] = o[i], px[i] = x[i], py[i] = y[i];
  }
  int64_t n = E;
  tsr_rt_group_t g = {.count = N, .out = po, .in = {px, py}};
  g.task.op = TSR_RT_OP_MUL;
  tsr_rt_tensor_contiguous(&g.task.out, NULL, TSR_RT_F32, 1, &n);
  tsr_rt_tensor_contiguous(&g.task.in[0], NULL, TSR_RT_F32, 1, &n);
  tsr_rt_tensor_contiguous(&g.task.in[1], NULL, TSR_RT_F32, 1, &n);
  tsr_rt_ticket_t first = 0, last = 0;
  cr_assert_null(tsr_rt_submit_group(rt, &g, &first, &last));
  /* three operands: 32 items a descriptor */
  cr_assert_eq(first, 1);
  cr_assert_eq(last, 4, "%llu descriptors", (unsigned long long)last);
  for (tsr_rt_ticket_t t = first; t <= last; t++) cr_assert_null(tsr_rt_wait(rt, t));
  for (int i = 0; i < N; i++)
    for (int e = 0; e < E; e++) cr_assert_eq(o[i][e], x[i][e] * y[i][e], "item %d [%d]", i, e);
  /* unary: two operands, 48 a descriptor */
  g.task.op = TSR_RT_OP_RELU;
  g.in[1] = NULL;
  cr_assert_null(tsr_rt_submit_group(rt, &g, &first, &last));
  cr_assert_eq(last - first + 1, 3);
  cr_assert_null(tsr_rt_flush(rt));
  for (int i = 0; i < N; i++)
    for (int e = 0; e < E; e++) cr_assert_eq(o[i][e], x[i][e] > 0 ? x[i][e] : 0.f, "item %d [%d]", i, e);
  /* an empty group: nothing, and an empty range of tickets */
  g.count = 0;
  cr_assert_null(tsr_rt_submit_group(rt, &g, &first, &last));
  cr_assert_gt(first, last);
  cr_assert_eq(last, 7);
  tsr_test_cpu_rt_done(rt);
}

Test(rt_group, items_that_depend_on_each_other_keep_their_order) {
  tsr_rt_t *rt = tsr_test_cpu_rt(4, 8, 20);
  enum { N = 200, E = 12 };
  static float x[E], y[N][E], want[E];
  void *po[N], *px[N], *py[N];
  for (int e = 0; e < E; e++) x[e] = want[e] = (float)urand(-1, 1);
  /* x = x * 0.5 + y[i]: every item reads and writes x (a chain), as
   * maximum(x, y[i]) in place, then a sum through a second buffer */
  for (int i = 0; i < N; i++) {
    for (int e = 0; e < E; e++) y[i][e] = (float)urand(-1, 1);
    po[i] = x, px[i] = x, py[i] = y[i];
  }
  int64_t n = E;
  tsr_rt_group_t g = {.count = N, .out = po, .in = {px, py}};
  g.task.op = TSR_RT_OP_MAXIMUM;
  tsr_rt_tensor_contiguous(&g.task.out, NULL, TSR_RT_F32, 1, &n);
  tsr_rt_tensor_contiguous(&g.task.in[0], NULL, TSR_RT_F32, 1, &n);
  tsr_rt_tensor_contiguous(&g.task.in[1], NULL, TSR_RT_F32, 1, &n);
  tsr_rt_ticket_t first, last;
  cr_assert_null(tsr_rt_submit_group(rt, &g, &first, &last));
  cr_assert_eq(last - first + 1, N, "a chain: a descriptor an item");
  /* a ping-pong: item i writes a[i % 2] from a[(i + 1) % 2] (reads what
   * the item before wrote, overwrites what it read) */
  static float a[2][E];
  for (int e = 0; e < E; e++) a[0][e] = a[1][e] = 0;
  for (int i = 0; i < N; i++) po[i] = a[i % 2], px[i] = a[(i + 1) % 2], py[i] = y[i];
  g.task.op = TSR_RT_OP_ADD;
  cr_assert_null(tsr_rt_submit_group(rt, &g, NULL, NULL));
  cr_assert_null(tsr_rt_flush(rt));
  for (int i = 0; i < N; i++)
    for (int e = 0; e < E; e++) want[e] = fmaxf(want[e], y[i][e]);
  float b[2][E] = {{0}};
  for (int i = 0; i < N; i++)
    for (int e = 0; e < E; e++) b[i % 2][e] = b[(i + 1) % 2][e] + y[i][e];
  for (int e = 0; e < E; e++) {
    cr_assert_eq(x[e], want[e], "[%d]", e);
    cr_assert_eq(a[0][e], b[0][e], "[%d]", e);
    cr_assert_eq(a[1][e], b[1][e], "[%d]", e);
  }
  tsr_test_cpu_rt_done(rt);
}

Test(rt_group, scattered_operands_are_tracked_item_by_item) {
  /* operands far apart: a span of them would cover other memory, so each
   * item's bytes are recorded; a later task that writes one item's input
   * and one that reads another's output keep their order */
  tsr_rt_t *rt = tsr_test_cpu_rt(4, 16, 30);
  enum { N = 40, E = 16, GAP = 64 };
  float *mem = calloc((size_t)N * 3 * GAP * E, sizeof(float));
  void *po[N], *px[N];
  for (int i = 0; i < N; i++) {
    px[i] = mem + (size_t)(3 * i) * GAP * E;
    po[i] = mem + (size_t)(3 * i + 1) * GAP * E;
    for (int e = 0; e < E; e++) ((float *)px[i])[e] = (float)(i * E + e);
  }
  int64_t n = E;
  tsr_rt_group_t g = {.count = N, .out = po, .in = {px}};
  g.task.op = TSR_RT_OP_RELU;
  tsr_rt_tensor_contiguous(&g.task.out, NULL, TSR_RT_F32, 1, &n);
  tsr_rt_tensor_contiguous(&g.task.in[0], NULL, TSR_RT_F32, 1, &n);
  cr_assert_null(tsr_rt_submit_group(rt, &g, NULL, NULL));
  /* after it: overwrite item 7's input (must wait for the read) and copy
   * item 31's output (must wait for the write) */
  float neg[E], copy[E];
  for (int e = 0; e < E; e++) neg[e] = -1;
  tsr_rt_task_t t[2] = {{.op = TSR_RT_OP_COPY}, {.op = TSR_RT_OP_COPY}};
  tsr_rt_tensor_contiguous(&t[0].out, px[7], TSR_RT_F32, 1, &n);
  tsr_rt_tensor_contiguous(&t[0].in[0], neg, TSR_RT_F32, 1, &n);
  tsr_rt_tensor_contiguous(&t[1].out, copy, TSR_RT_F32, 1, &n);
  tsr_rt_tensor_contiguous(&t[1].in[0], po[31], TSR_RT_F32, 1, &n);
  cr_assert_null(tsr_rt_submit(rt, t, 2, NULL));
  cr_assert_null(tsr_rt_flush(rt));
  for (int e = 0; e < E; e++) {
    cr_assert_eq(((float *)po[7])[e], (float)(7 * E + e), "item 7 read its input before it was overwritten");
    cr_assert_eq(copy[e], (float)(31 * E + e), "the copy read item 31's output");
    cr_assert_eq(((float *)px[7])[e], -1.f);
  }
  free(mem);
  tsr_test_cpu_rt_done(rt);
}

/* ---- refusals ------------------------------------------------------------- */

static void group_refused(tsr_rt_t *rt, const tsr_rt_group_t *g, const char *what, const char *item) {
  uint64_t s0 = submitted(rt);
  tsr_rt_ticket_t first = 99, last = 99;
  tsr_status_t st = tsr_rt_submit_group(rt, g, &first, &last);
  cr_assert_not_null(st, "not refused: %s", what);
  cr_assert(strstr(tsr_status_message(st), what), "%s: %s", what, tsr_status_message(st));
  if (item) cr_assert(strstr(tsr_status_message(st), item), "%s: %s", item, tsr_status_message(st));
  tsr_status_free(st);
  cr_assert_eq(submitted(rt), s0, "%s: something was enqueued", what);
  cr_assert_gt(first, last, "%s: tickets given", what);
}

Test(rt_group, bad_groups_are_refused_whole) {
  tsr_rt_t *rt = tsr_test_cpu_rt(2, 16, 0);
  enum { N = 8, E = 8 };
  static float x[N][E + 1], o[N][E + 1];
  void *po[N], *px[N], *py[N];
  for (int i = 0; i < N; i++) {
    po[i] = o[i], px[i] = x[i], py[i] = x[(i + 1) % N];
    for (int e = 0; e <= E; e++) x[i][e] = (float)urand(-1, 1);
  }
  int64_t n = E;
  tsr_rt_group_t g = {.count = N, .out = po, .in = {px, py}};
  g.task.op = TSR_RT_OP_ADD;
  tsr_rt_tensor_contiguous(&g.task.out, NULL, TSR_RT_F32, 1, &n);
  tsr_rt_tensor_contiguous(&g.task.in[0], NULL, TSR_RT_F32, 1, &n);
  tsr_rt_tensor_contiguous(&g.task.in[1], NULL, TSR_RT_F32, 1, &n);

  group_refused(rt, NULL, "group is NULL", NULL);
  tsr_rt_group_t b = g;
  b.in[1] = NULL;
  group_refused(rt, &b, "in[1] is NULL", NULL);
  b = g;
  b.out = NULL;
  group_refused(rt, &b, "out is NULL", NULL);
  b = g;
  b.task.op = (tsr_rt_op_t)999;
  group_refused(rt, &b, "unknown operator", NULL);
  b = g;
  b.task.in[1].sizes[0] = 3; /* does not broadcast: the shape, so item 0 */
  group_refused(rt, &b, "does not broadcast", "item 0 of the group");
  b = g;
  b.task.out.dtype = (tsr_rt_dtype_t)7;
  group_refused(rt, &b, "unsupported dtype", "item 0");

  /* one bad item among good ones: named, nothing enqueued */
  po[5] = NULL;
  group_refused(rt, &g, "out: null data pointer", "item 5 of the group");
  po[5] = o[5];
  px[6] = (char *)x[6] + 2;
  group_refused(rt, &g, "not aligned", "item 6 of the group");
  px[6] = x[6];
  px[3] = o[3] + 1; /* in[0] partly over its own out */
  group_refused(rt, &g, "overlaps out without being the same tensor", "item 3 of the group");
  px[3] = (void *)(uintptr_t)(UINTPTR_MAX - 15); /* its bytes wrap around the address space */
  group_refused(rt, &g, "outside the address space", "item 3 of the group");
  px[3] = x[3];
  /* the same in a group that goes task by task (a broadcast input) */
  b = g;
  b.task.in[1].sizes[0] = 1;
  po[2] = NULL;
  group_refused(rt, &b, "null data pointer", "item 2 of the group");
  po[2] = o[2];

  /* and with every item fixed, both run */
  cr_assert_null(tsr_rt_submit_group(rt, &g, NULL, NULL));
  cr_assert_null(tsr_rt_submit_group(rt, &b, NULL, NULL));
  cr_assert_null(tsr_rt_flush(rt));
  for (int e = 0; e < E; e++) cr_assert_eq(o[4][e], x[4][e] + x[5][0]);
  tsr_test_cpu_rt_done(rt);
}
