/* submit_host: the host's share of a submit, alone. Creates a CUDA-backend
 * runtime with rings large enough that nothing waits for the device, and
 * times tsr_rt_submit of 10,000 tasks (independent adds of N floats into
 * distinct outputs, or with --chain x += y on one buffer; with --group the
 * adds as one tsr_rt_submit_group of 10,000 items). Run it against
 * the test double of the driver, which launches nothing, so no device
 * consumes the rings and nothing else shares the host's memory system:
 *
 *   LD_LIBRARY_PATH=build/main/tests/fakes build/main/bench/submit_host [N] [--chain | --group]
 *
 * (on a real GPU the kernel runs and this times submit beside it). Memory
 * is locked first (mlockall) so that first touches of the rings are not
 * counted: a real driver's pinned memory is resident from the start.
 * Prints one line per repetition and the best, in microseconds a task,
 * and beside it the floor: the least a submit of these tasks could cost
 * (floor_us below), measured in the same run. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <time.h>

#include "bench_record.h"
#include "tessera/rt.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

enum { TASKS = 10000, REPS = 5 };

/* The least a submit could cost with this task struct, measured beside it:
 * per task, read what the runtime reads of it (op, pointers, the dims in
 * use), insert each operand's start address into an open-addressing table
 * (the least dependency tracking can do) and write a 128-byte descriptor
 * into a ring of the runtime's size. No validation, no ranges, no waits. */
static double floor_us(tsr_rt_task_t (*t)[TASKS], tsr_rt_t *rt) {
  typedef struct {
    uint64_t w[16];
  } desc_t;
  tsr_rt_stats_t s;
  tsr_rt_stats(rt, &s);
  size_t ring = (size_t)s.lanes * s.lane_slots;
  desc_t *d = aligned_alloc(64, ring * sizeof(desc_t));
  enum { HASH = 1 << 16 };
  uint64_t *h = calloc(2 * HASH, sizeof(uint64_t));
  if (!d || !h) return -1;
  memset(d, 0, ring * sizeof(desc_t));
  double best = 1e9;
  uint64_t sink = 0;
  for (int r = 0; r < REPS; r++) {
    memset(h, 0, 2 * HASH * sizeof(uint64_t));
    double t0 = now_s();
    for (int i = 0; i < TASKS; i++) {
      const tsr_rt_task_t *k = &t[r][i];
      desc_t v = {{0}};
      v.w[0] = (uint64_t)(uintptr_t)k->out.data;
      v.w[1] = (uint64_t)(uintptr_t)k->in[0].data;
      v.w[2] = (uint64_t)(uintptr_t)k->in[1].data;
      v.w[3] = (uint64_t)k->op;
      for (uint32_t dd = 0; dd < k->out.ndim; dd++)
        v.w[4] += (uint64_t)(k->out.sizes[dd] ^ k->out.strides[dd] ^ k->in[0].strides[dd] ^ k->in[1].strides[dd]);
      for (int j = 0; j < 3; j++) {
        uint64_t key = v.w[j] | 1, x = (key * UINT64_C(0x9e3779b97f4a7c15)) >> 48;
        while (h[2 * x] && h[2 * x] != key) x = (x + 1) & (HASH - 1);
        sink += h[2 * x + 1];
        h[2 * x] = key;
        h[2 * x + 1] = (uint64_t)i;
      }
      memcpy(&d[(size_t)i % ring], &v, sizeof(v));
    }
    double us = (now_s() - t0) * 1e6 / TASKS;
    if (us < best) best = us;
  }
  if (sink == UINT64_MAX) printf("sink\n"); /* keeps the lookups */
  free(d);
  free(h);
  return best;
}

int main(int argc, char **argv) {
  int64_t n = 1024;
  int chain = 0, group = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--chain") == 0)
      chain = 1;
    else if (strcmp(argv[i], "--group") == 0)
      group = 1;
    else if (atoll(argv[i]) > 0 && atoll(argv[i]) <= (1 << 24))
      n = atoll(argv[i]);
    else {
      fprintf(stderr, "usage: submit_host [ELEMENTS (1 to 2^24)] [--chain | --group]\n");
      return 2;
    }
  }
  /* REPS x TASKS tasks fit the rings of every lane without a wait */
  tsr_rt_options_t o = {.lane_slots = chain ? 65536 : 512};
  tsr_rt_t *rt = NULL;
  tsr_status_t st = tsr_rt_create(&o, &rt);
  if (st) {
    printf("SKIP: %s\n", tsr_status_message(st));
    return 77;
  }
  static tsr_rt_task_t t[REPS][TASKS];
  char *base = NULL;
  /* every repetition writes outputs of its own: nothing completes here, so
   * a second write of the same outputs would depend on the first */
  size_t outs = chain ? 1 : (size_t)REPS * TASKS;
  st = tsr_rt_alloc(rt, (outs + 2) * (size_t)n * 4, (void **)&base);
  if (st) {
    fprintf(stderr, "submit_host: %s\n", tsr_status_message(st));
    return 1;
  }
  /* the rings are allocated: make them resident (as root; else the first
   * touches are counted, and the line says so) */
  bool locked = mlockall(MCL_CURRENT) == 0;
  for (int r = 0; r < REPS; r++)
    for (int i = 0; i < TASKS; i++) {
      tsr_rt_task_t *k = &t[r][i];
      *k = (tsr_rt_task_t){.op = TSR_RT_OP_ADD};
      char *out = chain ? base : base + ((size_t)r * TASKS + (size_t)i + 2) * (size_t)n * 4;
      tsr_rt_tensor_contiguous(&k->out, out, TSR_RT_F32, 1, &n);
      tsr_rt_tensor_contiguous(&k->in[0], chain ? base : base + (size_t)n * 4, TSR_RT_F32, 1, &n);
      tsr_rt_tensor_contiguous(&k->in[1], base + (size_t)n * 4, TSR_RT_F32, 1, &n);
    }
  if (chain && group) {
    fprintf(stderr, "submit_host: --chain or --group, not both\n");
    return 2;
  }
  /* the group's items: the same pointers as the tasks' */
  static void *gp[REPS][3][TASKS];
  for (int r = 0; r < REPS; r++)
    for (int i = 0; i < TASKS; i++) {
      gp[r][0][i] = t[r][i].out.data;
      gp[r][1][i] = t[r][i].in[0].data;
      gp[r][2][i] = t[r][i].in[1].data;
    }
  double best = 1e9;
  for (int r = 0; r < REPS; r++) {
    double t0 = now_s();
    if (group) {
      tsr_rt_group_t g = {.task = t[r][0], .count = TASKS, .out = gp[r][0], .in = {gp[r][1], gp[r][2]}};
      st = tsr_rt_submit_group(rt, &g, NULL, NULL);
    } else {
      st = tsr_rt_submit(rt, t[r], TASKS, NULL);
    }
    double us = (now_s() - t0) * 1e6 / TASKS;
    if (st) {
      fprintf(stderr, "submit_host: %s\n", tsr_status_message(st));
      return 1;
    }
    printf("rep=%d submit_us_per_task=%.3f\n", r, us);
    if (us < best) best = us;
  }
  double floor_best = floor_us(t, rt);
  printf("workload=%s size=%lld tasks=%d submit_us_per_task_best=%.3f floor_us_per_task_best=%.3f%s\n",
         chain   ? "chain"
         : group ? "adds_group"
                 : "adds",
         (long long)n, TASKS, best, floor_best, locked ? "" : " (memory not locked: page faults included)");
  fflush(stdout);
  tsr_bench_record_t *rec = tsr_bench_record_begin("rt_submit_host", "%s, size %lld%s",
                                                   chain   ? "chain"
                                                   : group ? "adds_group"
                                                           : "adds",
                                                   (long long)n, locked ? "" : ", memory not locked");
  tsr_bench_record_figure(rec, TASKS, "tasks");
  tsr_bench_record_figure(rec, best, "submit_us_per_task_best");
  tsr_bench_record_figure(rec, floor_best, "floor_us_per_task_best");
  tsr_bench_record_end(rec, NULL, NULL);
  /* the double launches nothing: nothing would ever finish, so no destroy
   * (it waits for every task) */
  _exit(0);
}
