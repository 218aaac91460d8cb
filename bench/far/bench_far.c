/* bench/far: reproduces the FAR paper's Tables 4-9 with our generator and
 * planner, printing the paper's figure beside ours, plus Rodinia rho, planning
 * times from n = 35 to 1000 and the --effort search.
 *
 *   bench_far [--reps N] [--effort-reps N] [--effort DURATION] [--data DIR]
 *             [--only rodinia|4|5|6|7|9|growth|rules]
 *
 * Output is Markdown (bench/results/far-*.md keep runs). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/units.h"
#include "bench_record.h"
#include "mig/mig.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void die(tsr_status_t st) {
  fprintf(stderr, "bench_far: %s\n", tsr_status_message(st));
  exit(1);
}
#define CHECK(x)            \
  do {                      \
    tsr_status_t st_ = (x); \
    if (st_) die(st_);      \
  } while (0)

static void valid(const tsr_mig_plan_t *p, const tsr_mig_tasks_t *t) { CHECK(tsr_mig_plan_validate(p, t)); }

static int reps = 1000, effort_reps = 50;
static double effort_ms = 10;
static tsr_mig_model_t a100;

static const char *scal[] = {"poor", "mixed", "good"};
static const char *scal_name[] = {"PoorScaling", "MixedScaling", "GoodScaling"};
static const char *tim[] = {"narrow", "wide"};
static const char *tim_name[] = {"NarrowTimes", "WideTimes"};

static tsr_mig_tasks_t *gen(int s, int tt, int n, uint64_t seed) {
  tsr_mig_gen_t g;
  CHECK(tsr_mig_gen_preset(&a100, scal[s], tim[tt], &g));
  tsr_mig_tasks_t *t;
  CHECK(tsr_mig_generate(&a100, &g, n, seed, &t));
  return t;
}

static void rodinia(const char *dir) {
  char path[8192];
  snprintf(path, sizeof(path), "%s/rodinia_times_mean.csv", dir);
  printf("## Rodinia (16 kernels, measured times from data/far)\n\n");
  printf(
      "| GPU | FAR makespan (s) | lower bound (s) | rho ours | rho paper | plan time median (ms) | "
      "sigma MISO-opt | sigma FixPart(1..1) | sigma FixPartBest | sigma FixPart(whole) |\n");
  printf("|---|---|---|---|---|---|---|---|---|---|\n");
  const char *gpus[] = {"A100", "A30"};
  for (int g = 0; g < 2; g++) {
    tsr_mig_model_t m;
    CHECK(tsr_mig_model_get(gpus[g], &m));
    tsr_mig_tasks_t *t;
    CHECK(tsr_mig_tasks_load_csv(&m, path, &t));
    tsr_mig_plan_t *p = NULL;
    double times[201];
    for (int r = 0; r < 201; r++) {
      tsr_mig_plan_free(p);
      double t0 = now_s();
      CHECK(tsr_mig_far_plan(&m, t, NULL, &p));
      times[r] = (now_s() - t0) * 1e3;
    }
    for (int a = 1; a < 201; a++)
      for (int b = a; b > 0 && times[b] < times[b - 1]; b--) {
        double x = times[b];
        times[b] = times[b - 1];
        times[b - 1] = x;
      }
    valid(p, t);
    tsr_mig_plan_t *miso, *best, *ones, *whole;
    CHECK(tsr_mig_miso_plan(&m, t, &miso));
    CHECK(tsr_mig_fixpart_best_plan(&m, t, &best));
    uint32_t s1, s7;
    CHECK(tsr_mig_model_parse_partition(&m, g == 0 ? "1,1,1,1,1,1,1" : "1,1,1,1", &s1));
    CHECK(tsr_mig_model_parse_partition(&m, g == 0 ? "7" : "4", &s7));
    CHECK(tsr_mig_fixpart_plan(&m, t, s1, &ones));
    CHECK(tsr_mig_fixpart_plan(&m, t, s7, &whole));
    valid(miso, t);
    valid(best, t);
    valid(ones, t);
    valid(whole, t);
    printf("| %s | %.4f | %.4f | %.4f | %s | %.3f | %.2f%s | %.2f%s | %.2f%s (%s) | %.2f%s |\n", gpus[g], p->makespan,
           p->lower_bound, p->makespan / p->lower_bound, g == 0 ? "1.22 (authors' code 1.2166)" : "not given",
           times[100], miso->makespan / p->makespan, g == 0 ? " (paper 2.10)" : "", ones->makespan / p->makespan,
           g == 0 ? " (paper 2.18)" : "", best->makespan / p->makespan, g == 0 ? " (paper 1.16)" : "", best->algorithm,
           whole->makespan / p->makespan, g == 0 ? " (paper 1.26)" : "");
    tsr_bench_record_t *rec = tsr_bench_record_begin("far.rodinia", "%s", gpus[g]);
    tsr_bench_record_figure(rec, p->makespan, "makespan_s");
    tsr_bench_record_figure(rec, p->lower_bound, "lower_bound_s");
    tsr_bench_record_figure(rec, p->makespan / p->lower_bound, "rho");
    tsr_bench_record_figure(rec, times[100], "plan_ms_median");
    tsr_bench_record_figure(rec, miso->makespan / p->makespan, "sigma_miso_opt");
    tsr_bench_record_figure(rec, ones->makespan / p->makespan, "sigma_fixpart_ones");
    tsr_bench_record_figure(rec, best->makespan / p->makespan, "sigma_fixpart_best");
    tsr_bench_record_figure(rec, whole->makespan / p->makespan, "sigma_fixpart_whole");
    tsr_bench_record_end(rec, NULL, NULL);
    tsr_mig_plan_free(p);
    tsr_mig_plan_free(miso);
    tsr_mig_plan_free(best);
    tsr_mig_plan_free(ones);
    tsr_mig_plan_free(whole);
    tsr_mig_tasks_free(t);
  }
  printf("\n");
}

static const double paper4[3][6] = {
    {1.23, 1.08, 1.04, 1.03, 1.02, 1.02}, {1.20, 1.08, 1.04, 1.03, 1.02, 1.02}, {1.21, 1.07, 1.05, 1.03, 1.02, 1.01}};

static void table4(void) {
  int ns[] = {10, 15, 20, 25, 30, 35};
  printf("## Table 4: mean rho, WideTimes, A100, %d batches per cell (paper: 1000)\n\n", reps);
  printf(
      "Cells: ours (paper). Planning time: mean per batch. Effort: FAR with --effort %.0f ms on "
      "the first %d batches of the cell, mean makespan gain over plain FAR on the same batches.\n\n",
      effort_ms, effort_reps);
  printf("| config | n=10 | n=15 | n=20 | n=25 | n=30 | n=35 |\n|---|---|---|---|---|---|---|\n");
  char eff[3][6][64], tim_s[3][6][32];
  for (int s = 0; s < 3; s++) {
    printf("| %s |", scal_name[s]);
    tsr_bench_record_t *rec = tsr_bench_record_begin("far.table4", "%s", scal_name[s]);
    for (int q = 0; q < 6; q++) {
      double sum = 0, tsum = 0, gain = 0;
      int ebetter = 0;
      for (int r = 0; r < reps; r++) {
        tsr_mig_tasks_t *t = gen(s, 1, ns[q], (uint64_t)(r + 1) * 7919 + ns[q]);
        double t0 = now_s();
        tsr_mig_plan_t *p;
        CHECK(tsr_mig_far_plan(&a100, t, NULL, &p));
        tsum += now_s() - t0;
        valid(p, t);
        sum += p->makespan / p->lower_bound;
        if (r < effort_reps) {
          tsr_mig_far_options_t fo = {.effort_s = effort_ms / 1000, .seed = (uint64_t)r + 1};
          tsr_mig_plan_t *e;
          CHECK(tsr_mig_far_plan(&a100, t, &fo, &e));
          valid(e, t);
          gain += (p->makespan / e->makespan - 1) * 100;
          ebetter += e->makespan < p->makespan - 1e-9;
          tsr_mig_plan_free(e);
        }
        tsr_mig_plan_free(p);
        tsr_mig_tasks_free(t);
      }
      printf(" %.3f (%.2f) |", sum / reps, paper4[s][q]);
      fflush(stdout);
      snprintf(eff[s][q], sizeof(eff[s][q]), "+%.2f%% (%d/%d better)", gain / effort_reps, ebetter, effort_reps);
      snprintf(tim_s[s][q], sizeof(tim_s[s][q]), "%.3f", tsum / reps * 1e3);
      tsr_bench_record_figure(rec, sum / reps, "rho_n%d", ns[q]);
      tsr_bench_record_figure(rec, tsum / reps * 1e3, "plan_ms_n%d", ns[q]);
      tsr_bench_record_figure(rec, gain / effort_reps, "effort_gain_pct_n%d", ns[q]);
      tsr_bench_record_figure(rec, ebetter, "effort_better_n%d", ns[q]);
    }
    tsr_bench_record_end(rec, NULL, NULL);
    printf("\n");
  }
  printf("\nPlanning time per batch (ms, mean; paper: 1-2 ms on a Ryzen 5 4600H):\n\n");
  printf("| config | n=10 | n=15 | n=20 | n=25 | n=30 | n=35 |\n|---|---|---|---|---|---|---|\n");
  for (int s = 0; s < 3; s++) {
    printf("| %s |", scal_name[s]);
    for (int q = 0; q < 6; q++) printf(" %s |", tim_s[s][q]);
    printf("\n");
  }
  printf("\n--effort %.0f ms: mean makespan improvement over plain FAR (beyond the paper):\n\n", effort_ms);
  printf("| config | n=10 | n=15 | n=20 | n=25 | n=30 | n=35 |\n|---|---|---|---|---|---|---|\n");
  for (int s = 0; s < 3; s++) {
    printf("| %s |", scal_name[s]);
    for (int q = 0; q < 6; q++) printf(" %s |", eff[s][q]);
    printf("\n");
  }
  printf("\n");
}

static const double paper5[6][4] = {{1.19, 1.25, 1.24, 3.29}, {1.55, 1.29, 1.22, 3.39}, {1.62, 1.39, 1.13, 2.17},
                                    {2.03, 1.47, 1.09, 2.16}, {1.83, 1.61, 1.00, 1.31}, {2.14, 1.78, 1.01, 1.28}};

static void table5(void) {
  printf("## Table 5: mean sigma = baseline makespan / FAR makespan, n=15, A100, %d batches per row\n\n", reps);
  printf("| config | MISO-opt | FixPart(1,...,1) | FixPartBest | FixPart(7) |\n|---|---|---|---|---|\n");
  uint32_t s1, s7;
  CHECK(tsr_mig_model_parse_partition(&a100, "1,1,1,1,1,1,1", &s1));
  CHECK(tsr_mig_model_parse_partition(&a100, "7", &s7));
  for (int s = 0; s < 3; s++)
    for (int tt = 0; tt < 2; tt++) {
      double sum[4] = {0};
      for (int r = 0; r < reps; r++) {
        tsr_mig_tasks_t *t = gen(s, tt, 15, (uint64_t)(r + 1) * 104729 + 15);
        tsr_mig_plan_t *p, *b[4];
        CHECK(tsr_mig_far_plan(&a100, t, NULL, &p));
        CHECK(tsr_mig_miso_plan(&a100, t, &b[0]));
        CHECK(tsr_mig_fixpart_plan(&a100, t, s1, &b[1]));
        CHECK(tsr_mig_fixpart_best_plan(&a100, t, &b[2]));
        CHECK(tsr_mig_fixpart_plan(&a100, t, s7, &b[3]));
        valid(p, t);
        for (int k = 0; k < 4; k++) {
          valid(b[k], t);
          sum[k] += b[k]->makespan / p->makespan;
          tsr_mig_plan_free(b[k]);
        }
        tsr_mig_plan_free(p);
        tsr_mig_tasks_free(t);
      }
      int row = s * 2 + (tt == 0 ? 0 : 1);
      printf("| %s, %s |", scal_name[s], tim_name[tt]);
      for (int k = 0; k < 4; k++) printf(" %.2f (%.2f) |", sum[k] / reps, paper5[row][k]);
      printf("\n");
      static const char *sigma[] = {"sigma_miso_opt", "sigma_fixpart_ones", "sigma_fixpart_best", "sigma_fixpart_7"};
      tsr_bench_record_t *rec = tsr_bench_record_begin("far.table5", "%s, %s", scal_name[s], tim_name[tt]);
      for (int k = 0; k < 4; k++) tsr_bench_record_figure(rec, sum[k] / reps, "%s", sigma[k]);
      tsr_bench_record_end(rec, NULL, NULL);
      fflush(stdout);
    }
  printf("\n");
}

static const double paper6[6][9] = {
    {0.31, 0.00, 0.02, 13.15, 0.00, 3.25, 11.45, 0.00, 4.26}, {0.28, 0.02, 0.01, 14.98, 1.26, 0.13, 8.76, 1.74, 0.15},
    {0.76, 0.02, 0.06, 13.87, 0.00, 3.23, 9.04, 0.00, 4.31},  {3.21, 0.17, 0.06, 11.45, 1.14, 0.09, 9.01, 1.84, 0.15},
    {0.78, 0.01, 0.01, 13.44, 0.00, 3.01, 7.54, 0.00, 3.64},  {1.34, 0.05, 0.02, 12.56, 1.13, 0.08, 9.32, 1.93, 0.21}};

static void table6(void) {
  int ns[] = {10, 20, 30};
  printf(
      "## Table 6: refinement: mean p_ref (%%) = (no-refine / refine - 1) x 100, moves, swaps; A100, %d batches per "
      "cell\n\n",
      reps);
  printf("| config | n=10 p_ref | moves | swaps | n=20 p_ref | moves | swaps | n=30 p_ref | moves | swaps |\n");
  printf("|---|---|---|---|---|---|---|---|---|---|\n");
  for (int s = 0; s < 3; s++)
    for (int tt = 0; tt < 2; tt++) {
      int row = s * 2 + (tt == 0 ? 0 : 1);
      printf("| %s, %s |", scal_name[s], tim_name[tt]);
      tsr_bench_record_t *rec = tsr_bench_record_begin("far.table6", "%s, %s", scal_name[s], tim_name[tt]);
      for (int q = 0; q < 3; q++) {
        double pref = 0, mv = 0, sw = 0;
        for (int r = 0; r < reps; r++) {
          tsr_mig_tasks_t *t = gen(s, tt, ns[q], (uint64_t)(r + 1) * 15485863 + ns[q]);
          tsr_mig_plan_t *p;
          CHECK(tsr_mig_far_plan(&a100, t, NULL, &p));
          valid(p, t);
          pref += (p->phase2_makespan / p->makespan - 1) * 100;
          mv += p->moves;
          sw += p->swaps;
          tsr_mig_plan_free(p);
          tsr_mig_tasks_free(t);
        }
        const double *pp = &paper6[row][q * 3];
        printf(" %.2f (%.2f) | %.2f (%.2f) | %.2f (%.2f) |", pref / reps, pp[0], mv / reps, pp[1], sw / reps, pp[2]);
        tsr_bench_record_figure(rec, pref / reps, "p_ref_pct_n%d", ns[q]);
        tsr_bench_record_figure(rec, mv / reps, "moves_n%d", ns[q]);
        tsr_bench_record_figure(rec, sw / reps, "swaps_n%d", ns[q]);
      }
      tsr_bench_record_end(rec, NULL, NULL);
      printf("\n");
      fflush(stdout);
    }
  printf("\n");
}

static const double paper7[6][6] = {{2.32, 16.19, 2.64, 4.60, 1.03, 1.45}, {3.23, 14.47, 3.82, 4.10, 0.98, 1.01},
                                    {5.43, 16.22, 4.53, 4.82, 0.86, 1.01}, {4.87, 14.30, 2.41, 4.26, 0.44, 0.46},
                                    {3.65, 15.43, 1.05, 3.86, 0.51, 1.01}, {5.54, 13.12, 2.03, 3.76, 0.23, 0.30}};
static const double paper8[6][6] = {{0.48, 9.72, 0.04, 1.32, 0.01, 0.82}, {3.13, 1.21, 0.10, 0.05, 0.03, 0.00},
                                    {0.30, 9.52, 0.02, 1.12, 0.00, 0.62}, {3.51, 1.12, 0.13, 0.06, 0.05, 0.01},
                                    {0.72, 9.62, 0.03, 1.36, 0.01, 0.94}, {3.42, 1.04, 0.15, 0.06, 0.05, 0.01}};

static void tables78(void) {
  int ns[] = {10, 20, 30};
  int pairs = reps;
  char t8[6][3][64];
  printf("## Table 7: concatenation of two FAR batches (B_k, then B_k+1 reversed), A100, %d pairs per cell\n\n", pairs);
  printf(
      "p_rev = (trivial / reversed - 1) x 100, p_move/swap = (trivial / reversed+moves/swaps - 1) x 100; ours "
      "(paper)\n\n");
  printf("| config | n=10 p_rev | p_move/swap | n=20 p_rev | p_move/swap | n=30 p_rev | p_move/swap |\n");
  printf("|---|---|---|---|---|---|---|\n");
  for (int s = 0; s < 3; s++)
    for (int tt = 0; tt < 2; tt++) {
      int row = s * 2 + (tt == 0 ? 0 : 1);
      printf("| %s, %s |", scal_name[s], tim_name[tt]);
      tsr_bench_record_t *rec = tsr_bench_record_begin("far.table7", "%s, %s", scal_name[s], tim_name[tt]);
      for (int q = 0; q < 3; q++) {
        double prev = 0, pms = 0, mv = 0, sw = 0;
        for (int r = 0; r < pairs; r++) {
          tsr_mig_tasks_t *a = gen(s, tt, ns[q], (uint64_t)(r + 1) * 32452843 + ns[q]);
          tsr_mig_tasks_t *b = gen(s, tt, ns[q], (uint64_t)(r + 2) * 32452843 + ns[q]);
          double ms[3];
          for (int mode = 0; mode < 3; mode++) {
            tsr_mig_multi_t *mb;
            CHECK(tsr_mig_multi_create(&a100, (tsr_mig_concat_t)mode, NULL, &mb));
            CHECK(tsr_mig_multi_add(mb, a, NULL, NULL));
            int m1 = 0, s1 = 0;
            CHECK(tsr_mig_multi_add(mb, b, &m1, &s1));
            ms[mode] = tsr_mig_multi_makespan(mb);
            if (mode == 2) {
              mv += m1;
              sw += s1;
              if (r < 50) { /* validate a sample of the joined plans */
                tsr_mig_plan_t *p;
                tsr_mig_tasks_t *all;
                CHECK(tsr_mig_multi_result(mb, &p, &all));
                valid(p, all);
                tsr_mig_plan_free(p);
                tsr_mig_tasks_free(all);
              }
            }
            tsr_mig_multi_free(mb);
          }
          prev += (ms[0] / ms[1] - 1) * 100;
          pms += (ms[0] / ms[2] - 1) * 100;
          tsr_mig_tasks_free(a);
          tsr_mig_tasks_free(b);
        }
        printf(" %.2f (%.2f) | %.2f (%.2f) |", prev / pairs, paper7[row][q * 2], pms / pairs, paper7[row][q * 2 + 1]);
        snprintf(t8[row][q], sizeof(t8[row][q]), " %.2f (%.2f) | %.2f (%.2f) |", mv / pairs, paper8[row][q * 2],
                 sw / pairs, paper8[row][q * 2 + 1]);
        tsr_bench_record_figure(rec, prev / pairs, "p_rev_pct_n%d", ns[q]);
        tsr_bench_record_figure(rec, pms / pairs, "p_move_swap_pct_n%d", ns[q]);
        tsr_bench_record_figure(rec, mv / pairs, "moves_n%d", ns[q]);
        tsr_bench_record_figure(rec, sw / pairs, "swaps_n%d", ns[q]);
      }
      tsr_bench_record_end(rec, NULL, NULL);
      printf("\n");
      fflush(stdout);
    }
  printf("\n## Table 8: mean moves and swaps per concatenation (same runs); ours (paper)\n\n");
  printf("| config | n=10 moves | swaps | n=20 moves | swaps | n=30 moves | swaps |\n|---|---|---|---|---|---|---|\n");
  for (int s = 0; s < 3; s++)
    for (int tt = 0; tt < 2; tt++) {
      int row = s * 2 + (tt == 0 ? 0 : 1);
      printf("| %s, %s |%s%s%s\n", scal_name[s], tim_name[tt], t8[row][0], t8[row][1], t8[row][2]);
    }
  printf("\n");
}

static const double paper9[3][6] = {{84.42, 94.12, 95.21, 95.21, 92.32, 93.21},
                                    {89.56, 94.00, 93.01, 95.01, 90.21, 92.03},
                                    {82.67, 94.53, 94.46, 94.32, 92.32, 91.54}};

static void table9(void) {
  int ns[] = {10, 15, 20, 25, 30, 35};
  int nb = 1001;
  printf(
      "## Table 9: p_multi-batch = (makespan / multi-batch lower bound - 1) x 100, %d batches, WideTimes, A100 "
      "(reversed + moves/swaps)\n\n",
      nb);
  printf("| config | n=10 | n=15 | n=20 | n=25 | n=30 | n=35 |\n|---|---|---|---|---|---|---|\n");
  for (int s = 0; s < 3; s++) {
    printf("| %s |", scal_name[s]);
    tsr_bench_record_t *rec = tsr_bench_record_begin("far.table9", "%s", scal_name[s]);
    for (int q = 0; q < 6; q++) {
      tsr_mig_multi_t *mb;
      CHECK(tsr_mig_multi_create(&a100, TSR_MIG_CONCAT_REVERSE_MOVES, NULL, &mb));
      double bound = 0;
      for (int k = 0; k < nb; k++) {
        tsr_mig_tasks_t *t = gen(s, 1, ns[q], (uint64_t)(k + 1) * 49979687 + ns[q]);
        bound += tsr_mig_lower_bound(&a100, t);
        CHECK(tsr_mig_multi_add(mb, t, NULL, NULL));
        tsr_mig_tasks_free(t);
      }
      tsr_mig_plan_t *p;
      tsr_mig_tasks_t *all;
      CHECK(tsr_mig_multi_result(mb, &p, &all));
      valid(p, all);
      printf(" %.2f (%.2f) |", (p->makespan / bound - 1) * 100, paper9[s][q]);
      fflush(stdout);
      tsr_bench_record_figure(rec, (p->makespan / bound - 1) * 100, "p_multi_pct_n%d", ns[q]);
      tsr_mig_plan_free(p);
      tsr_mig_tasks_free(all);
      tsr_mig_multi_free(mb);
    }
    tsr_bench_record_end(rec, NULL, NULL);
    printf("\n");
  }
  printf("\n");
}

static void growth(void) {
  int ns[] = {35, 100, 200, 500, 1000};
  printf(
      "## Planning time growth, MixedScaling WideTimes, A100 (paper: 12.32 ms at n=100, 532.21 ms at 500, 1620.82 ms "
      "at 1000)\n\n");
  printf("| n | batches | mean (ms) | max (ms) | allocations (mean) | rho (mean) |\n|---|---|---|---|---|---|\n");
  for (int q = 0; q < 5; q++) {
    int r_n = ns[q] <= 100 ? reps : (ns[q] <= 200 ? 100 : 20);
    double sum = 0, mx = 0, al = 0, rho = 0;
    for (int r = 0; r < r_n; r++) {
      tsr_mig_tasks_t *t = gen(1, 1, ns[q], (uint64_t)(r + 1) * 86028121 + ns[q]);
      double t0 = now_s();
      tsr_mig_plan_t *p;
      CHECK(tsr_mig_far_plan(&a100, t, NULL, &p));
      double dt = (now_s() - t0) * 1e3;
      valid(p, t);
      sum += dt;
      if (dt > mx) mx = dt;
      al += p->nallocations;
      rho += p->makespan / p->lower_bound;
      tsr_mig_plan_free(p);
      tsr_mig_tasks_free(t);
    }
    printf("| %d | %d | %.3f | %.3f | %.1f | %.4f |\n", ns[q], r_n, sum / r_n, mx, al / r_n, rho / r_n);
    tsr_bench_record_t *rec = tsr_bench_record_begin("far.growth", "n=%d", ns[q]);
    tsr_bench_record_figure(rec, r_n, "batches");
    tsr_bench_record_figure(rec, sum / r_n, "mean_ms");
    tsr_bench_record_figure(rec, mx, "max_ms");
    tsr_bench_record_figure(rec, al / r_n, "allocations_mean");
    tsr_bench_record_figure(rec, rho / r_n, "rho_mean");
    tsr_bench_record_end(rec, NULL, NULL);
    fflush(stdout);
  }
  printf("\n");
}

/* FAR's phase 1 and 2 changes: FAR as it was (the smaller size on a
 * tie of area, siblings left to right) beside FAR now (both tie rules, both
 * sibling orders, the best final plan), on the same batches. */
static void rules(void) {
  static const char *gpus[] = {"A30", "A100"};
  printf(
      "## Both tie rules and both sibling orders (FAR now) beside one of each (FAR before), 300 batches a cell, n = "
      "10-35, WideTimes\n\n");
  printf(
      "| GPU | scaling | now better | now worse | most better | rho before | rho now | ms a plan before | ms now |\n");
  printf("|---|---|---|---|---|---|---|---|---|\n");
  for (int g = 0; g < 2; g++) {
    tsr_mig_model_t m;
    CHECK(tsr_mig_model_get(gpus[g], &m));
    for (int c = 0; c < 3; c++) {
      int better = 0, worse = 0, N = 300;
      double rho_a = 0, rho_b = 0, most = 0, ms_a = 0, ms_b = 0;
      for (int r = 0; r < N; r++) {
        tsr_mig_gen_t gp;
        CHECK(tsr_mig_gen_preset(&m, scal[c], "wide", &gp));
        tsr_mig_tasks_t *t;
        CHECK(tsr_mig_generate(&m, &gp, 10 + r % 26, 100 + (uint64_t)r, &t));
        tsr_mig_far_options_t before = {.one_sibling_order = true, .tie = TSR_MIG_TIE_SMALLER};
        tsr_mig_plan_t *a, *b;
        double t0 = now_s();
        CHECK(tsr_mig_far_plan(&m, t, &before, &a));
        double t1 = now_s();
        CHECK(tsr_mig_far_plan(&m, t, NULL, &b));
        double t2 = now_s();
        valid(a, t);
        valid(b, t);
        ms_a += (t1 - t0) * 1e3;
        ms_b += (t2 - t1) * 1e3;
        if (b->makespan < a->makespan - 1e-9) better++;
        if (b->makespan > a->makespan + 1e-9) worse++;
        if (1 - b->makespan / a->makespan > most) most = 1 - b->makespan / a->makespan;
        rho_a += a->makespan / a->lower_bound;
        rho_b += b->makespan / b->lower_bound;
        tsr_mig_plan_free(a);
        tsr_mig_plan_free(b);
        tsr_mig_tasks_free(t);
      }
      printf("| %s | %s | %d | %d | %.1f%% | %.4f | %.4f | %.3f | %.3f |\n", gpus[g], scal[c], better, worse,
             100 * most, rho_a / N, rho_b / N, ms_a / N, ms_b / N);
      tsr_bench_record_t *rec = tsr_bench_record_begin("far.rules", "%s, %s", gpus[g], scal[c]);
      tsr_bench_record_figure(rec, better, "now_better");
      tsr_bench_record_figure(rec, worse, "now_worse");
      tsr_bench_record_figure(rec, 100 * most, "most_better_pct");
      tsr_bench_record_figure(rec, rho_a / N, "rho_before");
      tsr_bench_record_figure(rec, rho_b / N, "rho_now");
      tsr_bench_record_figure(rec, ms_a / N, "plan_ms_before");
      tsr_bench_record_figure(rec, ms_b / N, "plan_ms_now");
      tsr_bench_record_end(rec, NULL, NULL);
      fflush(stdout);
    }
  }
  printf("\n");
}

/* A whole number for --reps/--effort-reps, or exit 2. */
static int bench__count(const char *opt, const char *text) {
  uint64_t v = 0;
  tsr_status_t st = tsr_parse_u64(text, &v);
  if (st || v < 1 || v > 1000000) {
    fprintf(stderr, "bench_far: %s wants a whole number from 1 to 1000000, not '%s'\n", opt, text);
    tsr_status_free(st);
    exit(2);
  }
  return (int)v;
}

int main(int argc, char **argv) {
  const char *dir = NULL;
  const char *only = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--reps") && i + 1 < argc) {
      reps = bench__count("--reps", argv[++i]);
    } else if (!strcmp(argv[i], "--effort-reps") && i + 1 < argc) {
      effort_reps = bench__count("--effort-reps", argv[++i]);
    } else if (!strcmp(argv[i], "--effort") && i + 1 < argc) {
      uint64_t ns = 0;
      tsr_status_t st = tsr_parse_duration(argv[++i], &ns);
      if (st) {
        fprintf(stderr, "bench_far: --effort: %s\n", tsr_status_message(st));
        tsr_status_free(st);
        return 2;
      }
      effort_ms = (double)ns / 1e6;
    } else if (!strcmp(argv[i], "--data") && i + 1 < argc) {
      dir = argv[++i];
    } else if (!strcmp(argv[i], "--only") && i + 1 < argc) {
      only = argv[++i];
    } else {
      fprintf(stderr,
              "usage: bench_far [--reps N] [--effort-reps N] [--effort DURATION] [--data DIR] "
              "[--only rodinia|4|5|6|7|9|growth|rules]\n");
      return 2;
    }
  }
  if (reps < 1) reps = 1;
  if (effort_reps > reps) effort_reps = reps;
  static char buf[4096];
  if (!dir) {
    const char *src = getenv("TESSERA_SOURCE_DIR");
    snprintf(buf, sizeof(buf), "%s/data/far", src ? src : ".");
    dir = buf;
  }
  CHECK(tsr_mig_model_get("A100", &a100));
  printf("# FAR benchmark (bench/far), paper figures in parentheses\n\n");
  double t0 = now_s();
  if (!only || !strcmp(only, "rodinia")) rodinia(dir);
  if (!only || !strcmp(only, "4")) table4();
  if (!only || !strcmp(only, "5")) table5();
  if (!only || !strcmp(only, "6")) table6();
  if (!only || !strcmp(only, "7")) tables78();
  if (!only || !strcmp(only, "9")) table9();
  if (!only || !strcmp(only, "growth")) growth();
  if (!only || !strcmp(only, "rules")) rules();
  printf(
      "Every plan measured above passed tsr_mig_plan_validate() (Table 7: the first 50 joined "
      "plans of each cell). Total bench time %.1f s.\n",
      now_s() - t0);
  return 0;
}
