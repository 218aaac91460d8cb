/* Many random batches: every plan valid, FAR never worse than its own phase
 * 2, the lower bound never above a makespan, generator reproducible. */
#include "common.h"
#include "mig/internal.h"

static const char *gpus[] = {"A30", "A100", "H100"};
static const char *scalings[] = {"poor", "mixed", "good"};
static const char *timess[] = {"wide", "narrow"};

Test(mig_random, synthetic_batches_valid) {
  int checked = 0;
  for (int g = 0; g < 3; g++) {
    tsr_mig_model_t m = mig_model(gpus[g]);
    for (int r = 0; r < 60; r++) {
      tsr_mig_gen_t gen;
      cr_assert_null(tsr_mig_gen_preset(&m, scalings[r % 3], timess[(r / 3) % 2], &gen));
      int n = 1 + (r * 7) % 40;
      tsr_mig_tasks_t *t;
      cr_assert_null(tsr_mig_generate(&m, &gen, n, 1000 + (uint64_t)r, &t));
      tsr_mig_plan_t *far, *p2, *best, *miso;
      cr_assert_null(tsr_mig_far_plan(&m, t, NULL, &far));
      tsr_mig_far_options_t nr = {.no_refine = true};
      cr_assert_null(tsr_mig_far_plan(&m, t, &nr, &p2));
      cr_assert_null(tsr_mig_fixpart_best_plan(&m, t, &best));
      cr_assert_null(tsr_mig_miso_plan(&m, t, &miso));
      tsr_mig_plan_t *all[] = {far, p2, best, miso};
      for (int q = 0; q < 4; q++) {
        mig_assert_valid(all[q], t);
        cr_assert_leq(all[q]->lower_bound, all[q]->makespan + 1e-9);
      }
      cr_assert_leq(far->makespan, far->phase2_makespan + 1e-9);
      /* without refinement FAR keeps the tie rule of the better phase 2; with
       * it, the rule of the better final plan, whose phase 2 is no better */
      cr_assert_leq(p2->makespan, far->phase2_makespan + 1e-9);
      tsr_mig_plan_free(far);
      tsr_mig_plan_free(p2);
      tsr_mig_plan_free(best);
      tsr_mig_plan_free(miso);
      tsr_mig_tasks_free(t);
      checked++;
    }
  }
  cr_assert_eq(checked, 180);
}

/* Random times with holes (sizes a task cannot run on), odd scalings. */
Test(mig_random, arbitrary_times_valid) {
  uint64_t rng = 42;
  for (int r = 0; r < 150; r++) {
    tsr_mig_model_t m = mig_model(gpus[r % 3]);
    int n = 1 + (int)(tsr__rand_next(&rng) % 25);
    tsr_mig_tasks_t *t;
    cr_assert_null(tsr_mig_tasks_create(&m, n, &t));
    for (int i = 0; i < n; i++) {
      bool any = false;
      for (int k = 0; k < m.nsizes; k++) {
        if (tsr__rand_next(&rng) % 4 == 0 && (any || k + 1 < m.nsizes)) continue;
        double v = (tsr__rand_next(&rng) % 5 == 0) ? 0.0 : 0.01 + 50 * tsr__rand_unit(&rng);
        cr_assert_null(tsr_mig_tasks_set_time(t, i, m.sizes[k], v));
        any = true;
      }
    }
    tsr_mig_plan_t *far, *miso;
    cr_assert_null(tsr_mig_far_plan(&m, t, NULL, &far));
    mig_assert_valid(far, t);
    cr_assert_leq(far->makespan, far->phase2_makespan + 1e-9);
    cr_assert_leq(far->lower_bound, far->makespan + 1e-9);
    tsr_status_t st = tsr_mig_miso_plan(&m, t, &miso);
    if (!st) {
      mig_assert_valid(miso, t);
      tsr_mig_plan_free(miso);
    } else {
      tsr_status_free(st);
    }
    tsr_mig_plan_free(far);
    tsr_mig_tasks_free(t);
  }
}

Test(mig_random, multi_batch_valid) {
  for (int g = 0; g < 3; g++) {
    tsr_mig_model_t m = mig_model(gpus[g]);
    for (int mode = 0; mode < 3; mode++) {
      tsr_mig_multi_t *mb;
      cr_assert_null(tsr_mig_multi_create(&m, (tsr_mig_concat_t)mode, NULL, &mb));
      for (int k = 0; k < 12; k++) {
        tsr_mig_gen_t gen;
        cr_assert_null(tsr_mig_gen_preset(&m, scalings[k % 3], timess[k % 2], &gen));
        tsr_mig_tasks_t *t;
        cr_assert_null(tsr_mig_generate(&m, &gen, 3 + k % 11, (uint64_t)(7 * k + g), &t));
        cr_assert_null(tsr_mig_multi_add(mb, t, NULL, NULL));
        tsr_mig_tasks_free(t);
      }
      tsr_mig_plan_t *p;
      tsr_mig_tasks_t *all;
      cr_assert_null(tsr_mig_multi_result(mb, &p, &all));
      mig_assert_valid(p, all);
      cr_assert_leq(p->lower_bound, p->makespan);
      cr_assert_float_eq(p->makespan, tsr_mig_multi_makespan(mb), 1e-6);
      tsr_mig_plan_free(p);
      tsr_mig_tasks_free(all);
      tsr_mig_multi_free(mb);
    }
  }
}

Test(mig_random, generator_reproducible_and_shaped) {
  tsr_mig_model_t m = mig_model("A100");
  tsr_mig_gen_t gen;
  cr_assert_null(tsr_mig_gen_preset(&m, "good", "narrow", &gen));
  tsr_mig_tasks_t *a, *b, *c;
  cr_assert_null(tsr_mig_generate(&m, &gen, 30, 5, &a));
  cr_assert_null(tsr_mig_generate(&m, &gen, 30, 5, &b));
  cr_assert_null(tsr_mig_generate(&m, &gen, 30, 6, &c));
  cr_assert_eq(memcmp(a->times, b->times, sizeof(double) * 30 * 5), 0);
  cr_assert_neq(memcmp(a->times, c->times, sizeof(double) * 30 * 5), 0);
  for (int i = 0; i < 30; i++) {
    double t1 = tsr_mig_tasks_time(a, i, 0);
    cr_assert(t1 >= 90 && t1 <= 100);
    for (int k = 1; k < 5; k++) /* times never grow with more slices */
      cr_assert_leq(tsr_mig_tasks_time(a, i, k), tsr_mig_tasks_time(a, i, k - 1));
  }
  tsr_mig_tasks_free(a);
  tsr_mig_tasks_free(b);
  tsr_mig_tasks_free(c);
}

/* Phase 1's tie rule: with both rules FAR keeps the better of the two
 * plans, so it is never worse than either rule alone, and it equals the
 * better one; on some batches the two rules differ (else this proves
 * nothing). Poor-scaling batches tie often (a clipped factor). */
Test(mig_random, both_tie_rules_keep_the_better_plan) {
  tsr_mig_model_t m = mig_model("A100");
  int differ = 0, larger_better = 0, smaller_better = 0;
  for (int r = 0; r < 120; r++) {
    tsr_mig_gen_t gen;
    cr_assert_null(tsr_mig_gen_preset(&m, scalings[r % 3], "wide", &gen));
    tsr_mig_tasks_t *t;
    cr_assert_null(tsr_mig_generate(&m, &gen, 10 + r % 26, 7000 + (uint64_t)r, &t));
    tsr_mig_plan_t *both, *small, *large;
    tsr_mig_far_options_t ob = {0}, os = {.tie = TSR_MIG_TIE_SMALLER}, ol = {.tie = TSR_MIG_TIE_LARGER};
    cr_assert_null(tsr_mig_far_plan(&m, t, &ob, &both));
    cr_assert_null(tsr_mig_far_plan(&m, t, &os, &small));
    cr_assert_null(tsr_mig_far_plan(&m, t, &ol, &large));
    mig_assert_valid(both, t);
    mig_assert_valid(large, t);
    double best = small->makespan < large->makespan ? small->makespan : large->makespan;
    cr_assert_float_eq(both->makespan, best, 1e-9, "batch %d: both rules %.6f, smaller %.6f, larger %.6f", r,
                       both->makespan, small->makespan, large->makespan);
    if (fabs(small->makespan - large->makespan) > 1e-9) differ++;
    if (large->makespan < small->makespan - 1e-9) larger_better++;
    if (small->makespan < large->makespan - 1e-9) smaller_better++;
    tsr_mig_plan_free(both);
    tsr_mig_plan_free(small);
    tsr_mig_plan_free(large);
    tsr_mig_tasks_free(t);
  }
  cr_assert_gt(larger_better, 0, "no batch where the larger size's rule wins: the test proves nothing");
  cr_assert_gt(smaller_better, 0, "no batch where the smaller size's rule wins");
  cr_log_info("the rules' plans differ on %d of 120 batches", differ);
}

/* The --effort search counts steps, not seconds: the same tasks, seed and
 * budget give the same plan, however busy the machine; a duration alone is
 * converted at the reference rate. */
Test(mig_random, effort_is_a_budget_of_steps) {
  cr_assert_eq(tsr_mig_effort_steps(0, 0), 0);
  cr_assert_eq(tsr_mig_effort_steps(0.1, 0), (uint64_t)(0.1 * TSR_MIG_EFFORT_STEPS_PER_S + 0.5));
  cr_assert_eq(tsr_mig_effort_steps(0.1, 7), 7, "steps given win");
  cr_assert_eq(tsr_mig_effort_steps(1e-9, 0), 1, "any duration is at least a step");
  for (uint64_t k = 1; k < 2000; k++) /* a duration made from k steps is k steps */
    cr_assert_eq(tsr_mig_effort_steps((double)k / TSR_MIG_EFFORT_STEPS_PER_S, 0), k, "%llu steps",
                 (unsigned long long)k);
  tsr_mig_model_t m = mig_model("A100");
  for (int r = 0; r < 8; r++) {
    tsr_mig_gen_t gen;
    cr_assert_null(tsr_mig_gen_preset(&m, scalings[r % 3], "wide", &gen));
    tsr_mig_tasks_t *t;
    cr_assert_null(tsr_mig_generate(&m, &gen, 20 + r * 2, 500 + (uint64_t)r, &t));
    tsr_mig_far_options_t steps = {.effort_steps = 150, .seed = 3},
                          secs = {.effort_s = 150 / TSR_MIG_EFFORT_STEPS_PER_S, .seed = 3};
    tsr_mig_plan_t *plain, *a, *b, *c;
    cr_assert_null(tsr_mig_far_plan(&m, t, NULL, &plain));
    cr_assert_null(tsr_mig_far_plan(&m, t, &steps, &a));
    cr_assert_null(tsr_mig_far_plan(&m, t, &steps, &b));
    cr_assert_null(tsr_mig_far_plan(&m, t, &secs, &c));
    mig_assert_valid(a, t);
    cr_assert_leq(a->makespan, plain->makespan + 1e-9, "the search made batch %d worse", r);
    for (int i = 0; i < t->n; i++) {
      cr_assert_eq(a->placements[i].instance, b->placements[i].instance, "batch %d task %d", r, i);
      cr_assert_eq(a->placements[i].instance, c->placements[i].instance, "a duration is its steps: batch %d task %d", r,
                   i);
    }
    cr_assert_eq(a->makespan, b->makespan);
    cr_assert_eq(a->makespan, c->makespan);
    tsr_mig_plan_free(plain);
    tsr_mig_plan_free(a);
    tsr_mig_plan_free(b);
    tsr_mig_plan_free(c);
    tsr_mig_tasks_free(t);
  }
}

/* Phase 2 takes siblings that free together in both orders: FAR is never
 * worse than with one order (the best final plan is kept), and on some
 * batches better (else the second order would be dead weight). */
Test(mig_random, both_sibling_orders_never_worse) {
  int better = 0;
  for (int g = 0; g < 2; g++) {
    tsr_mig_model_t m = mig_model(gpus[g]);
    for (int r = 0; r < 60; r++) {
      tsr_mig_gen_t gen;
      cr_assert_null(tsr_mig_gen_preset(&m, scalings[r % 3], "wide", &gen));
      tsr_mig_tasks_t *t;
      cr_assert_null(tsr_mig_generate(&m, &gen, 10 + r % 26, 300 + (uint64_t)r, &t));
      tsr_mig_far_options_t one = {.one_sibling_order = true};
      tsr_mig_plan_t *p1, *p2;
      cr_assert_null(tsr_mig_far_plan(&m, t, &one, &p1));
      cr_assert_null(tsr_mig_far_plan(&m, t, NULL, &p2));
      mig_assert_valid(p2, t);
      cr_assert_leq(p2->makespan, p1->makespan + 1e-9, "%s batch %d: %.6f with both orders, %.6f with one", gpus[g], r,
                    p2->makespan, p1->makespan);
      if (p2->makespan < p1->makespan - 1e-9) better++;
      tsr_mig_plan_free(p1);
      tsr_mig_plan_free(p2);
      tsr_mig_tasks_free(t);
    }
  }
  cr_assert_gt(better, 0, "the second order never helped: the test proves nothing");
}

Test(mig_random, a_model_without_sizes_is_refused) {
  tsr_mig_model_t m = mig_model("A30");
  tsr_mig_gen_t gen;
  cr_assert_null(tsr_mig_gen_preset(&m, "mixed", "wide", &gen));
  int bad[] = {0, -1, TSR_MIG_MAX_SIZES + 1};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    m.nsizes = bad[i];
    tsr_mig_tasks_t *t = (tsr_mig_tasks_t *)&m; /* overwritten with NULL */
    tsr_status_t st = tsr_mig_generate(&m, &gen, 5, 1, &t);
    cr_assert_eq(tsr_status_code(st), TSR_INVALID_ARGUMENT, "nsizes %d: %s", bad[i], tsr_status_message(st));
    cr_assert_null(t);
    tsr_status_free(st);
  }
}
