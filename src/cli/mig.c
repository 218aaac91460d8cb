/* cli/mig.c: `tessera mig`: plan, compare, simulate, generate and run batches
 * of jobs on MIG GPUs (libtessera-mig, seed 003). Every plan printed here has
 * passed tsr_mig_plan_validate(). */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "base/json.h"
#include "cli/cli.h"
#include "tessera/mig.h"

static int tsr__mig_exit(tsr_status_t st) {
  switch (tsr_status_code(st)) {
    case TSR_OK: return TSR_EXIT_OK;
    case TSR_INVALID_ARGUMENT: return TSR_EXIT_USAGE;
    case TSR_PERMISSION_DENIED:
    case TSR_FAILED_PRECONDITION:
    case TSR_UNAVAILABLE: return TSR_EXIT_REFUSED;
    default: return TSR_EXIT_INTERNAL;
  }
}

/* Reports `st` on stderr as one line, frees it, returns the exit code. */
static int tsr__mig_fail(tsr_status_t st) {
  tsr_cli_error("%s", tsr_status_message(st));
  int rc = tsr__mig_exit(st);
  tsr_status_free(st);
  return rc;
}

/* Options shared by the subcommands. */
typedef struct {
  const char *gpu;
  const char *reconfig;
  bool json;
  const char *svg;
  const char *out;
} tsr__mig_common_t;

enum {
  OPT_GPU = 1000, OPT_JSON, OPT_SVG, OPT_RECONFIG, OPT_ALGO, OPT_EFFORT, OPT_NO_REFINE,
  OPT_SCALING, OPT_TIMES, OPT_SEED, OPT_PSUP, OPT_CONCAT, OPT_BATCHES, OPT_BACKEND,
  OPT_TIME_SCALE, OPT_GPU_INDEX, OPT_ITER, OPT_N, OPT_OUT, OPT_HELP
};

static tsr_status_t tsr__mig_model(const tsr__mig_common_t *c, tsr_mig_model_t *m) {
  TSR_RETURN_IF_ERROR(tsr_mig_model_get(c->gpu ? c->gpu : "A100", m));
  if (c->reconfig) TSR_RETURN_IF_ERROR(tsr_mig_model_load_reconfig_csv(m, c->reconfig));
  return NULL;
}

/* Opens where results go: standard output, or the --output FILE. */
static int tsr__mig_out_open(const tsr__mig_common_t *c, FILE **out) {
  *out = stdout;
  if (c->out && !(*out = fopen(c->out, "w"))) {
    tsr_cli_error("%s: cannot write", c->out);
    return TSR_EXIT_INTERNAL;
  }
  return TSR_EXIT_OK;
}

static void tsr__mig_out_close(FILE *out) {
  if (out != stdout) fclose(out);
}

/* Writes the plan's SVG Gantt chart to `path`. */
static int tsr__mig_write_svg(const char *path, const tsr_mig_plan_t *p, const tsr_mig_tasks_t *t) {
  FILE *f = fopen(path, "w");
  if (!f) {
    tsr_cli_error("%s: cannot write", path);
    return TSR_EXIT_INTERNAL;
  }
  tsr_status_t st = tsr_mig_plan_write_svg(p, t, f);
  if (fclose(f) != 0 && !st) st = tsr_status_make(TSR_IO_ERROR, "%s: write failed", path);
  return st ? tsr__mig_fail(st) : TSR_EXIT_OK;
}

/* Writes the plan as text or JSON to the output, and the SVG if asked. */
static int tsr__mig_emit(const tsr__mig_common_t *c, const tsr_mig_plan_t *p,
                         const tsr_mig_tasks_t *t) {
  FILE *out;
  int rc = tsr__mig_out_open(c, &out);
  if (rc) return rc;
  tsr_status_t st = c->json ? tsr_mig_plan_write_json(p, t, out) : tsr_mig_plan_write_text(p, t, out);
  tsr__mig_out_close(out);
  if (st) return tsr__mig_fail(st);
  return c->svg ? tsr__mig_write_svg(c->svg, p, t) : TSR_EXIT_OK;
}

static int tsr__mig_check(const tsr_mig_plan_t *p, const tsr_mig_tasks_t *t) {
  tsr_status_t st = tsr_mig_plan_validate(p, t);
  if (!st) return TSR_EXIT_OK;
  tsr_cli_error("internal error: %s produced an invalid plan: %s", p->algorithm,
                tsr_status_message(st));
  tsr_status_free(st);
  return TSR_EXIT_INTERNAL;
}

static bool tsr__parse_common(int c, tsr__mig_common_t *cm) {
  switch (c) {
    case OPT_GPU: cm->gpu = optarg; return true;
    case OPT_JSON: cm->json = true; return true;
    case OPT_SVG: cm->svg = optarg; return true;
    case OPT_RECONFIG: cm->reconfig = optarg; return true;
    case OPT_OUT:
    case 'o': cm->out = optarg; return true;
    default: return false;
  }
}

#define TSR__COMMON_OPTS                                      \
  {"gpu", required_argument, NULL, OPT_GPU},                  \
  {"json", no_argument, NULL, OPT_JSON},                      \
  {"svg", required_argument, NULL, OPT_SVG},                  \
  {"reconfig-times", required_argument, NULL, OPT_RECONFIG},  \
  {"output", required_argument, NULL, OPT_OUT},               \
  {"help", no_argument, NULL, OPT_HELP}

#define TSR__COMMON_HELP                                                              \
  "  --gpu MODEL            A30, A100, H100, H200 or B200 (default A100)\n"         \
  "  --json                 print JSON instead of a table\n"                         \
  "  --svg FILE             also write an SVG Gantt chart of the plan\n"             \
  "  --reconfig-times CSV   instance create/destroy times (gpu,size,create_s,destroy_s)\n" \
  "  --output FILE          write to FILE instead of standard output\n"              \
  "  --help                 this text\n"

static int tsr__bad_option(const char *cmd, char **argv) {
  tsr_cli_error("mig %s: unknown option or missing value '%s' (try 'tessera mig %s --help')", cmd,
                argv[optind - 1], cmd);
  return TSR_EXIT_USAGE;
}

static bool tsr__parse_double_arg(const char *s, double *out) {
  char *end;
  double v = strtod(s, &end);
  if (end == s || *end || !isfinite(v)) return false;
  *out = v;
  return true;
}

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
    "  --effort MS            FAR: spend about MS milliseconds on a stronger search\n"
    "  --no-refine            FAR: skip phase 3 (moves and swaps)\n"
    "  --max-iterations N     FAR: cap on refinement iterations (default 1000)\n"
    "  --seed N               seed of the --effort search\n" TSR__COMMON_HELP;

static tsr_status_t tsr__mig_run_algo(const tsr_mig_model_t *m, const tsr_mig_tasks_t *t,
                                      const char *algo, const tsr_mig_far_options_t *fo,
                                      tsr_mig_plan_t **out) {
  if (!algo || !strcasecmp(algo, "far")) return tsr_mig_far_plan(m, t, fo, out);
  if (!strcasecmp(algo, "fixpartbest")) return tsr_mig_fixpart_best_plan(m, t, out);
  if (!strcasecmp(algo, "miso") || !strcasecmp(algo, "miso-opt")) return tsr_mig_miso_plan(m, t, out);
  if (!strncasecmp(algo, "fixpart:", 8)) {
    uint32_t set;
    TSR_RETURN_IF_ERROR(tsr_mig_model_parse_partition(m, algo + 8, &set));
    return tsr_mig_fixpart_plan(m, t, set, out);
  }
  return tsr_status_make(TSR_INVALID_ARGUMENT,
                         "unknown algorithm '%s' (far, fixpart:SIZES, fixpartbest, miso)", algo);
}

static int tsr__mig_plan(int argc, char **argv) {
  static const struct option opts[] = {
      TSR__COMMON_OPTS,
      {"algorithm", required_argument, NULL, OPT_ALGO},
      {"effort", required_argument, NULL, OPT_EFFORT},
      {"no-refine", no_argument, NULL, OPT_NO_REFINE},
      {"max-iterations", required_argument, NULL, OPT_ITER},
      {"seed", required_argument, NULL, OPT_SEED},
      {NULL, 0, NULL, 0}};
  tsr__mig_common_t cm = {0};
  tsr_mig_far_options_t fo = {0};
  const char *algo = NULL;
  int c;
  while ((c = getopt_long(argc, argv, "o:", opts, NULL)) != -1) {
    if (tsr__parse_common(c, &cm)) continue;
    double v;
    switch (c) {
      case OPT_HELP: fputs(tsr__plan_help, stdout); return TSR_EXIT_OK;
      case OPT_ALGO: algo = optarg; break;
      case OPT_NO_REFINE: fo.no_refine = true; break;
      case OPT_EFFORT:
        if (!tsr__parse_double_arg(optarg, &v) || v < 0) {
          tsr_cli_error("--effort wants milliseconds >= 0, not '%s'", optarg);
          return TSR_EXIT_USAGE;
        }
        fo.effort_s = v / 1000;
        break;
      case OPT_ITER:
        if (!tsr__parse_double_arg(optarg, &v) || v < 1 || v > 1e9) {
          tsr_cli_error("--max-iterations wants a positive count, not '%s'", optarg);
          return TSR_EXIT_USAGE;
        }
        fo.max_iterations = (int)v;
        break;
      case OPT_SEED: fo.seed = strtoull(optarg, NULL, 10); break;
      default: return tsr__bad_option("plan", argv);
    }
  }
  if (optind + 1 != argc) {
    tsr_cli_error("mig plan wants one TASKS.csv (try 'tessera mig plan --help')");
    return TSR_EXIT_USAGE;
  }
  tsr_mig_model_t m;
  tsr_status_t st = tsr__mig_model(&cm, &m);
  if (st) return tsr__mig_fail(st);
  tsr_mig_tasks_t *t;
  if ((st = tsr_mig_tasks_load_csv(&m, argv[optind], &t))) return tsr__mig_fail(st);
  tsr_mig_plan_t *p;
  if ((st = tsr__mig_run_algo(&m, t, algo, &fo, &p))) {
    tsr_mig_tasks_free(t);
    return tsr__mig_fail(st);
  }
  int rc = tsr__mig_check(p, t);
  if (rc == TSR_EXIT_OK) rc = tsr__mig_emit(&cm, p, t);
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
    "  --effort MS            also run FAR with a stronger search of about MS ms\n" TSR__COMMON_HELP;

static int tsr__mig_compare(int argc, char **argv) {
  static const struct option opts[] = {TSR__COMMON_OPTS,
                                       {"effort", required_argument, NULL, OPT_EFFORT},
                                       {NULL, 0, NULL, 0}};
  tsr__mig_common_t cm = {0};
  double effort = 0;
  int c;
  while ((c = getopt_long(argc, argv, "o:", opts, NULL)) != -1) {
    if (tsr__parse_common(c, &cm)) continue;
    if (c == OPT_HELP) {
      fputs(tsr__compare_help, stdout);
      return TSR_EXIT_OK;
    }
    if (c == OPT_EFFORT && tsr__parse_double_arg(optarg, &effort) && effort >= 0) continue;
    return tsr__bad_option("compare", argv);
  }
  if (optind + 1 != argc) {
    tsr_cli_error("mig compare wants one TASKS.csv (try 'tessera mig compare --help')");
    return TSR_EXIT_USAGE;
  }
  tsr_mig_model_t m;
  tsr_status_t st = tsr__mig_model(&cm, &m);
  if (st) return tsr__mig_fail(st);
  tsr_mig_tasks_t *t;
  if ((st = tsr_mig_tasks_load_csv(&m, argv[optind], &t))) return tsr__mig_fail(st);
  enum { MAXP = 64 };
  tsr_mig_plan_t *plans[MAXP + 8] = {0};
  double ms_time[MAXP + 8] = {0};
  int np = 0, rc = TSR_EXIT_OK;
  uint32_t sets[MAXP];
  int ns = tsr_mig_model_partitions(&m, sets, MAXP);
  if (ns > MAXP) ns = MAXP;
  /* FAR, FAR+effort, MISO-opt, FixPartBest, then every FixPart */
  for (int a = 0; a < 4 + ns && !st; a++) {
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    tsr_mig_plan_t *p = NULL;
    if (a == 0) st = tsr_mig_far_plan(&m, t, NULL, &p);
    else if (a == 1) {
      if (effort <= 0) continue;
      tsr_mig_far_options_t fo = {.effort_s = effort / 1000};
      st = tsr_mig_far_plan(&m, t, &fo, &p);
    } else if (a == 2) st = tsr_mig_miso_plan(&m, t, &p);
    else if (a == 3) st = tsr_mig_fixpart_best_plan(&m, t, &p);
    else {
      st = tsr_mig_fixpart_plan(&m, t, sets[a - 4], &p);
      if (st && tsr_status_code(st) == TSR_FAILED_PRECONDITION) {
        tsr_status_free(st);
        st = NULL;
        continue;
      }
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (st) break;
    if ((rc = tsr__mig_check(p, t)) != TSR_EXIT_OK) {
      tsr_mig_plan_free(p);
      break;
    }
    ms_time[np] = (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6;
    plans[np++] = p;
  }
  if (st) rc = tsr__mig_fail(st);
  FILE *out = NULL;
  if (rc == TSR_EXIT_OK && (rc = tsr__mig_out_open(&cm, &out)) == TSR_EXIT_OK) {
    {
      double far = plans[0]->makespan;
      if (cm.json) {
        fprintf(out, "{\n  \"gpu\": \"%s\",\n  \"tasks\": %d,\n  \"lower_bound_s\": %.9g,\n  \"results\": [\n",
                m.name, t->n, plans[0]->lower_bound);
        for (int q = 0; q < np; q++)
          fprintf(out,
                  "    {\"algorithm\": \"%s\", \"makespan_s\": %.9g, \"rho\": %.6f, \"sigma\": %.6f, "
                  "\"plan_ms\": %.4f}%s\n",
                  plans[q]->algorithm, plans[q]->makespan, plans[q]->makespan / plans[q]->lower_bound,
                  plans[q]->makespan / far, ms_time[q], q + 1 < np ? "," : "");
        fprintf(out, "  ]\n}\n");
      } else {
        fprintf(out, "%d tasks on %s, lower bound %.3f s\n\n", t->n, m.name, plans[0]->lower_bound);
        fprintf(out, "%-36s %12s %8s %8s %10s\n", "algorithm", "makespan_s", "rho", "sigma", "plan_ms");
        for (int q = 0; q < np; q++)
          fprintf(out, "%-36s %12.3f %8.4f %8.3f %10.3f\n", plans[q]->algorithm, plans[q]->makespan,
                  plans[q]->makespan / plans[q]->lower_bound, plans[q]->makespan / far, ms_time[q]);
        fprintf(out, "\nsigma = makespan / FAR's makespan; FixPart and MISO-opt pay no reconfiguration.\n");
      }
      tsr__mig_out_close(out);
      if (cm.svg) rc = tsr__mig_write_svg(cm.svg, plans[0], t);
    }
  }
  for (int q = 0; q < np; q++) tsr_mig_plan_free(plans[q]);
  tsr_mig_tasks_free(t);
  return rc;
}

/* ---- generate ----------------------------------------------------------- */

static const char tsr__generate_help[] =
    "usage: tessera mig generate [options]\n"
    "\n"
    "Writes a synthetic batch (Section 6.3 of the FAR paper) as CSV: each task's\n"
    "time on 1 slice is uniform in the time range, and each further slice scales it\n"
    "super-, near- or sub-linearly according to the task's class.\n"
    "\n"
    "options:\n"
    "  -n, --tasks N          number of tasks (default 15)\n"
    "  --scaling S            poor, mixed (default) or good\n"
    "  --times T              wide (1-100 s, default) or narrow (90-100 s)\n"
    "  --p-sup F              share of well-scaling tasks that start super-linear (0.5)\n"
    "  --seed N               seed (default 1): the same seed gives the same tasks\n"
    "  (--json writes the tasks as JSON; --svg FILE also plans them with FAR and\n"
    "   draws that plan)\n" TSR__COMMON_HELP;

static int tsr__mig_generate(int argc, char **argv) {
  static const struct option opts[] = {TSR__COMMON_OPTS,
                                       {"tasks", required_argument, NULL, 'n'},
                                       {"scaling", required_argument, NULL, OPT_SCALING},
                                       {"times", required_argument, NULL, OPT_TIMES},
                                       {"p-sup", required_argument, NULL, OPT_PSUP},
                                       {"seed", required_argument, NULL, OPT_SEED},
                                       {NULL, 0, NULL, 0}};
  tsr__mig_common_t cm = {0};
  const char *scaling = "mixed", *times = "wide";
  double n = 15, psup = -1;
  uint64_t seed = 1;
  int c;
  while ((c = getopt_long(argc, argv, "n:o:", opts, NULL)) != -1) {
    if (tsr__parse_common(c, &cm)) continue;
    switch (c) {
      case OPT_HELP: fputs(tsr__generate_help, stdout); return TSR_EXIT_OK;
      case 'n':
        if (!tsr__parse_double_arg(optarg, &n) || n < 1 || n > 1e6 || n != floor(n)) {
          tsr_cli_error("--tasks wants a count between 1 and 1000000, not '%s'", optarg);
          return TSR_EXIT_USAGE;
        }
        break;
      case OPT_SCALING: scaling = optarg; break;
      case OPT_TIMES: times = optarg; break;
      case OPT_PSUP:
        if (!tsr__parse_double_arg(optarg, &psup) || psup < 0 || psup > 1) {
          tsr_cli_error("--p-sup wants a fraction in [0, 1], not '%s'", optarg);
          return TSR_EXIT_USAGE;
        }
        break;
      case OPT_SEED: seed = strtoull(optarg, NULL, 10); break;
      default: return tsr__bad_option("generate", argv);
    }
  }
  if (optind != argc) {
    tsr_cli_error("mig generate takes no file arguments (try --output FILE)");
    return TSR_EXIT_USAGE;
  }
  tsr_mig_model_t m;
  tsr_status_t st = tsr__mig_model(&cm, &m);
  if (st) return tsr__mig_fail(st);
  tsr_mig_gen_t g;
  if ((st = tsr_mig_gen_preset(&m, scaling, times, &g))) return tsr__mig_fail(st);
  if (psup >= 0) g.p_sup = psup;
  tsr_mig_tasks_t *t;
  if ((st = tsr_mig_generate(&m, &g, (int)n, seed, &t))) return tsr__mig_fail(st);
  FILE *out;
  int rc = tsr__mig_out_open(&cm, &out);
  if (rc) {
    tsr_mig_tasks_free(t);
    return rc;
  }
  if (cm.json) {
    fprintf(out, "{\"gpu\": \"%s\", \"seed\": %llu, \"tasks\": [\n", m.name, (unsigned long long)seed);
    for (int i = 0; i < t->n; i++) {
      fprintf(out, "  {\"name\": \"%s\", \"times_s\": {", t->names[i]);
      for (int k = 0; k < t->nsizes; k++)
        fprintf(out, "%s\"%d\": %.17g", k ? ", " : "", t->sizes[k], tsr_mig_tasks_time(t, i, k));
      fprintf(out, "}}%s\n", i + 1 < t->n ? "," : "");
    }
    fprintf(out, "]}\n");
  } else if ((st = tsr_mig_tasks_write_csv(t, out))) {
    rc = tsr__mig_fail(st);
  }
  tsr__mig_out_close(out);
  if (rc == TSR_EXIT_OK && cm.svg) {
    tsr_mig_plan_t *p;
    if ((st = tsr_mig_far_plan(&m, t, NULL, &p))) rc = tsr__mig_fail(st);
    else {
      rc = tsr__mig_check(p, t);
      if (rc == TSR_EXIT_OK) rc = tsr__mig_write_svg(cm.svg, p, t);
      tsr_mig_plan_free(p);
    }
  }
  tsr_mig_tasks_free(t);
  return rc;
}

/* ---- simulate ----------------------------------------------------------- */

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
    "  --batches K            generate K batches instead of reading files\n"
    "  -n, --tasks N          tasks per generated batch (default 15)\n"
    "  --scaling S, --times T, --seed N   as for 'tessera mig generate'\n" TSR__COMMON_HELP;

static int tsr__mig_simulate(int argc, char **argv) {
  static const struct option opts[] = {TSR__COMMON_OPTS,
                                       {"concat", required_argument, NULL, OPT_CONCAT},
                                       {"batches", required_argument, NULL, OPT_BATCHES},
                                       {"tasks", required_argument, NULL, 'n'},
                                       {"scaling", required_argument, NULL, OPT_SCALING},
                                       {"times", required_argument, NULL, OPT_TIMES},
                                       {"seed", required_argument, NULL, OPT_SEED},
                                       {NULL, 0, NULL, 0}};
  tsr__mig_common_t cm = {0};
  tsr_mig_concat_t mode = TSR_MIG_CONCAT_REVERSE_MOVES;
  const char *scaling = "mixed", *times = "wide";
  double batches = 0, n = 15;
  uint64_t seed = 1;
  int c;
  while ((c = getopt_long(argc, argv, "n:o:", opts, NULL)) != -1) {
    if (tsr__parse_common(c, &cm)) continue;
    switch (c) {
      case OPT_HELP: fputs(tsr__simulate_help, stdout); return TSR_EXIT_OK;
      case OPT_CONCAT:
        if (!strcasecmp(optarg, "trivial")) mode = TSR_MIG_CONCAT_TRIVIAL;
        else if (!strcasecmp(optarg, "reverse")) mode = TSR_MIG_CONCAT_REVERSE;
        else if (!strcasecmp(optarg, "moves")) mode = TSR_MIG_CONCAT_REVERSE_MOVES;
        else {
          tsr_cli_error("--concat wants trivial, reverse or moves, not '%s'", optarg);
          return TSR_EXIT_USAGE;
        }
        break;
      case OPT_BATCHES:
        if (!tsr__parse_double_arg(optarg, &batches) || batches < 1 || batches > 100000 ||
            batches != floor(batches)) {
          tsr_cli_error("--batches wants a count between 1 and 100000, not '%s'", optarg);
          return TSR_EXIT_USAGE;
        }
        break;
      case 'n':
        if (!tsr__parse_double_arg(optarg, &n) || n < 1 || n > 100000 || n != floor(n)) {
          tsr_cli_error("--tasks wants a count between 1 and 100000, not '%s'", optarg);
          return TSR_EXIT_USAGE;
        }
        break;
      case OPT_SCALING: scaling = optarg; break;
      case OPT_TIMES: times = optarg; break;
      case OPT_SEED: seed = strtoull(optarg, NULL, 10); break;
      default: return tsr__bad_option("simulate", argv);
    }
  }
  int nfiles = argc - optind;
  if ((nfiles == 0) == (batches == 0)) {
    tsr_cli_error("mig simulate wants batch files or --batches K, not both or neither");
    return TSR_EXIT_USAGE;
  }
  tsr_mig_model_t m;
  tsr_status_t st = tsr__mig_model(&cm, &m);
  if (st) return tsr__mig_fail(st);
  tsr_mig_gen_t g;
  if (batches > 0 && (st = tsr_mig_gen_preset(&m, scaling, times, &g))) return tsr__mig_fail(st);
  tsr_mig_multi_t *mb;
  if ((st = tsr_mig_multi_create(&m, mode, NULL, &mb))) return tsr__mig_fail(st);
  int nb = nfiles ? nfiles : (int)batches;
  double *ends = calloc((size_t)nb, sizeof(double));
  for (int k = 0; k < nb && !st && ends; k++) {
    tsr_mig_tasks_t *t;
    if (nfiles) st = tsr_mig_tasks_load_csv(&m, argv[optind + k], &t);
    else st = tsr_mig_generate(&m, &g, (int)n, seed + (uint64_t)k, &t);
    if (st) break;
    st = tsr_mig_multi_add(mb, t, NULL, NULL);
    ends[k] = tsr_mig_multi_makespan(mb);
    tsr_mig_tasks_free(t);
  }
  if (!ends && !st) st = tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory");
  tsr_mig_plan_t *p = NULL;
  tsr_mig_tasks_t *all = NULL;
  if (!st) st = tsr_mig_multi_result(mb, &p, &all);
  tsr_mig_multi_free(mb);
  int rc;
  if (st) rc = tsr__mig_fail(st);
  else if ((rc = tsr__mig_check(p, all)) == TSR_EXIT_OK) {
    rc = tsr__mig_emit(&cm, p, all);
    if (rc == TSR_EXIT_OK && !cm.json && !cm.out) {
      printf("\nbatches joined: %d; makespan after each:", nb);
      for (int k = 0; k < nb && k < 50; k++) printf(" %.2f", ends[k]);
      printf("%s\nmulti-batch rho %.4f (p_multi-batch %.2f%%)\n", nb > 50 ? " ..." : "",
             p->makespan / p->lower_bound, (p->makespan / p->lower_bound - 1) * 100);
    }
  }
  free(ends);
  tsr_mig_plan_free(p);
  tsr_mig_tasks_free(all);
  return rc;
}

/* ---- run ---------------------------------------------------------------- */

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
    "  --time-scale X         dry-run: multiply waits by X (e.g. 0.01), default 1\n"
    "  --gpu-index N          nvml: the GPU to use (default 0)\n" TSR__COMMON_HELP;

static int tsr__mig_run(int argc, char **argv) {
  static const struct option opts[] = {TSR__COMMON_OPTS,
                                       {"backend", required_argument, NULL, OPT_BACKEND},
                                       {"time-scale", required_argument, NULL, OPT_TIME_SCALE},
                                       {"gpu-index", required_argument, NULL, OPT_GPU_INDEX},
                                       {NULL, 0, NULL, 0}};
  tsr__mig_common_t cm = {0};
  tsr_mig_exec_options_t eo = {.backend = TSR_MIG_BACKEND_DRY_RUN, .time_scale = 1.0};
  int c;
  double v;
  while ((c = getopt_long(argc, argv, "o:", opts, NULL)) != -1) {
    if (tsr__parse_common(c, &cm)) continue;
    switch (c) {
      case OPT_HELP: fputs(tsr__run_help, stdout); return TSR_EXIT_OK;
      case OPT_BACKEND:
        if (!strcasecmp(optarg, "dry-run")) eo.backend = TSR_MIG_BACKEND_DRY_RUN;
        else if (!strcasecmp(optarg, "nvml")) eo.backend = TSR_MIG_BACKEND_NVML;
        else {
          tsr_cli_error("--backend wants dry-run or nvml, not '%s'", optarg);
          return TSR_EXIT_USAGE;
        }
        break;
      case OPT_TIME_SCALE:
        if (!tsr__parse_double_arg(optarg, &v) || v < 0 || v > 1000) {
          tsr_cli_error("--time-scale wants a factor in [0, 1000], not '%s'", optarg);
          return TSR_EXIT_USAGE;
        }
        eo.time_scale = v;
        break;
      case OPT_GPU_INDEX:
        if (!tsr__parse_double_arg(optarg, &v) || v < 0 || v > 63 || v != floor(v)) {
          tsr_cli_error("--gpu-index wants a device number, not '%s'", optarg);
          return TSR_EXIT_USAGE;
        }
        eo.gpu_index = (unsigned)v;
        break;
      default: return tsr__bad_option("run", argv);
    }
  }
  if (optind + 1 != argc) {
    tsr_cli_error("mig run wants one PLAN.json (try 'tessera mig run --help')");
    return TSR_EXIT_USAGE;
  }
  tsr_mig_plan_t *p;
  tsr_mig_tasks_t *t;
  tsr_status_t st = tsr_mig_plan_read_json(argv[optind], &p, &t);
  if (st) return tsr__mig_fail(st);
  int rc = TSR_EXIT_OK;
  if (cm.gpu && strcasecmp(cm.gpu, p->model.name)) {
    tsr_cli_error("the plan is for %s, not %s", p->model.name, cm.gpu);
    rc = TSR_EXIT_USAGE;
  }
  if (rc == TSR_EXIT_OK && cm.reconfig) {
    /* check the plan against the given reconfiguration times */
    st = tsr_mig_model_load_reconfig_csv(&p->model, cm.reconfig);
    if (st) rc = tsr__mig_fail(st);
  }
  if (rc == TSR_EXIT_OK) rc = tsr__mig_check(p, t);
  tsr_mig_exec_report_t *rep = NULL;
  if (rc == TSR_EXIT_OK) {
    rep = calloc((size_t)(p->ntasks ? p->ntasks : 1), sizeof(*rep));
    eo.log = cm.json ? NULL : stderr;
    /* on a refusal or a failed task, what ran is still printed below */
    st = rep ? tsr_mig_exec(p, t, &eo, rep) : tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory");
  }
  if (rc == TSR_EXIT_OK && rep) {
    bool ran = false;
    for (int i = 0; i < p->ntasks; i++) ran |= rep[i].exit_status != -1 || rep[i].end > 0;
    if (ran || !st) {
      FILE *out;
      if (tsr__mig_out_open(&cm, &out) != TSR_EXIT_OK) out = stdout; /* what ran is still told */
      if (cm.json) {
        fprintf(out, "{\"gpu\": \"%s\", \"backend\": \"%s\", \"tasks\": [\n", p->model.name,
                eo.backend == TSR_MIG_BACKEND_NVML ? "nvml" : "dry-run");
        tsr_json_writer_t name = {0}; /* task names come from the plan file: escape them */
        for (int i = 0; i < p->ntasks; i++) {
          tsr_json_writer_reset(&name);
          tsr_json_string(&name, t->names[i]);
          fprintf(out,
                  "  {\"name\": %s, \"planned_start_s\": %.6f, \"planned_end_s\": %.6f, "
                  "\"real_start_s\": %.6f, \"real_end_s\": %.6f, \"exit_status\": %d}%s\n",
                  name.buf ? name.buf : "\"\"", p->placements[i].start, p->placements[i].end,
                  rep[i].start, rep[i].end, rep[i].exit_status, i + 1 < p->ntasks ? "," : "");
        }
        tsr_json_writer_free(&name);
        fprintf(out, "]}\n");
      } else {
        fprintf(out, "%-24s %12s %12s %12s %12s %6s\n", "task", "plan_start", "plan_end",
                "real_start", "real_end", "exit");
        for (int i = 0; i < p->ntasks; i++)
          fprintf(out, "%-24.24s %12.3f %12.3f %12.3f %12.3f %6d\n", t->names[i],
                  p->placements[i].start, p->placements[i].end, rep[i].start, rep[i].end,
                  rep[i].exit_status);
      }
      tsr__mig_out_close(out);
    }
    if (st) rc = tsr__mig_fail(st);
    if (rc == TSR_EXIT_OK && cm.svg) rc = tsr__mig_write_svg(cm.svg, p, t);
  }
  free(rep);
  tsr_mig_plan_free(p);
  tsr_mig_tasks_free(t);
  return rc;
}

/* ---- the family --------------------------------------------------------- */

static const char tsr__mig_help[] =
    "usage: tessera mig <command> [options]\n"
    "\n"
    "Plans batches of jobs on MIG GPUs with FAR (moldable scheduling with dynamic\n"
    "repartitioning) and runs the plans.\n"
    "\n"
    "commands:\n"
    "  plan       plan one batch (FAR or a baseline) and print it\n"
    "  compare    FAR against MISO-opt and every FixPart on one batch\n"
    "  simulate   plan several batches in a row and join them\n"
    "  generate   write a synthetic batch (the paper's Section 6.3)\n"
    "  run        carry out a plan (dry-run, or real MIG instances through NVML)\n"
    "\n"
    "'tessera mig <command> --help' describes a command.\n";

int tsr_cli_mig_main(const tsr_cli_globals_t *g, int argc, char **argv) {
  (void)g;
  if (argc < 2) {
    fputs(tsr__mig_help, stderr);
    return TSR_EXIT_USAGE;
  }
  const char *cmd = argv[1];
  if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
    fputs(tsr__mig_help, stdout);
    return TSR_EXIT_OK;
  }
  optind = 0; /* restart getopt; it skips argv[0], the command's name */
  opterr = 0; /* our own one-line messages */
  if (!strcmp(cmd, "plan")) return tsr__mig_plan(argc - 1, argv + 1);
  if (!strcmp(cmd, "compare")) return tsr__mig_compare(argc - 1, argv + 1);
  if (!strcmp(cmd, "generate")) return tsr__mig_generate(argc - 1, argv + 1);
  if (!strcmp(cmd, "simulate")) return tsr__mig_simulate(argc - 1, argv + 1);
  if (!strcmp(cmd, "run")) return tsr__mig_run(argc - 1, argv + 1);
  tsr_cli_error("unknown mig command '%s' (try 'tessera mig --help')", cmd);
  return TSR_EXIT_USAGE;
}
