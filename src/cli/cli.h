/* cli/cli.h: what the subcommands of the `tessera` command share.
 *
 * main.c parses the global options (those before the subcommand) into a
 * tsr_cli_globals_t and calls the subcommand family's entry point with the
 * remaining arguments (argv[0] is the family's name, e.g. "lease").
 * Entry points return the process exit status (see docs/cli.md):
 *   0 success, 1 the daemon refused (denied, not found, no capacity, ...),
 *   2 usage error, 3 daemon unreachable, 4 internal or I/O error.
 * tsr_cli_exit_for_code is the one place that turns an error into one. */
#ifndef TESSERA_CLI_CLI_H
#define TESSERA_CLI_CLI_H

#include <stdbool.h>
#include <stddef.h>

#include "tessera/status.h"

enum {
  TSR_EXIT_OK = 0,
  TSR_EXIT_REFUSED = 1,
  TSR_EXIT_USAGE = 2,
  TSR_EXIT_UNREACHABLE = 3,
  TSR_EXIT_INTERNAL = 4,
};

typedef struct tsr_cli_globals_s {
  /* Daemon socket: --socket, else $TESSERA_SOCKET, else TSR_PROTO_DEFAULT_SOCKET. */
  const char *socket_path;
} tsr_cli_globals_t;

/* Prints "tessera: <message>" on stderr. */
void tsr_cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The exit status for an error code: a name the daemon replies with
 * ("not_found", "io_error", "unknown_field", ...), which is also how
 * tsr_status_code_name names a status code. 1 for refusals, 2 for
 * invalid_argument and the protocol errors a request causes, 3 for
 * unavailable, 4 for I/O, internal errors and any name it does not know
 * (NULL included). The CLI's only map from errors to exit statuses. */
int tsr_cli_exit_for_code(const char *code);

/* tsr_cli_exit_for_code of the status's code name; TSR_EXIT_OK for NULL. */
int tsr_cli_exit_for_status(tsr_status_t status);

/* Prints the status's message as one line, frees it and returns its exit
 * status (tsr_cli_exit_for_status). */
int tsr_cli_fail(tsr_status_t status);

/* The tesserad executable `tessera daemon` and `tessera demo` run: the one
 * beside the running tessera (/proc/self/exe), else the first on PATH.
 * Writes its path into out[cap] and returns TSR_EXIT_OK, or prints one line
 * and returns TSR_EXIT_INTERNAL (an installation problem) if there is none. */
int tsr_cli_find_tesserad(char *out, size_t cap);

/* Subcommand families, one file each. */
int tsr_cli_lease_main(const tsr_cli_globals_t *g, int argc, char **argv);
int tsr_cli_devices_main(const tsr_cli_globals_t *g, int argc, char **argv);
int tsr_cli_daemon_main(const tsr_cli_globals_t *g, int argc, char **argv);
int tsr_cli_demo_main(const tsr_cli_globals_t *g, int argc, char **argv);
int tsr_cli_mig_main(const tsr_cli_globals_t *g, int argc, char **argv);
int tsr_cli_run_main(const tsr_cli_globals_t *g, int argc, char **argv);

#endif
