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
#include <stdint.h>

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
int tsr_cli_top_main(const tsr_cli_globals_t *g, int argc, char **argv);

/* ---- `tessera top`'s pieces (top.c), pure: no I/O, for the tests ---- */

#define TSR_CLI_TOP_BAR 10 /* cells of a memory bar */

/* "[####......]": `used` of `limit` in TSR_CLI_TOP_BAR cells, rounded to
 * the nearest; a lease that holds anything shows at least one '#', one
 * below its limit at most all but one. Always TSR_CLI_TOP_BAR + 2 bytes. */
void tsr_cli_top_bar(uint64_t used, uint64_t limit, char *buf, size_t cap);

/* "3.1/8.0 GiB": both in the binary unit that keeps the limit under 1000,
 * one decimal, truncated. `used` unknown (has_used false): "-/8.0 GiB". */
void tsr_cli_top_mem(bool has_used, uint64_t used, uint64_t limit, char *buf, size_t cap);

/* How much waiting `delta_ns` is per second of `elapsed_ns`: "120ms/s",
 * "1.5s/s", "0/s"; "-/s" when elapsed_ns is 0 (no earlier sample). */
void tsr_cli_top_rate(uint64_t delta_ns, uint64_t elapsed_ns, char *buf, size_t cap);

/* Copies `text` into buf as at most `width` terminal columns: bytes that
 * are not printable ASCII become '?', and a text cut short ends in '~'. */
void tsr_cli_top_fit(const char *text, size_t width, char *buf, size_t cap);

/* What one frame remembers for the next: each lease's throttled time, for
 * the per-second rate. Start from {0}; free with tsr_cli_top_history_free. */
typedef struct tsr_cli_top_history_s {
  struct tsr_cli_top_seen_s *v; /* (lease id, throttled_ns) */
  size_t count, cap;
  uint64_t at_ns; /* when they were read (any monotonic clock); 0: never */
} tsr_cli_top_history_t;
void tsr_cli_top_history_free(tsr_cli_top_history_t *history);

/* Renders the "top" object of a `top` reply (`len` bytes) as text: after
 * the line `title` (may be NULL), lines of at most `width` - 1 columns (a
 * width under 20 counts as 20), each ending in a newline. With `history`
 * (may be NULL) each lease's throttled rate is over the time from
 * history->at_ns to `now_ns` (one monotonic clock), and history then holds
 * this frame's samples, at `now_ns`; without it, or for a lease it lacks,
 * the rate is "-/s". *out_text is malloc'd (free it). TSR_DATA_LOSS, with
 * nothing rendered and history unchanged, for an object that is not what
 * the daemon writes. */
TSR_MUST_USE tsr_status_t tsr_cli_top_render(const char *top, size_t len, const char *title, size_t width,
                                             tsr_cli_top_history_t *history, uint64_t now_ns, char **out_text);

#endif
