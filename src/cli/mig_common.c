/* cli/mig_common.c: the option parser and output helpers of `tessera mig`
 * (see mig.h). */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/units.h"
#include "cli/cli.h"
#include "cli/mig.h"
#include "base/json.h"

/* ---- options ------------------------------------------------------------ */

#define TSR__MAX_OPTS 32
#define TSR__LONG_BASE 1000 /* getopt_long's value for row i is TSR__LONG_BASE + i */

/* "a, b or c" from a NULL-terminated list. */
static void tsr__choices_text(const char *const *choices, char *buf, size_t cap) {
  size_t len = 0;
  buf[0] = 0;
  for (int i = 0; choices[i] && len < cap; i++) {
    const char *sep = i == 0 ? "" : choices[i + 1] ? ", " : " or ";
    int w = snprintf(buf + len, cap - len, "%s%s", sep, choices[i]);
    if (w < 0) break;
    len += (size_t)w;
  }
}

/* A plain decimal: digits, optionally a point and more digits ("0.01", "2").
 * Signs, exponents, hex, "inf" and blanks, which strtod takes, are not. */
static bool tsr__parse_factor(const char *text, double *out) {
  size_t whole = strspn(text, "0123456789");
  if (whole == 0) return false;
  const char *p = text + whole;
  if (*p == '.') {
    size_t frac = strspn(p + 1, "0123456789");
    if (frac == 0) return false;
    p += 1 + frac;
  }
  if (*p) return false;
  *out = strtod(text, NULL);
  return true;
}

/* Parses `text` as the value of option `o` into o->dest. NULL or the usage
 * error, naming the option. */
TSR_MUST_USE static tsr_status_t tsr__parse_value(const tsr_cli_mig_opt_t *o, const char *text) {
  switch (o->kind) {
    case TSR_CLI_MIG_FLAG: *(bool *)o->dest = true; return NULL;
    case TSR_CLI_MIG_STRING: *(const char **)o->dest = text; return NULL;
    case TSR_CLI_MIG_COUNT: {
      uint64_t v;
      TSR_RETURN_IF_ERROR(tsr_status_annotate(tsr_parse_u64(text, &v), "--%s", o->name));
      if (v < o->min || v > o->max)
        return tsr_status_make(TSR_INVALID_ARGUMENT, "--%s wants a whole number from %llu to %llu, not '%s'", o->name,
                               (unsigned long long)o->min, (unsigned long long)o->max, text);
      *(uint64_t *)o->dest = v;
      return NULL;
    }
    case TSR_CLI_MIG_DURATION: {
      uint64_t ns;
      TSR_RETURN_IF_ERROR(tsr_status_annotate(tsr_parse_duration(text, &ns), "--%s", o->name));
      *(double *)o->dest = (double)ns / 1e9;
      return NULL;
    }
    case TSR_CLI_MIG_FRACTION: {
      uint32_t ppm;
      TSR_RETURN_IF_ERROR(tsr_status_annotate(tsr_parse_fraction(text, &ppm), "--%s", o->name));
      *(double *)o->dest = (double)ppm / TSR_PPM_ONE;
      return NULL;
    }
    case TSR_CLI_MIG_FACTOR: {
      double v;
      if (!tsr__parse_factor(text, &v) || v < (double)o->min || v > (double)o->max)
        return tsr_status_make(TSR_INVALID_ARGUMENT,
                               "--%s wants a number from %llu to %llu such as 0.01 or 2, not '%s'", o->name,
                               (unsigned long long)o->min, (unsigned long long)o->max, text);
      *(double *)o->dest = v;
      return NULL;
    }
    case TSR_CLI_MIG_CHOICE:
      for (int i = 0; o->choices[i]; i++)
        if (!strcasecmp(o->choices[i], text)) {
          *(int *)o->dest = i;
          return NULL;
        }
      char names[160];
      tsr__choices_text(o->choices, names, sizeof(names));
      return tsr_status_make(TSR_INVALID_ARGUMENT, "--%s wants %s, not '%s'", o->name, names, text);
  }
  return tsr_status_make(TSR_INTERNAL, "--%s: unknown option kind", o->name);
}

bool tsr_cli_mig_parse(const tsr_cli_mig_cmd_t *cmd, int argc, char **argv, const tsr_cli_mig_opt_t *opts,
                       tsr_cli_mig_common_t *common, int *out_first, int *out_exit) {
  *out_first = argc;
  *out_exit = TSR_EXIT_USAGE;
  bool want_help = false;
  const tsr_cli_mig_opt_t shared[] = {
      {"gpu", 0, TSR_CLI_MIG_STRING, &common->gpu, 0, 0, NULL},
      {"json", 0, TSR_CLI_MIG_FLAG, &common->json, 0, 0, NULL},
      {"svg", 0, TSR_CLI_MIG_STRING, &common->svg, 0, 0, NULL},
      {"reconfig-times", 0, TSR_CLI_MIG_STRING, &common->reconfig, 0, 0, NULL},
      {"output", 'o', TSR_CLI_MIG_STRING, &common->out, 0, 0, NULL},
      {"help", 0, TSR_CLI_MIG_FLAG, &want_help, 0, 0, NULL},
  };
  size_t nshared = sizeof(shared) / sizeof(shared[0]), nopts = 0;
  while (opts[nopts].name) nopts++;
  const tsr_cli_mig_opt_t *rows[TSR__MAX_OPTS];
  struct option longs[TSR__MAX_OPTS + 1];
  char shorts[2 * TSR__MAX_OPTS + 2] = ":"; /* ':' first: a missing value is told apart */
  size_t n = nshared + nopts, ns = 1;
  if (n > TSR__MAX_OPTS) {
    tsr_cli_error("mig %s: too many options (internal limit %d)", cmd->name, TSR__MAX_OPTS);
    *out_exit = TSR_EXIT_INTERNAL;
    return false;
  }
  for (size_t i = 0; i < n; i++) {
    const tsr_cli_mig_opt_t *o = i < nshared ? &shared[i] : &opts[i - nshared];
    rows[i] = o;
    int has_arg = o->kind == TSR_CLI_MIG_FLAG ? no_argument : required_argument;
    longs[i] = (struct option){o->name, has_arg, NULL, TSR__LONG_BASE + (int)i};
    if (o->short_name) {
      shorts[ns++] = o->short_name;
      if (has_arg == required_argument) shorts[ns++] = ':';
    }
  }
  longs[n] = (struct option){NULL, 0, NULL, 0};
  shorts[ns] = 0;
  optind = 0; /* restart getopt; it skips argv[0], the subcommand's name */
  opterr = 0; /* our own one-line messages */
  int c;
  while ((c = getopt_long(argc, argv, shorts, longs, NULL)) != -1) {
    const tsr_cli_mig_opt_t *o = NULL;
    if (c >= TSR__LONG_BASE && c < TSR__LONG_BASE + (int)n) o = rows[c - TSR__LONG_BASE];
    for (size_t i = 0; i < n && !o; i++)
      if (rows[i]->short_name && rows[i]->short_name == c) o = rows[i];
    if (!o) {
      tsr_cli_error("mig %s: %s '%s' (try 'tessera mig %s --help')", cmd->name,
                    c == ':' ? "missing value for" : "unknown option", argv[optind - 1], cmd->name);
      return false;
    }
    tsr_status_t st = tsr__parse_value(o, optarg);
    if (st) {
      tsr_cli_error("mig %s: %s", cmd->name, tsr_status_message(st));
      tsr_status_free(st);
      return false;
    }
    if (want_help) {
      fputs(cmd->help, stdout);
      *out_exit = TSR_EXIT_OK;
      return false;
    }
  }
  if (cmd->operand && optind + 1 != argc) {
    tsr_cli_error("mig %s wants one %s (try 'tessera mig %s --help')", cmd->name, cmd->operand, cmd->name);
    return false;
  }
  *out_first = optind;
  *out_exit = TSR_EXIT_OK;
  return true;
}

tsr_status_t tsr_cli_mig_gen(const tsr_mig_model_t *model, const tsr_cli_mig_gen_args_t *args, tsr_mig_gen_t *out_gen) {
  TSR_RETURN_IF_ERROR(tsr_mig_gen_preset(model, args->scaling, args->times, out_gen));
  if (args->p_sup >= 0) out_gen->p_sup = args->p_sup;
  return NULL;
}

/* ---- results ------------------------------------------------------------ */

tsr_status_t tsr_cli_mig_model(const tsr_cli_mig_common_t *c, tsr_mig_model_t *out_model) {
  TSR_RETURN_IF_ERROR(tsr_mig_model_get(c->gpu ? c->gpu : "A100", out_model));
  if (c->reconfig) TSR_RETURN_IF_ERROR(tsr_mig_model_load_reconfig_csv(out_model, c->reconfig));
  return NULL;
}

int tsr_cli_mig_check(const tsr_mig_plan_t *p, const tsr_mig_tasks_t *t) {
  tsr_status_t st = tsr_mig_plan_validate(p, t);
  if (!st) return TSR_EXIT_OK;
  tsr_cli_error("internal error: %s produced an invalid plan: %s", p->algorithm, tsr_status_message(st));
  tsr_status_free(st);
  return TSR_EXIT_INTERNAL;
}

int tsr_cli_mig_out_open(const tsr_cli_mig_common_t *c, FILE **out_file) {
  *out_file = stdout;
  if (c->out && !(*out_file = fopen(c->out, "w"))) {
    *out_file = NULL;
    return tsr_cli_fail(tsr_status_from_errno(errno, "%s: cannot write", c->out));
  }
  return TSR_EXIT_OK;
}

int tsr_cli_mig_out_close(const tsr_cli_mig_common_t *c, FILE *file, tsr_status_t st) {
  if (file && file != stdout && fclose(file) != 0 && !st) st = tsr_status_from_errno(errno, "%s: write failed", c->out);
  return tsr_cli_fail(st);
}

int tsr_cli_mig_print_json(const tsr_cli_mig_common_t *c, const tsr_json_writer_t *w) {
  FILE *out;
  int rc = tsr_cli_mig_out_open(c, &out);
  if (rc) return rc;
  return tsr_cli_mig_out_close(c, out, tsr_json_writer_print(w, out));
}

int tsr_cli_mig_write_svg(const char *path, const tsr_mig_plan_t *p, const tsr_mig_tasks_t *t) {
  FILE *f = fopen(path, "w");
  if (!f) return tsr_cli_fail(tsr_status_from_errno(errno, "%s: cannot write", path));
  tsr_status_t st = tsr_mig_plan_write_svg(p, t, f);
  if (fclose(f) != 0 && !st) st = tsr_status_from_errno(errno, "%s: write failed", path);
  return st ? tsr_cli_fail(st) : TSR_EXIT_OK;
}

int tsr_cli_mig_emit(const tsr_cli_mig_common_t *c, const tsr_mig_plan_t *p, const tsr_mig_tasks_t *t) {
  FILE *out;
  int rc = tsr_cli_mig_out_open(c, &out);
  if (rc) return rc;
  tsr_status_t st = c->json ? tsr_mig_plan_write_json(p, t, out) : tsr_mig_plan_write_text(p, t, out);
  if ((rc = tsr_cli_mig_out_close(c, out, st))) return rc;
  return c->svg ? tsr_cli_mig_write_svg(c->svg, p, t) : TSR_EXIT_OK;
}
