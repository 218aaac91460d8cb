/* FAR: the paper's worked examples (Figures 5, 6, 8, 9 as described in the
 * text), hand-checked tiny plans on both GPU families, Rodinia, multi-batch,
 * --effort and the dry-run executor. */
#include "common.h"
#include "mig/internal.h"

/* A30 with free reconfigurations: the figures ignore their cost. */
static tsr_mig_model_t a30_free(void) {
  tsr_mig_model_t m = mig_model("A30");
  for (int k = 0; k < m.nsizes; k++) m.create_s[k] = m.destroy_s[k] = 0;
  return m;
}

/* Size-1-only tasks with the given times. */
static tsr_mig_tasks_t *ones(const tsr_mig_model_t *m, const double *times, int n) {
  tsr_mig_tasks_t *t;
  cr_assert_null(tsr_mig_tasks_create(m, n, &t));
  for (int i = 0; i < n; i++) cr_assert_null(tsr_mig_tasks_set_time(t, i, 1, times[i]));
  return t;
}

/* A30 leaves are nodes 3 ({0}), 4 ({1}), 5 ({2}), 6 ({3}). */

/* A batch of n size-1 tasks (times) on the leaves node_of (refined in
 * place): its makespan timed, refined by moves and swaps, timed again, and
 * the refined schedule committed as a plan that must be valid. */
typedef struct {
  double before, after;
  int moves, swaps;
} refined_t;

static refined_t refine_ones(const double *times, int *node_of, int n) {
  tsr_mig_model_t m = a30_free();
  tsr_mig_tasks_t *t = ones(&m, times, n);
  int ids[16];
  for (int i = 0; i < n; i++) ids[i] = i;
  tsr__batch_t b = {.model = &m, .tasks = t, .n = n, .ids = ids, .node_of = node_of};
  tsr__state_t st;
  tsr_state_init(&st);
  tsr__engine_t *e;
  cr_assert_null(tsr_engine_new(n, &e));
  double start[16];
  tsr__timing_t tm = {.start = start};
  refined_t r;
  tsr_engine_eval(e, &b, &st, &tm);
  r.before = tm.makespan;
  tsr_refine(e, &b, &st, 100, false, &r.moves, &r.swaps);
  tsr_engine_eval(e, &b, &st, &tm);
  r.after = tm.makespan;
  tsr_mig_plan_t *p;
  cr_assert_null(tsr_plan_new(&m, "refined", n, &p));
  cr_assert_null(tsr_engine_commit(e, &b, &st, p, 0));
  tsr_plan_finish(p, t);
  mig_assert_valid(p, t);
  cr_assert_float_eq(p->makespan, r.after, 1e-9);
  tsr_mig_plan_free(p);
  tsr_engine_free(e);
  tsr_state_free(&st);
  tsr_mig_tasks_free(t);
  return r;
}

Test(mig_far_examples, figure5_move) {
  double times[] = {2.2, 4, 1, 1, 1}; /* Tj, Tk share slice 0 */
  int node_of[] = {3, 3, 4, 5, 6};
  refined_t r = refine_ones(times, node_of, 5);
  cr_assert_float_eq(r.before, 6.2, 1e-9);
  cr_assert_eq(r.moves, 1);
  cr_assert_eq(r.swaps, 0);
  cr_assert_eq(node_of[0], 4, "Tj moves to slice 1, the first to be free");
  cr_assert_float_eq(r.after, 4.0, 1e-9);
  cr_assert_gt(r.before / r.after, 1.5); /* "more than 3/2" */
}

Test(mig_far_examples, figure6_swap) {
  double times[] = {5, 5.1, 3, 3, 8, 8};
  int node_of[] = {3, 3, 4, 4, 5, 6};
  refined_t r = refine_ones(times, node_of, 6);
  cr_assert_float_eq(r.before, 10.1, 1e-9);
  cr_assert_eq(r.moves, 0, "no task of slice 0 fits in the margin: only a swap helps");
  cr_assert_eq(r.swaps, 1);
  cr_assert_float_eq(r.after, 8.1, 1e-9);
  double gain = r.before / r.after;
  cr_assert(gain > 1.24 && gain < 1.25, "almost 5/4, got %f", gain);
}

/* Batch A then a reversed batch B after it; returns the makespans before and
 * after the overlap refinement and validates the joined plan. */
static void concat_case(const double *ta, const int *na, int nA, const double *tb, int *nb, int nB, double *out_trivial,
                        double *out_before, double *out_after, int *out_moves, int *out_swaps) {
  tsr_mig_model_t m = a30_free();
  double all[32];
  memcpy(all, ta, sizeof(double) * (size_t)nA);
  memcpy(all + nA, tb, sizeof(double) * (size_t)nB);
  tsr_mig_tasks_t *t = ones(&m, all, nA + nB);
  int ida[16], idb[16];
  for (int i = 0; i < nA; i++) ida[i] = i;
  for (int i = 0; i < nB; i++) idb[i] = nA + i;
  int node_a[16];
  memcpy(node_a, na, sizeof(int) * (size_t)nA);
  tsr__batch_t A = {.model = &m, .tasks = t, .n = nA, .ids = ida, .node_of = node_a};
  tsr__batch_t B = {.model = &m, .tasks = t, .n = nB, .ids = idb, .node_of = nb, .reversed = true};
  tsr__state_t st;
  tsr_state_init(&st);
  tsr__engine_t *e;
  cr_assert_null(tsr_engine_new(16, &e));
  tsr_mig_plan_t *p;
  cr_assert_null(tsr_plan_new(&m, "concat", nA + nB, &p));
  cr_assert_null(tsr_engine_commit(e, &A, &st, p, 0));
  double start[16];
  tsr__timing_t tm = {.start = start};
  B.barrier = true;
  B.reversed = false;
  tsr_engine_eval(e, &B, &st, &tm);
  *out_trivial = tm.makespan;
  B.barrier = false;
  B.reversed = true;
  tsr_engine_eval(e, &B, &st, &tm);
  *out_before = tm.makespan;
  tsr_refine(e, &B, &st, 100, false, out_moves, out_swaps);
  tsr_engine_eval(e, &B, &st, &tm);
  *out_after = tm.makespan;
  cr_assert_null(tsr_engine_commit(e, &B, &st, p, 1));
  tsr_plan_finish(p, t);
  mig_assert_valid(p, t);
  cr_assert_float_eq(p->makespan, *out_after, 1e-9);
  tsr_mig_plan_free(p);
  tsr_engine_free(e);
  tsr_state_free(&st);
  tsr_mig_tasks_free(t);
}

Test(mig_far_examples, figure8_move_to_overlap) {
  double ta[] = {10, 2, 2, 2}, tb[] = {6, 3, 3, 3};
  int na[] = {3, 4, 5, 6}, nb[] = {3, 4, 5, 6};
  double trivial, before, after;
  int moves, swaps;
  concat_case(ta, na, 4, tb, nb, 4, &trivial, &before, &after, &moves, &swaps);
  cr_assert_float_eq(trivial, 16, 1e-9);
  cr_assert_float_eq(before, 16, 1e-9); /* slice 0 still ends batch A late */
  cr_assert_geq(moves, 1);
  cr_assert_eq(swaps, 0);
  cr_assert_float_eq(after, 10, 1e-9); /* B's long task moved off slice 0 */
}

Test(mig_far_examples, figure9_swap_to_overlap) {
  double ta[] = {10, 2, 2, 2}, tb[] = {7, 5, 5, 5, 5, 5, 5};
  int na[] = {3, 4, 5, 6}, nb[] = {3, 4, 4, 5, 5, 6, 6};
  double trivial, before, after;
  int moves, swaps;
  concat_case(ta, na, 4, tb, nb, 7, &trivial, &before, &after, &moves, &swaps);
  cr_assert_float_eq(before, 17, 1e-9);
  cr_assert_eq(moves, 0, "the 7 s task fits nowhere");
  cr_assert_eq(swaps, 1);
  cr_assert_float_eq(after, 15, 1e-9);
}

/* One task's time on one size. */
typedef struct {
  int task, size;
  double seconds;
} timing_t;

/* FAR's plan (valid) of n tasks on `gpu` that run only where `times` says. */
static tsr_mig_plan_t *far_of(const char *gpu, int n, const timing_t *times, int ntimes, tsr_mig_tasks_t **out_tasks) {
  tsr_mig_model_t m = mig_model(gpu);
  tsr_mig_tasks_t *t;
  cr_assert_null(tsr_mig_tasks_create(&m, n, &t));
  for (int q = 0; q < ntimes; q++)
    cr_assert_null(tsr_mig_tasks_set_time(t, times[q].task, times[q].size, times[q].seconds));
  tsr_mig_plan_t *p;
  cr_assert_null(tsr_mig_far_plan(&m, t, NULL, &p));
  mig_assert_valid(p, t);
  *out_tasks = t;
  return p;
}

Test(mig_far_tiny, a30_one_task) {
  tsr_mig_tasks_t *t;
  tsr_mig_plan_t *p = far_of("A30", 1, (timing_t[]){{0, 1, 8}, {0, 2, 4.5}, {0, 4, 2}}, 3, &t);
  /* sizes 1 and 4 tie on area (8 = 4 x 2): both rules are tried, the
   * smaller-size rule's family {1}, {4} and the larger-size rule's {4},
   * each scheduled with siblings in both orders: 2 x (2 + 1) */
  cr_assert_eq(p->nallocations, 6);
  cr_assert_float_eq(p->phase2_makespan, 0.13 + 2, 1e-9);
  cr_assert_eq(p->ninstances, 1);
  cr_assert_eq(p->instances[0].node, 0);
  cr_assert_float_eq(p->instances[0].create_end, 0.13, 1e-9);
  cr_assert_float_eq(p->placements[0].start, 0.13, 1e-9);
  cr_assert_float_eq(p->makespan, 2.13, 1e-9);
  cr_assert_float_eq(p->lower_bound, 8.0 / 4, 1e-12);
  tsr_mig_plan_free(p);
  tsr_mig_tasks_free(t);
}

Test(mig_far_tiny, a100_repartition) {
  /* task 0 runs only on the whole GPU, task 1 only on one slice */
  tsr_mig_tasks_t *t;
  tsr_mig_plan_t *p = far_of("A100", 2, (timing_t[]){{0, 7, 1}, {1, 1, 2}}, 2, &t);
  cr_assert_eq(p->ninstances, 2);
  /* root: created 0-0.24, task 0.24-1.24, destroyed 1.24-1.46 */
  cr_assert_eq(p->instances[0].node, 0);
  cr_assert_float_eq(p->placements[0].start, 0.24, 1e-9);
  cr_assert_float_eq(p->instances[0].destroy_start, 1.24, 1e-9);
  cr_assert_float_eq(p->instances[0].destroy_end, 1.46, 1e-9);
  /* then a 1-slice instance (slice 6, the first leaf reached), 1.46-1.62 */
  cr_assert_eq(p->instances[1].size, 1);
  cr_assert_float_eq(p->instances[1].create_start, 1.46, 1e-9);
  cr_assert_float_eq(p->placements[1].start, 1.62, 1e-9);
  cr_assert_float_eq(p->makespan, 3.62, 1e-9);
  tsr_mig_plan_free(p);
  tsr_mig_tasks_free(t);
}

Test(mig_far_tiny, a30_three_sizes) {
  /* two 2-slice tasks run side by side after one 4-slice task */
  tsr_mig_tasks_t *t;
  tsr_mig_plan_t *p = far_of("A30", 3, (timing_t[]){{0, 4, 1}, {1, 2, 3}, {2, 2, 3}}, 3, &t);
  /* root 0-0.13, task to 1.13, destroyed to 1.23; {0,1} created 1.23-1.35,
   * {2,3} 1.35-1.47 (one at a time) */
  cr_assert_float_eq(p->placements[0].end, 1.13, 1e-9);
  cr_assert_float_eq(p->placements[1].start, 1.35, 1e-9);
  cr_assert_float_eq(p->placements[2].start, 1.47, 1e-9);
  cr_assert_float_eq(p->makespan, 4.47, 1e-9);
  tsr_mig_plan_free(p);
  tsr_mig_tasks_free(t);
}

/* The 16 Rodinia kernels measured on m's GPU. */
static tsr_mig_tasks_t *rodinia(const tsr_mig_model_t *m) {
  tsr_mig_tasks_t *t;
  tsr_status_t st = tsr_mig_tasks_load_csv(m, mig_data("rodinia_times_mean.csv"), &t);
  cr_assert_null(st, "%s", tsr_status_message(st));
  return t;
}

Test(mig_far_rodinia, a100_and_a30) {
  const char *gpus[] = {"A100", "A30"};
  for (int g = 0; g < 2; g++) {
    tsr_mig_model_t m = mig_model(gpus[g]);
    tsr_mig_tasks_t *t = rodinia(&m);
    tsr_mig_plan_t *p, *best, *miso;
    cr_assert_null(tsr_mig_far_plan(&m, t, NULL, &p));
    mig_assert_valid(p, t);
    cr_assert_null(tsr_mig_fixpart_best_plan(&m, t, &best));
    mig_assert_valid(best, t);
    cr_assert_null(tsr_mig_miso_plan(&m, t, &miso));
    mig_assert_valid(miso, t);
    double rho = p->makespan / p->lower_bound;
    cr_log_info("Rodinia %s: rho %.4f, makespan %.4f s", gpus[g], rho, p->makespan);
    cr_assert_leq(p->lower_bound, p->makespan);
    cr_assert_lt(p->makespan, best->makespan);
    cr_assert_lt(p->makespan, miso->makespan);
    if (g == 0)
      cr_assert_leq(rho, 1.2166, "the authors' code gets 1.2166, we got %.5f", rho);
    else
      cr_assert_leq(rho, 1.10);
    tsr_mig_plan_free(p);
    tsr_mig_plan_free(best);
    tsr_mig_plan_free(miso);
    tsr_mig_tasks_free(t);
  }
}

Test(mig_far_rodinia, effort_never_worse) {
  tsr_mig_model_t m = mig_model("A100");
  tsr_mig_tasks_t *t = rodinia(&m);
  tsr_mig_plan_t *p, *q;
  cr_assert_null(tsr_mig_far_plan(&m, t, NULL, &p));
  tsr_mig_far_options_t fo = {.effort_s = 0.005, .seed = 7};
  cr_assert_null(tsr_mig_far_plan(&m, t, &fo, &q));
  mig_assert_valid(q, t);
  cr_assert_leq(q->makespan, p->makespan + 1e-9);
  tsr_mig_plan_free(p);
  tsr_mig_plan_free(q);
  tsr_mig_tasks_free(t);
}

Test(mig_far_multi, rodinia_twice) {
  tsr_mig_model_t m = mig_model("A100");
  tsr_mig_tasks_t *t = rodinia(&m);
  double ms[3];
  for (int mode = 0; mode < 3; mode++) {
    tsr_mig_multi_t *mb;
    cr_assert_null(tsr_mig_multi_create(&m, (tsr_mig_concat_t)mode, NULL, &mb));
    for (int k = 0; k < 3; k++) cr_assert_null(tsr_mig_multi_add(mb, t, NULL, NULL));
    tsr_mig_plan_t *p;
    tsr_mig_tasks_t *all;
    cr_assert_null(tsr_mig_multi_result(mb, &p, &all));
    mig_assert_valid(p, all);
    cr_assert_eq(all->n, 48);
    cr_assert_eq(p->nbatches, 3);
    cr_assert_leq(p->lower_bound, p->makespan);
    ms[mode] = p->makespan;
    tsr_mig_plan_free(p);
    tsr_mig_tasks_free(all);
    tsr_mig_multi_free(mb);
  }
  cr_log_info("3 x Rodinia: trivial %.3f reverse %.3f moves %.3f", ms[0], ms[1], ms[2]);
  cr_assert_lt(ms[1], ms[0], "overlapping beats starting after the last task");
  tsr_mig_tasks_free(t);
}

Test(mig_far_multi, refused_batch_changes_nothing) {
  tsr_mig_model_t m = mig_model("A30");
  tsr_mig_tasks_t *good, *bad;
  cr_assert_null(tsr_mig_tasks_create(&m, 3, &good));
  for (int i = 0; i < 3; i++) cr_assert_null(tsr_mig_tasks_set_time(good, i, 2, 1.0 + i));
  cr_assert_null(tsr_mig_tasks_create(&m, 2, &bad));
  cr_assert_null(tsr_mig_tasks_set_time(bad, 0, 1, 1.0)); /* task 1 can run nowhere */
  tsr_mig_multi_t *mb;
  cr_assert_null(tsr_mig_multi_create(&m, TSR_MIG_CONCAT_REVERSE_MOVES, NULL, &mb));
  cr_assert_null(tsr_mig_multi_add(mb, good, NULL, NULL));
  tsr_status_t st = tsr_mig_multi_add(mb, bad, NULL, NULL);
  cr_assert_eq(tsr_status_code(st), TSR_INVALID_ARGUMENT);
  cr_assert(strstr(tsr_status_message(st), "'t1' can run on no instance size"), "%s", tsr_status_message(st));
  tsr_status_free(st);
  cr_assert_null(tsr_mig_multi_add(mb, good, NULL, NULL));
  tsr_mig_plan_t *p;
  tsr_mig_tasks_t *all;
  cr_assert_null(tsr_mig_multi_result(mb, &p, &all));
  cr_assert_eq(all->n, 6, "the refused batch's tasks stayed: %d tasks", all->n);
  cr_assert_eq(p->nbatches, 2);
  mig_assert_valid(p, all);
  tsr_mig_plan_free(p);
  tsr_mig_tasks_free(all);
  tsr_mig_multi_free(mb);
  tsr_mig_tasks_free(good);
  tsr_mig_tasks_free(bad);
}

Test(mig_exec, dry_run) {
  tsr_mig_model_t m = mig_model("A30");
  const char *path = mig_tmp_csv(
      "name,1,2,4,command\n"
      "big,,,2,true\n"
      "a,,3,,\n"
      "b,,3,,exit 0\n");
  tsr_mig_tasks_t *t;
  cr_assert_null(tsr_mig_tasks_load_csv(&m, path, &t));
  unlink(path);
  tsr_mig_plan_t *p;
  cr_assert_null(tsr_mig_far_plan(&m, t, NULL, &p));
  mig_assert_valid(p, t);
  tsr_mig_exec_report_t rep[3];
  tsr_mig_exec_options_t eo = {.backend = TSR_MIG_BACKEND_DRY_RUN, .time_scale = 0.01};
  tsr_status_t st = tsr_mig_exec(p, t, &eo, rep);
  cr_assert_null(st, "%s", tsr_status_message(st));
  for (int i = 0; i < 3; i++) cr_assert_eq(rep[i].exit_status, 0);
  /* the 2-slice tasks wait for the whole-GPU task and the repartitioning */
  cr_assert_geq(rep[1].start, rep[0].end);
  cr_assert_geq(rep[2].start, rep[0].end);
  /* a failing command fails the run */
  cr_assert_null(tsr_mig_tasks_set_command(t, 2, "exit 3"));
  st = tsr_mig_exec(p, t, &eo, rep);
  cr_assert_not_null(st);
  cr_assert_eq(rep[2].exit_status, 3);
  tsr_status_free(st);
  tsr_mig_plan_free(p);
  tsr_mig_tasks_free(t);
}
