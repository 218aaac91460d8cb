/* cli/mig_generate.c: `tessera mig generate`, a synthetic batch (Section 6.3
 * of the FAR paper) as CSV or JSON. */
#include <stdio.h>

#include "cli/cli.h"
#include "cli/mig.h"
#include "base/json.h"

static const char tsr__generate_help[] =
    "usage: tessera mig generate [options]\n"
    "\n"
    "Writes a synthetic batch (Section 6.3 of the FAR paper) as CSV: each task's\n"
    "time on 1 slice is uniform in the time range, and each further slice scales it\n"
    "super-, near- or sub-linearly according to the task's class.\n"
    "\n"
    "options:\n"
    "  -n, --tasks N          number of tasks, 1 to 1000000 (default 15)\n"
    "  --scaling S            poor, mixed (default) or good\n"
    "  --times T              wide (1-100 s, default) or narrow (90-100 s)\n"
    "  --p-sup F              share of well-scaling tasks that start super-linear,\n"
    "                         0.5 or 50% (default 0.5)\n"
    "  --seed N               seed (default 1): the same seed gives the same tasks\n"
    "  (--json writes the tasks as JSON; --svg FILE also plans them with FAR and\n"
    "   draws that plan)\n" TSR_CLI_MIG_COMMON_HELP;

static const tsr_cli_mig_cmd_t tsr__generate_cmd = {"generate", tsr__generate_help, NULL};

/* {"gpu", "seed", "tasks": [{"name", "times_s": {"<size>": seconds or null}}]} */
static void tsr__tasks_json(const tsr_mig_model_t *m, uint64_t seed, const tsr_mig_tasks_t *t, tsr_json_writer_t *w) {
  tsr_json_object_begin(w);
  tsr_json_key_string(w, "gpu", m->name);
  tsr_json_key_u64(w, "seed", seed);
  tsr_json_key(w, "tasks");
  tsr_json_array_begin(w);
  for (int i = 0; i < t->n; i++) {
    tsr_json_object_begin(w);
    tsr_json_key_string(w, "name", t->names[i]);
    tsr_json_key(w, "times_s");
    tsr_json_object_begin(w);
    for (int k = 0; k < t->nsizes; k++) {
      char size[16];
      snprintf(size, sizeof(size), "%d", t->sizes[k]);
      tsr_json_key_double(w, size, tsr_mig_tasks_time(t, i, k));
    }
    tsr_json_object_end(w);
    tsr_json_object_end(w);
  }
  tsr_json_array_end(w);
  tsr_json_object_end(w);
}

/* Plans the tasks with FAR and draws the plan into `path`. */
static int tsr__draw_far(const tsr_mig_model_t *m, const tsr_mig_tasks_t *t, const char *path) {
  tsr_mig_plan_t *p;
  tsr_status_t st = tsr_mig_far_plan(m, t, NULL, &p);
  if (st) return tsr_cli_fail(st);
  int rc = tsr_cli_mig_check(p, t);
  if (rc == TSR_EXIT_OK) rc = tsr_cli_mig_write_svg(path, p, t);
  tsr_mig_plan_free(p);
  return rc;
}

int tsr_cli_mig_generate(int argc, char **argv) {
  tsr_cli_mig_common_t cm = {0};
  tsr_cli_mig_gen_args_t ga = TSR_CLI_MIG_GEN_ARGS_DEFAULT;
  const tsr_cli_mig_opt_t opts[] = {
      TSR_CLI_MIG_GEN_OPTS(&ga, 1000000),
      {"p-sup", 0, TSR_CLI_MIG_FRACTION, &ga.p_sup, 0, 0, NULL},
      {NULL},
  };
  int first, rc;
  if (!tsr_cli_mig_parse(&tsr__generate_cmd, argc, argv, opts, &cm, &first, &rc)) return rc;
  if (first != argc) {
    tsr_cli_error("mig generate takes no file arguments (try --output FILE)");
    return TSR_EXIT_USAGE;
  }
  tsr_mig_model_t m;
  tsr_mig_gen_t g;
  tsr_mig_tasks_t *t;
  tsr_status_t st = tsr_cli_mig_model(&cm, &m);
  if (!st) st = tsr_cli_mig_gen(&m, &ga, &g);
  if (!st) st = tsr_mig_generate(&m, &g, (int)ga.tasks, ga.seed, &t);
  if (st) return tsr_cli_fail(st);
  if (cm.json) {
    tsr_json_writer_t w = {0};
    tsr__tasks_json(&m, ga.seed, t, &w);
    rc = tsr_cli_mig_print_json(&cm, &w);
    tsr_json_writer_free(&w);
  } else {
    FILE *out;
    if ((rc = tsr_cli_mig_out_open(&cm, &out)) == TSR_EXIT_OK) {
      rc = tsr_cli_mig_out_close(&cm, out, tsr_mig_tasks_write_csv(t, out));
    }
  }
  if (rc == TSR_EXIT_OK && cm.svg) rc = tsr__draw_far(&m, t, cm.svg);
  tsr_mig_tasks_free(t);
  return rc;
}
