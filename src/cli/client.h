/* cli/client.h: talking to the daemon from a subcommand. */
#ifndef TESSERA_CLI_CLIENT_H
#define TESSERA_CLI_CLIENT_H

#include <jansson.h>

#include "cli/cli.h"

/* Connects, sends `request` (consumed) and returns the reply in *out_reply
 * (a new reference) when it is {"ok": true}. Otherwise prints one line on
 * stderr and returns the exit status to use (never TSR_EXIT_OK). */
int tsr_cli_call(const tsr_cli_globals_t *g, json_t *request, json_t **out_reply);

/* Prints `value` as indented JSON on stdout. */
void tsr_cli_print_json(const json_t *value);

#endif
