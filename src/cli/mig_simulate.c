/* cli/mig_simulate.c: `tessera mig simulate`, several batches planned one
 * after another and joined (Section 4 of the FAR paper). */
#include <stdio.h>
#include <stdlib.h>

#include "cli/cli.h"
#include "cli/mig.h"

static const char tsr__simulate_help[] =
    "usage: tessera mig simulate [options] BATCH.csv [BATCH.csv ...]\n"
    "       tessera mig simulate [options] --batches K [-n N --scaling S --times T --seed N]\n"
    "\n"
    "Plans several batches one after another, as they would arrive, and joins their\n"
    "FAR plans (Section 4 of the paper); prints the combined plan, per-batch\n"
    "makespans and rho against the multi-batch lower bound. With --batches, K\n"
    "synthetic batches are generated (seeds N, N+1, ...).\n"
    "\n"
    "options:\n"
    "  --concat C             trivial, reverse, or moves (reverse + moves/swaps;\n"
    "                         the default)\n"
    "  --batches K            generate K batches (1 to 100000) instead of reading files\n"
    "  -n, --tasks N          tasks per generated batch, 1 to 100000 (default 15)\n"
    "  --scaling S, --times T, --seed N   as for 'tessera mig generate'\n" TSR_CLI_MIG_COMMON_HELP;

static const tsr_cli_mig_cmd_t tsr__simulate_cmd = {"simulate", tsr__simulate_help, NULL};

static const char *const tsr__concat_names[] = {"trivial", "reverse", "moves", NULL};
static const tsr_mig_concat_t tsr__concat_modes[] = {TSR_MIG_CONCAT_TRIVIAL, TSR_MIG_CONCAT_REVERSE,
                                                     TSR_MIG_CONCAT_REVERSE_MOVES};

/* Joins the batches (files, or `nb` generated ones) into *out_plan and
 * *out_tasks; ends[k] is the makespan after batch k. */
TSR_MUST_USE static tsr_status_t tsr__join(const tsr_mig_model_t *m, tsr_mig_concat_t mode, char **files, int nb,
                                           const tsr_mig_gen_t *g, const tsr_cli_mig_gen_args_t *ga, double *ends,
                                           tsr_mig_plan_t **out_plan, tsr_mig_tasks_t **out_tasks) {
  tsr_mig_multi_t *mb;
  TSR_RETURN_IF_ERROR(tsr_mig_multi_create(m, mode, NULL, &mb));
  tsr_status_t st = NULL;
  for (int k = 0; k < nb && !st; k++) {
    tsr_mig_tasks_t *t;
    if (files)
      st = tsr_mig_tasks_load_csv(m, files[k], &t);
    else
      st = tsr_mig_generate(m, g, (int)ga->tasks, ga->seed + (uint64_t)k, &t);
    if (st) break;
    st = tsr_mig_multi_add(mb, t, NULL, NULL);
    ends[k] = tsr_mig_multi_makespan(mb);
    tsr_mig_tasks_free(t);
  }
  if (!st) st = tsr_mig_multi_result(mb, out_plan, out_tasks);
  tsr_mig_multi_free(mb);
  return st;
}

int tsr_cli_mig_simulate(int argc, char **argv) {
  tsr_cli_mig_common_t cm = {0};
  tsr_cli_mig_gen_args_t ga = TSR_CLI_MIG_GEN_ARGS_DEFAULT;
  int concat = 2; /* moves */
  uint64_t batches = 0;
  const tsr_cli_mig_opt_t opts[] = {
      {"concat", 0, TSR_CLI_MIG_CHOICE, &concat, 0, 0, tsr__concat_names},
      {"batches", 0, TSR_CLI_MIG_COUNT, &batches, 1, 100000, NULL},
      TSR_CLI_MIG_GEN_OPTS(&ga, 100000),
      {NULL},
  };
  int first, rc;
  if (!tsr_cli_mig_parse(&tsr__simulate_cmd, argc, argv, opts, &cm, &first, &rc)) return rc;
  int nfiles = argc - first;
  if ((nfiles == 0) == (batches == 0)) {
    tsr_cli_error("mig simulate wants batch files or --batches K, not both or neither");
    return TSR_EXIT_USAGE;
  }
  int nb = nfiles ? nfiles : (int)batches;
  tsr_mig_model_t m;
  tsr_mig_gen_t g = {0};
  tsr_status_t st = tsr_cli_mig_model(&cm, &m);
  if (!st && batches) st = tsr_cli_mig_gen(&m, &ga, &g);
  double *ends = NULL;
  if (!st && !(ends = calloc((size_t)nb, sizeof(double)))) st = tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory");
  tsr_mig_plan_t *p = NULL;
  tsr_mig_tasks_t *all = NULL;
  if (!st) st = tsr__join(&m, tsr__concat_modes[concat], nfiles ? argv + first : NULL, nb, &g, &ga, ends, &p, &all);
  if (st)
    rc = tsr_cli_fail(st);
  else if ((rc = tsr_cli_mig_check(p, all)) == TSR_EXIT_OK) {
    rc = tsr_cli_mig_emit(&cm, p, all);
    if (rc == TSR_EXIT_OK && !cm.json && !cm.out) {
      printf("\nbatches joined: %d; makespan after each:", nb);
      for (int k = 0; k < nb && k < 50; k++) printf(" %.2f", ends[k]);
      printf("%s\nmulti-batch rho %.4f (p_multi-batch %.2f%%)\n", nb > 50 ? " ..." : "", p->makespan / p->lower_bound,
             (p->makespan / p->lower_bound - 1) * 100);
    }
  }
  free(ends);
  tsr_mig_plan_free(p);
  tsr_mig_tasks_free(all);
  return rc;
}
