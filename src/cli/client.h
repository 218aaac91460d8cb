/* cli/client.h: talking to the daemon from a subcommand. */
#ifndef TESSERA_CLI_CLIENT_H
#define TESSERA_CLI_CLIENT_H

#include <jansson.h>
#include <stdbool.h>

#include "cli/cli.h"

/* Connects, sends `request` (consumed) and returns the reply in *out_reply
 * (a new reference) when it is {"ok": true}. Otherwise prints one line on
 * stderr and returns the exit status to use (never TSR_EXIT_OK). */
int tsr_cli_call(const tsr_cli_globals_t *g, json_t *request, json_t **out_reply);

/* Options of the commands that take only flags and positionals: --json,
 * --help and, when `out_all` is not NULL, --all. Exactly `positionals`
 * arguments must remain; they are at argv[optind...] afterwards. Returns -1
 * after printing `usage` for --help, TSR_EXIT_USAGE (with a message) on a bad
 * option or argument count, else TSR_EXIT_OK. */
int tsr_cli_parse_flags(int argc, char **argv, const char *usage, int positionals,
                        bool *out_json, bool *out_all);

/* Prints `value` as indented JSON on stdout. */
void tsr_cli_print_json(const json_t *value);

#endif
