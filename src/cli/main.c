/* main.c: the `tessera` command: global options, then one subcommand family.
 *
 *   tessera [--socket PATH] <command> [args...]
 *
 * Each family lives in its own file (lease.c, devices.c, ...) and is listed in
 * the table below. */
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "proto/proto.h"

typedef struct {
  const char *name;
  int (*main)(const tsr_cli_globals_t *g, int argc, char **argv);
  const char *summary;
} tsr_cli_command_t;

static const tsr_cli_command_t tsr__commands[] = {
    /* one row per subcommand family; keep in the order `--help` shows them */
    {"lease", tsr_cli_lease_main, "create, release, list and show GPU leases"},
    {"devices", tsr_cli_devices_main, "the node's GPUs and what is leased on each"},
    {"daemon", tsr_cli_daemon_main, "run the node daemon: the tesserad beside tessera"},
    {"demo", tsr_cli_demo_main, "a private daemon, a few leases, an expiry: a tour"},
    {"mig", tsr_cli_mig_main, "plan, simulate and run batches of jobs on MIG GPUs"},
    {"run", tsr_cli_run_main, "run a command held to a lease (libtessera-cuda.so preloaded)"},
    {"top", tsr_cli_top_main, "the node at a glance: leases, their use and processes, live"},
    {NULL, NULL, NULL},
};

void tsr_cli_error(const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  fprintf(stderr, "tessera: %s\n", msg);
}

/* Codes not listed are 4: io_error (a full disk on the daemon's side),
 * data_loss, internal, out_of_memory, unimplemented, and names a newer
 * daemon may add. */
static const struct {
  const char *code;
  int exit;
} tsr__exits[] = {
    {"permission_denied", TSR_EXIT_REFUSED},
    {"not_found", TSR_EXIT_REFUSED},
    {"conflict", TSR_EXIT_REFUSED},
    {"cancelled", TSR_EXIT_REFUSED},
    {"resource_exhausted", TSR_EXIT_REFUSED},
    {"failed_precondition", TSR_EXIT_REFUSED},
    {"already_exists", TSR_EXIT_REFUSED},
    {TSR_PROTO_ERR_UNKNOWN_USER, TSR_EXIT_REFUSED},
    {TSR_PROTO_ERR_BUSY, TSR_EXIT_REFUSED},
    {"invalid_argument", TSR_EXIT_USAGE},
    {TSR_PROTO_ERR_BAD_REQUEST, TSR_EXIT_USAGE},
    {TSR_PROTO_ERR_UNKNOWN_OP, TSR_EXIT_USAGE},
    {TSR_PROTO_ERR_UNKNOWN_FIELD, TSR_EXIT_USAGE},
    {TSR_PROTO_ERR_LINE_TOO_LONG, TSR_EXIT_USAGE},
    {"unavailable", TSR_EXIT_UNREACHABLE},
};

int tsr_cli_exit_for_code(const char *code) {
  for (size_t i = 0; code && i < sizeof(tsr__exits) / sizeof(tsr__exits[0]); i++)
    if (strcmp(tsr__exits[i].code, code) == 0) return tsr__exits[i].exit;
  return TSR_EXIT_INTERNAL;
}

int tsr_cli_exit_for_status(tsr_status_t st) {
  return st ? tsr_cli_exit_for_code(tsr_status_code_name(tsr_status_code(st))) : TSR_EXIT_OK;
}

int tsr_cli_fail(tsr_status_t st) {
  int rc = tsr_cli_exit_for_status(st);
  if (st) tsr_cli_error("%s", tsr_status_message(st));
  tsr_status_free(st);
  return rc;
}

static void tsr__usage(FILE *out) {
  fprintf(out,
          "usage: tessera [--socket PATH] <command> [options]\n"
          "\n"
          "tessera shares the GPUs of one node: time-bounded leases of GPU memory and\n"
          "compute, enforced in every CUDA process.\n"
          "\n"
          "commands:\n");
  for (const tsr_cli_command_t *c = tsr__commands; c->name; c++) fprintf(out, "  %-10s %s\n", c->name, c->summary);
  fprintf(out,
          "  %-10s %s\n"
          "\n"
          "global options (before the command):\n"
          "  --socket PATH  the daemon's socket (default: $TESSERA_SOCKET, else\n"
          "                 " TSR_PROTO_DEFAULT_SOCKET
          ")\n"
          "  --help         this text; `tessera <command> --help` for a command's\n"
          "  --version      print the version\n"
          "\n"
          "exit status: 0 success, 1 refused by the daemon, 2 usage error,\n"
          "3 daemon unreachable, 4 internal or I/O error.\n",
          "version", "print the version");
}

int main(int argc, char **argv) {
  tsr_cli_globals_t g = {0};
  static const struct option opts[] = {
      {"socket", required_argument, NULL, 's'},
      {"help", no_argument, NULL, 'h'},
      {"version", no_argument, NULL, 'V'},
      {NULL, 0, NULL, 0},
  };
  /* '+' stops at the first non-option: what follows belongs to the command. */
  int c;
  opterr = 0;
  while ((c = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
    switch (c) {
      case 's': g.socket_path = optarg; break;
      case 'h': tsr__usage(stdout); return TSR_EXIT_OK;
      case 'V': printf("tessera %s\n", TESSERA_VERSION); return TSR_EXIT_OK;
      default:
        tsr_cli_error("unknown global option '%s' (try 'tessera --help')", argv[optind - 1]);
        return TSR_EXIT_USAGE;
    }
  }
  if (!g.socket_path) g.socket_path = getenv("TESSERA_SOCKET");
  if (!g.socket_path || !*g.socket_path) g.socket_path = TSR_PROTO_DEFAULT_SOCKET;
  if (optind >= argc) {
    tsr__usage(stderr);
    return TSR_EXIT_USAGE;
  }
  int first = optind;
  const char *name = argv[first];
  if (strcmp(name, "version") == 0) {
    printf("tessera %s\n", TESSERA_VERSION);
    return TSR_EXIT_OK;
  }
  if (strcmp(name, "help") == 0) {
    tsr__usage(stdout);
    return TSR_EXIT_OK;
  }
  for (const tsr_cli_command_t *cmd = tsr__commands; cmd->name; cmd++) {
    if (strcmp(cmd->name, name) == 0) {
      optind = 0; /* let the command run getopt afresh on its own argv */
      opterr = 1;
      return cmd->main(&g, argc - first, argv + first);
    }
  }
  tsr_cli_error("unknown command '%s' (try 'tessera --help')", name);
  return TSR_EXIT_USAGE;
}
