/* cli/mig_plan.c: `tessera mig plan` (one batch, FAR or a baseline) and
 * `tessera mig compare` (FAR beside every baseline). */
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "cli/cli.h"
#include "cli/mig.h"
#include "base/json.h"

/* ---- plan --------------------------------------------------------------- */

static const char tsr__plan_help[] =
    "usage: tessera mig plan [options] TASKS.csv\n"
    "\n"
    "Plans one batch of tasks on a MIG GPU and prints the plan. TASKS.csv is either\n"
    "wide (name,1,2,3,4,7[,command]: seconds per instance size, empty = cannot run)\n"
    "or long (gpu,kernel,slices,seconds, e.g. data/far/rodinia_times_mean.csv).\n"
    "\n"
    "options:\n"
    "  --algorithm A          far (default), fixpart:4,2,1 (any valid partition),\n"
    "                         fixpartbest, miso\n"
    "  --effort DURATION      FAR: a stronger search of DURATION's worth of steps on\n"
    "                         the reference machine (10ms, 2s): the same plan on\n"
    "                         every machine\n"
    "  --effort-steps N       FAR: a stronger search of N steps (one refinement each);\n"
    "                         with --effort too, it also stops after DURATION of this\n"
    "                         machine's clock (then the plan may vary)\n"
    "  --tie RULE             FAR: on sizes of equal area s x t(s) in phase 1, try\n"
    "                         both (default) and keep the better plan, or only the\n"
    "                         smaller or the larger size (the authors' rule)\n"
    "  --no-refine            FAR: skip phase 3 (moves and swaps)\n"
    "  --max-iterations N     FAR: cap on refinement iterations (default 1000)\n"
    "  --seed N               seed of the --effort search (default 0)\n" TSR_CLI_MIG_COMMON_HELP;

static const tsr_cli_mig_cmd_t tsr__plan_cmd = {"plan", tsr__plan_help, "TASKS.csv"};

TSR_MUST_USE static tsr_status_t tsr__run_algorithm(const tsr_mig_model_t *m, const tsr_mig_tasks_t *t,
                                                    const char *algo, const tsr_mig_far_options_t *fo,
                                                    tsr_mig_plan_t **out_plan) {
  if (!algo || !strcasecmp(algo, "far")) return tsr_mig_far_plan(m, t, fo, out_plan);
  if (!strcasecmp(algo, "fixpartbest")) return tsr_mig_fixpart_best_plan(m, t, out_plan);
  if (!strcasecmp(algo, "miso") || !strcasecmp(algo, "miso-opt")) return tsr_mig_miso_plan(m, t, out_plan);
  if (!strncasecmp(algo, "fixpart:", 8)) {
    uint32_t set;
    TSR_RETURN_IF_ERROR(tsr_mig_model_parse_partition(m, algo + 8, &set));
    return tsr_mig_fixpart_plan(m, t, set, out_plan);
  }
  return tsr_status_make(TSR_INVALID_ARGUMENT, "unknown algorithm '%s' (far, fixpart:SIZES, fixpartbest, miso)", algo);
}

int tsr_cli_mig_plan(int argc, char **argv) {
  tsr_cli_mig_common_t cm = {0};
  const char *algo = NULL;
  double effort_s = 0;
  bool no_refine = false;
  uint64_t max_iterations = 0, seed = 0, effort_steps = 0;
  int tie = 0;
  static const char *const ties[] = {"both", "smaller", "larger", NULL};
  const tsr_cli_mig_opt_t opts[] = {
      {"algorithm", 0, TSR_CLI_MIG_STRING, &algo, 0, 0, NULL},
      {"effort", 0, TSR_CLI_MIG_DURATION, &effort_s, 0, 0, NULL},
      {"effort-steps", 0, TSR_CLI_MIG_COUNT, &effort_steps, 1, UINT64_C(1000000000000), NULL},
      {"tie", 0, TSR_CLI_MIG_CHOICE, &tie, 0, 0, ties},
      {"no-refine", 0, TSR_CLI_MIG_FLAG, &no_refine, 0, 0, NULL},
      {"max-iterations", 0, TSR_CLI_MIG_COUNT, &max_iterations, 1, 1000000000, NULL},
      {"seed", 0, TSR_CLI_MIG_COUNT, &seed, 0, UINT64_MAX, NULL},
      {NULL},
  };
  int first, rc;
  if (!tsr_cli_mig_parse(&tsr__plan_cmd, argc, argv, opts, &cm, &first, &rc)) return rc;
  tsr_mig_far_options_t fo = {.tie = (tsr_mig_tie_t)tie,
                              .no_refine = no_refine,
                              .max_iterations = (int)max_iterations,
                              .effort_s = effort_s,
                              .effort_steps = effort_steps,
                              .seed = seed};
  tsr_mig_model_t m;
  tsr_status_t st = tsr_cli_mig_model(&cm, &m);
  if (st) return tsr_cli_fail(st);
  tsr_mig_tasks_t *t;
  if ((st = tsr_mig_tasks_load_csv(&m, argv[first], &t))) return tsr_cli_fail(st);
  tsr_mig_plan_t *p;
  if ((st = tsr__run_algorithm(&m, t, algo, &fo, &p))) {
    tsr_mig_tasks_free(t);
    return tsr_cli_fail(st);
  }
  rc = tsr_cli_mig_check(p, t);
  if (rc == TSR_EXIT_OK) rc = tsr_cli_mig_emit(&cm, p, t);
  tsr_mig_plan_free(p);
  tsr_mig_tasks_free(t);
  return rc;
}

/* ---- compare ------------------------------------------------------------ */

static const char tsr__compare_help[] =
    "usage: tessera mig compare [options] TASKS.csv\n"
    "\n"
    "Plans TASKS.csv with FAR and with every baseline: MISO-opt, FixPart(1,...,1),\n"
    "FixPartBest, FixPart(whole GPU) and FixPart(P) for every valid partition P.\n"
    "Prints makespan, rho = makespan / lower bound and sigma = makespan / FAR's.\n"
    "--svg draws FAR's plan.\n"
    "\n"
    "options:\n"
    "  --effort DURATION      also run FAR with a stronger search of about that long\n"
    "                         (10ms, 2s)\n" TSR_CLI_MIG_COMMON_HELP;

static const tsr_cli_mig_cmd_t tsr__compare_cmd = {"compare", tsr__compare_help, "TASKS.csv"};

enum { TSR__MAX_PARTITIONS = 64, TSR__MAX_PLANS = TSR__MAX_PARTITIONS + 4 };

/* The plans compared, FAR's first, and how long each took to make. */
typedef struct {
  tsr_mig_plan_t *plans[TSR__MAX_PLANS];
  double plan_ms[TSR__MAX_PLANS];
  int n;
} tsr__compared_t;

static double tsr__ms_since(const struct timespec *t0) {
  struct timespec t1;
  clock_gettime(CLOCK_MONOTONIC, &t1);
  return (double)(t1.tv_sec - t0->tv_sec) * 1e3 + (double)(t1.tv_nsec - t0->tv_nsec) / 1e6;
}

/* Plans with FAR, FAR+effort (when asked), MISO-opt, FixPartBest, then every
 * FixPart that can run the tasks; each plan is validated. */
static int tsr__compare_all(const tsr_mig_model_t *m, const tsr_mig_tasks_t *t, double effort_s, tsr__compared_t *out) {
  uint32_t sets[TSR__MAX_PARTITIONS];
  int nsets = tsr_mig_model_partitions(m, sets, TSR__MAX_PARTITIONS);
  if (nsets > TSR__MAX_PARTITIONS) nsets = TSR__MAX_PARTITIONS;
  for (int a = 0; a < 4 + nsets; a++) {
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    tsr_mig_plan_t *p = NULL;
    tsr_status_t st;
    if (a == 0) {
      st = tsr_mig_far_plan(m, t, NULL, &p);
    } else if (a == 1) {
      if (effort_s <= 0) continue;
      tsr_mig_far_options_t fo = {.effort_s = effort_s};
      st = tsr_mig_far_plan(m, t, &fo, &p);
    } else if (a == 2) {
      st = tsr_mig_miso_plan(m, t, &p);
    } else if (a == 3) {
      st = tsr_mig_fixpart_best_plan(m, t, &p);
    } else {
      st = tsr_mig_fixpart_plan(m, t, sets[a - 4], &p);
      if (tsr_status_code(st) == TSR_FAILED_PRECONDITION) { /* a task fits none of P */
        tsr_status_free(st);
        continue;
      }
    }
    if (st) return tsr_cli_fail(st);
    double ms = tsr__ms_since(&t0);
    int rc = tsr_cli_mig_check(p, t);
    if (rc) {
      tsr_mig_plan_free(p);
      return rc;
    }
    out->plan_ms[out->n] = ms;
    out->plans[out->n++] = p;
  }
  return TSR_EXIT_OK;
}

static void tsr__compare_json(const tsr_mig_model_t *m, const tsr_mig_tasks_t *t, const tsr__compared_t *c,
                              tsr_json_writer_t *w) {
  double far = c->plans[0]->makespan;
  tsr_json_object_begin(w);
  tsr_json_key_string(w, "gpu", m->name);
  tsr_json_key_i64(w, "tasks", t->n);
  tsr_json_key_double(w, "lower_bound_s", c->plans[0]->lower_bound);
  tsr_json_key(w, "results");
  tsr_json_array_begin(w);
  for (int q = 0; q < c->n; q++) {
    const tsr_mig_plan_t *p = c->plans[q];
    tsr_json_object_begin(w);
    tsr_json_key_string(w, "algorithm", p->algorithm);
    tsr_json_key_double(w, "makespan_s", p->makespan);
    tsr_json_key_double(w, "rho", p->makespan / p->lower_bound);
    tsr_json_key_double(w, "sigma", p->makespan / far);
    tsr_json_key_double(w, "plan_ms", c->plan_ms[q]);
    tsr_json_object_end(w);
  }
  tsr_json_array_end(w);
  tsr_json_object_end(w);
}

TSR_MUST_USE static tsr_status_t tsr__compare_text(const tsr_mig_model_t *m, const tsr_mig_tasks_t *t,
                                                   const tsr__compared_t *c, FILE *out) {
  double far = c->plans[0]->makespan;
  fprintf(out, "%d tasks on %s, lower bound %.3f s\n\n", t->n, m->name, c->plans[0]->lower_bound);
  fprintf(out, "%-36s %12s %8s %8s %10s\n", "algorithm", "makespan_s", "rho", "sigma", "plan_ms");
  for (int q = 0; q < c->n; q++) {
    const tsr_mig_plan_t *p = c->plans[q];
    fprintf(out, "%-36s %12.3f %8.4f %8.3f %10.3f\n", p->algorithm, p->makespan, p->makespan / p->lower_bound,
            p->makespan / far, c->plan_ms[q]);
  }
  fputs("\nsigma = makespan / FAR's makespan; FixPart and MISO-opt pay no reconfiguration.\n", out);
  return ferror(out) ? tsr_status_make(TSR_IO_ERROR, "write failed") : NULL;
}

int tsr_cli_mig_compare(int argc, char **argv) {
  tsr_cli_mig_common_t cm = {0};
  double effort_s = 0;
  const tsr_cli_mig_opt_t opts[] = {
      {"effort", 0, TSR_CLI_MIG_DURATION, &effort_s, 0, 0, NULL},
      {NULL},
  };
  int first, rc;
  if (!tsr_cli_mig_parse(&tsr__compare_cmd, argc, argv, opts, &cm, &first, &rc)) return rc;
  tsr_mig_model_t m;
  tsr_status_t st = tsr_cli_mig_model(&cm, &m);
  if (st) return tsr_cli_fail(st);
  tsr_mig_tasks_t *t;
  if ((st = tsr_mig_tasks_load_csv(&m, argv[first], &t))) return tsr_cli_fail(st);
  tsr__compared_t c = {0};
  rc = tsr__compare_all(&m, t, effort_s, &c);
  if (rc == TSR_EXIT_OK && c.n == 0) { /* FAR's plan comes first, or tsr__compare_all fails */
    tsr_cli_error("no plan was made");
    rc = TSR_EXIT_INTERNAL;
  }
  if (rc == TSR_EXIT_OK && cm.json) {
    tsr_json_writer_t w = {0};
    tsr__compare_json(&m, t, &c, &w);
    rc = tsr_cli_mig_print_json(&cm, &w);
    tsr_json_writer_free(&w);
  } else if (rc == TSR_EXIT_OK) {
    FILE *out;
    if ((rc = tsr_cli_mig_out_open(&cm, &out)) == TSR_EXIT_OK) {
      rc = tsr_cli_mig_out_close(&cm, out, tsr__compare_text(&m, t, &c, out));
    }
  }
  if (rc == TSR_EXIT_OK && cm.svg) rc = tsr_cli_mig_write_svg(cm.svg, c.plans[0], t);
  for (int q = 0; q < c.n; q++) tsr_mig_plan_free(c.plans[q]);
  tsr_mig_tasks_free(t);
  return rc;
}
