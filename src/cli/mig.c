/* cli/mig.c: `tessera mig`: plan, compare, simulate, generate and run batches
 * of jobs on MIG GPUs (libtessera-mig, seed 003). This file dispatches; each
 * subcommand family has a file of its own (see cli/mig.h). */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/mig.h"

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

static const struct {
  const char *name;
  int (*main)(int argc, char **argv);
} tsr__mig_commands[] = {
    {"plan", tsr_cli_mig_plan},         {"compare", tsr_cli_mig_compare}, {"generate", tsr_cli_mig_generate},
    {"simulate", tsr_cli_mig_simulate}, {"run", tsr_cli_mig_run},
};

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
  for (size_t i = 0; i < sizeof(tsr__mig_commands) / sizeof(tsr__mig_commands[0]); i++)
    if (!strcmp(cmd, tsr__mig_commands[i].name)) return tsr__mig_commands[i].main(argc - 1, argv + 1);
  tsr_cli_error("unknown mig command '%s' (try 'tessera mig --help')", cmd);
  return TSR_EXIT_USAGE;
}
