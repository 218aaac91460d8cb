/* cli/mig_run.c: `tessera mig run`, a plan carried out (dry-run, or real MIG
 * instances through NVML), real times printed beside the planned ones. */
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

#include "cli/cli.h"
#include "cli/mig.h"
#include "base/json.h"

static const char tsr__run_help[] =
    "usage: tessera mig run [options] PLAN.json\n"
    "\n"
    "Carries out a plan written by 'tessera mig plan --json': every instance is\n"
    "created once the instances before it on its slices are destroyed, runs its\n"
    "tasks in order ('sh -c COMMAND' with CUDA_VISIBLE_DEVICES set to the\n"
    "instance), and is destroyed when a later instance needs its slices.\n"
    "Creations and destructions go one at a time. Prints real start/end times\n"
    "next to the planned ones.\n"
    "\n"
    "options:\n"
    "  --backend B            dry-run (default): no MIG calls, tasks without a\n"
    "                         command sleep their planned time; nvml: real MIG\n"
    "                         instances (needs root and a GPU already in MIG mode;\n"
    "                         tessera never changes the MIG mode)\n"
    "  --time-scale X         dry-run: multiply waits by X, 0 to 1000 (e.g. 0.01;\n"
    "                         default 1)\n"
    "  --gpu-index N          nvml: the GPU to use, 0 to 63 (default 0)\n" TSR_CLI_MIG_COMMON_HELP;

static const tsr_cli_mig_cmd_t tsr__run_cmd = {"run", tsr__run_help, "PLAN.json"};

static const char *const tsr__backend_names[] = {"dry-run", "nvml", NULL};
static const tsr_mig_backend_t tsr__backends[] = {TSR_MIG_BACKEND_DRY_RUN, TSR_MIG_BACKEND_NVML};

/* {"gpu", "backend", "tasks": [{"name", "planned_start_s", "planned_end_s",
 * "real_start_s", "real_end_s", "exit_status"}]} */
static void tsr__report_json(const tsr_mig_plan_t *p, const tsr_mig_tasks_t *t, const tsr_mig_exec_report_t *rep,
                             const char *backend, tsr_json_writer_t *w) {
  tsr_json_object_begin(w);
  tsr_json_key_string(w, "gpu", p->model.name);
  tsr_json_key_string(w, "backend", backend);
  tsr_json_key(w, "tasks");
  tsr_json_array_begin(w);
  for (int i = 0; i < p->ntasks; i++) {
    tsr_json_object_begin(w);
    tsr_json_key_string(w, "name", t->names[i]);
    tsr_json_key_double(w, "planned_start_s", p->placements[i].start);
    tsr_json_key_double(w, "planned_end_s", p->placements[i].end);
    tsr_json_key_double(w, "real_start_s", rep[i].start);
    tsr_json_key_double(w, "real_end_s", rep[i].end);
    tsr_json_key_i64(w, "exit_status", rep[i].exit_status);
    tsr_json_object_end(w);
  }
  tsr_json_array_end(w);
  tsr_json_object_end(w);
}

TSR_MUST_USE static tsr_status_t tsr__report_text(const tsr_mig_plan_t *p, const tsr_mig_tasks_t *t,
                                                  const tsr_mig_exec_report_t *rep, FILE *out) {
  fprintf(out, "%-24s %12s %12s %12s %12s %6s\n", "task", "plan_start", "plan_end", "real_start", "real_end", "exit");
  for (int i = 0; i < p->ntasks; i++)
    fprintf(out, "%-24.24s %12.3f %12.3f %12.3f %12.3f %6d\n", t->names[i], p->placements[i].start,
            p->placements[i].end, rep[i].start, rep[i].end, rep[i].exit_status);
  return ferror(out) ? tsr_status_make(TSR_IO_ERROR, "write failed") : NULL;
}

/* Prints what ran; on a refusal or a failed task what ran is still told. */
static int tsr__report(const tsr_cli_mig_common_t *cm, const tsr_mig_plan_t *p, const tsr_mig_tasks_t *t,
                       const tsr_mig_exec_report_t *rep, const char *backend) {
  FILE *out;
  int rc = tsr_cli_mig_out_open(cm, &out);
  if (rc) out = stdout; /* the --output failure is told; the report still goes out */
  tsr_status_t st;
  if (cm->json) {
    tsr_json_writer_t w = {0};
    tsr__report_json(p, t, rep, backend, &w);
    st = tsr_json_writer_print(&w, out);
    tsr_json_writer_free(&w);
  } else {
    st = tsr__report_text(p, t, rep, out);
  }
  int crc = tsr_cli_mig_out_close(cm, out, st);
  return rc ? rc : crc;
}

int tsr_cli_mig_run(int argc, char **argv) {
  tsr_cli_mig_common_t cm = {0};
  int backend = 0; /* dry-run */
  double time_scale = 1.0;
  uint64_t gpu_index = 0;
  const tsr_cli_mig_opt_t opts[] = {
      {"backend", 0, TSR_CLI_MIG_CHOICE, &backend, 0, 0, tsr__backend_names},
      {"time-scale", 0, TSR_CLI_MIG_FACTOR, &time_scale, 0, 1000, NULL},
      {"gpu-index", 0, TSR_CLI_MIG_COUNT, &gpu_index, 0, 63, NULL},
      {NULL},
  };
  int first, rc;
  if (!tsr_cli_mig_parse(&tsr__run_cmd, argc, argv, opts, &cm, &first, &rc)) return rc;
  tsr_mig_exec_options_t eo = {.backend = tsr__backends[backend],
                               .time_scale = time_scale,
                               .gpu_index = (unsigned)gpu_index,
                               .log = cm.json ? NULL : stderr};
  tsr_mig_plan_t *p;
  tsr_mig_tasks_t *t;
  tsr_status_t st = tsr_mig_plan_read_json(argv[first], &p, &t);
  if (st) return tsr_cli_fail(st);
  if (cm.gpu && strcasecmp(cm.gpu, p->model.name)) {
    tsr_cli_error("the plan is for %s, not %s", p->model.name, cm.gpu);
    rc = TSR_EXIT_USAGE;
  } else if (cm.reconfig) {
    /* check the plan against the given reconfiguration times */
    st = tsr_mig_model_load_reconfig_csv(&p->model, cm.reconfig);
    rc = tsr_cli_fail(st);
  }
  if (rc == TSR_EXIT_OK) rc = tsr_cli_mig_check(p, t);
  tsr_mig_exec_report_t *rep = NULL;
  if (rc == TSR_EXIT_OK) {
    rep = calloc((size_t)(p->ntasks ? p->ntasks : 1), sizeof(*rep));
    st = rep ? tsr_mig_exec(p, t, &eo, rep) : tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory");
    bool ran = false;
    for (int i = 0; rep && i < p->ntasks; i++) ran |= rep[i].exit_status != -1 || rep[i].end > 0;
    if (ran || !st) rc = tsr__report(&cm, p, t, rep, tsr__backend_names[backend]);
    if (st) rc = tsr_cli_fail(st);
    if (rc == TSR_EXIT_OK && cm.svg) rc = tsr_cli_mig_write_svg(cm.svg, p, t);
  }
  free(rep);
  tsr_mig_plan_free(p);
  tsr_mig_tasks_free(t);
  return rc;
}
