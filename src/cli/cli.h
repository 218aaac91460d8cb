/* cli/cli.h: what the subcommands of the `tessera` command share.
 *
 * main.c parses the global options (those before the subcommand) into a
 * tsr_cli_globals_t and calls the subcommand family's entry point with the
 * remaining arguments (argv[0] is the family's name, e.g. "lease").
 * Entry points return the process exit status (see docs/cli.md):
 *   0 success, 1 the daemon refused (denied, not found, no capacity, ...),
 *   2 usage error, 3 daemon unreachable, 4 internal or I/O error. */
#ifndef TESSERA_CLI_CLI_H
#define TESSERA_CLI_CLI_H

#include <stdbool.h>

enum {
  TSR_EXIT_OK = 0,
  TSR_EXIT_REFUSED = 1,
  TSR_EXIT_USAGE = 2,
  TSR_EXIT_UNREACHABLE = 3,
  TSR_EXIT_INTERNAL = 4,
};

typedef struct tsr_cli_globals_s {
  /* Daemon socket: --socket, else $TESSERA_SOCKET, else the default path. */
  const char *socket_path;
  /* Path of the running tessera executable (for commands that start a daemon). */
  const char *self_exe;
} tsr_cli_globals_t;

/* Prints "tessera: <message>" on stderr. */
void tsr_cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Subcommand families, one file each. */
int tsr_cli_lease_main(const tsr_cli_globals_t *g, int argc, char **argv);
int tsr_cli_devices_main(const tsr_cli_globals_t *g, int argc, char **argv);
int tsr_cli_daemon_main(const tsr_cli_globals_t *g, int argc, char **argv);
int tsr_cli_demo_main(const tsr_cli_globals_t *g, int argc, char **argv);
int tsr_cli_mig_main(const tsr_cli_globals_t *g, int argc, char **argv);

#endif
