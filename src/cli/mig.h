/* cli/mig.h: what the `tessera mig` subcommands share (mig_common.c).
 *
 * One file per subcommand family: mig_plan.c (plan, compare),
 * mig_generate.c, mig_simulate.c, mig_run.c; mig.c dispatches. Options are
 * declared as tables and parsed by tsr_cli_mig_parse(), so every number and
 * duration goes through base/units' strict parsers and every bad value is
 * the same kind of one-line usage error. Every plan printed has passed
 * tsr_mig_plan_validate(); every JSON text is written by base/json's writer. */
#ifndef TESSERA_CLI_MIG_H
#define TESSERA_CLI_MIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/json.h"
#include "mig/mig.h"

/* ---- options ------------------------------------------------------------ */

/* The options every subcommand takes. */
typedef struct tsr_cli_mig_common_s {
  const char *gpu;      /* --gpu MODEL; NULL: A100 */
  const char *reconfig; /* --reconfig-times CSV */
  bool json;            /* --json */
  const char *svg;      /* --svg FILE */
  const char *out;      /* --output FILE, -o FILE; NULL: standard output */
} tsr_cli_mig_common_t;

#define TSR_CLI_MIG_COMMON_HELP                                                            \
  "  --gpu MODEL            A30, A100, H100, H200 or B200 (default A100)\n"                \
  "  --json                 print JSON instead of a table\n"                               \
  "  --svg FILE             also write an SVG Gantt chart of the plan\n"                   \
  "  --reconfig-times CSV   instance create/destroy times (gpu,size,create_s,destroy_s)\n" \
  "  -o, --output FILE      write to FILE instead of standard output\n"                    \
  "  --help                 this text\n"

/* What an option's value is, how it is parsed, and what `dest` points to. */
typedef enum tsr_cli_mig_kind_e {
  TSR_CLI_MIG_FLAG,     /* no value; bool: set */
  TSR_CLI_MIG_STRING,   /* const char *: the text as given */
  TSR_CLI_MIG_COUNT,    /* uint64_t: a whole number in [min, max] (tsr_parse_u64) */
  TSR_CLI_MIG_DURATION, /* double, seconds: with its unit, 10ms or 2s (tsr_parse_duration) */
  TSR_CLI_MIG_FRACTION, /* double in [0, 1]: 0.5 or 50% (tsr_parse_fraction) */
  TSR_CLI_MIG_FACTOR,   /* double in [min, max]: digits with an optional decimal point */
  TSR_CLI_MIG_CHOICE,   /* int: the index of the value in `choices` (any case) */
} tsr_cli_mig_kind_t;

/* One option of a subcommand's table. */
typedef struct tsr_cli_mig_opt_s {
  const char *name; /* long name without "--" */
  char short_name;  /* 'n' for -n, or 0 */
  tsr_cli_mig_kind_t kind;
  void *dest;
  uint64_t min, max;          /* COUNT and FACTOR bounds */
  const char *const *choices; /* CHOICE: the names, NULL-terminated */
} tsr_cli_mig_opt_t;

/* A subcommand: its name, its --help text, and its operand when it takes
 * exactly one ("TASKS.csv"; NULL when it checks its operands itself). */
typedef struct tsr_cli_mig_cmd_s {
  const char *name;
  const char *help;
  const char *operand;
} tsr_cli_mig_cmd_t;

/* Parses `argv` (argv[0] is the subcommand's name) against the common
 * options and the subcommand's `opts` (ended by a row whose name is NULL). True when the command
 * goes on, with *out_first the index of its first operand (operands may come
 * between options). False when it ends here, with *out_exit its exit status:
 * TSR_EXIT_OK after printing the help for --help, TSR_EXIT_USAGE after a
 * one-line error naming the option and what it wants, or saying which
 * operand is missing. */
bool tsr_cli_mig_parse(const tsr_cli_mig_cmd_t *cmd, int argc, char **argv, const tsr_cli_mig_opt_t *opts,
                       tsr_cli_mig_common_t *common, int *out_first, int *out_exit);

/* The synthetic-batch options of generate and simulate. */
typedef struct tsr_cli_mig_gen_args_s {
  uint64_t tasks;      /* -n, --tasks N */
  const char *scaling; /* --scaling poor|mixed|good */
  const char *times;   /* --times wide|narrow */
  uint64_t seed;       /* --seed N */
  double p_sup;        /* --p-sup F; < 0: the preset's */
} tsr_cli_mig_gen_args_t;

#define TSR_CLI_MIG_GEN_ARGS_DEFAULT \
  { 15, "mixed", "wide", 1, -1 }

/* Their rows of an option table; `max_tasks` bounds -n. */
#define TSR_CLI_MIG_GEN_OPTS(args, max_tasks)                              \
  {"tasks", 'n', TSR_CLI_MIG_COUNT, &(args)->tasks, 1, (max_tasks), NULL}, \
      {"scaling", 0, TSR_CLI_MIG_STRING, &(args)->scaling, 0, 0, NULL},    \
      {"times", 0, TSR_CLI_MIG_STRING, &(args)->times, 0, 0, NULL}, {      \
    "seed", 0, TSR_CLI_MIG_COUNT, &(args)->seed, 0, UINT64_MAX, NULL       \
  }

/* The generator they describe for `model`. */
TSR_MUST_USE tsr_status_t tsr_cli_mig_gen(const tsr_mig_model_t *model, const tsr_cli_mig_gen_args_t *args,
                                          tsr_mig_gen_t *out_gen);

/* ---- results ------------------------------------------------------------ */

/* The model of --gpu, with the times of --reconfig-times. */
TSR_MUST_USE tsr_status_t tsr_cli_mig_model(const tsr_cli_mig_common_t *c, tsr_mig_model_t *out_model);

/* TSR_EXIT_OK if the plan is valid, else reports the planner's bug. */
int tsr_cli_mig_check(const tsr_mig_plan_t *plan, const tsr_mig_tasks_t *tasks);

/* Opens where results go: standard output, or --output FILE. */
int tsr_cli_mig_out_open(const tsr_cli_mig_common_t *c, FILE **out_file);

/* Closes it again; reports `st`, the writing's status (consumed), or else a
 * failed close, as one line. Returns the exit status. */
int tsr_cli_mig_out_close(const tsr_cli_mig_common_t *c, FILE *file, tsr_status_t st);

/* Prints the writer's JSON text to the output. */
int tsr_cli_mig_print_json(const tsr_cli_mig_common_t *c, const tsr_json_writer_t *w);

/* Writes the plan's SVG Gantt chart to `path`. */
int tsr_cli_mig_write_svg(const char *path, const tsr_mig_plan_t *plan, const tsr_mig_tasks_t *tasks);

/* Prints the plan as text or JSON, and writes the SVG if --svg asked. */
int tsr_cli_mig_emit(const tsr_cli_mig_common_t *c, const tsr_mig_plan_t *plan, const tsr_mig_tasks_t *tasks);

/* ---- the subcommands ---------------------------------------------------- */

int tsr_cli_mig_plan(int argc, char **argv);
int tsr_cli_mig_compare(int argc, char **argv);
int tsr_cli_mig_generate(int argc, char **argv);
int tsr_cli_mig_simulate(int argc, char **argv);
int tsr_cli_mig_run(int argc, char **argv);

#endif
