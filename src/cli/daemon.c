/* daemon.c: `tessera daemon`: runs tesserad in the foreground. */
#include "cli/cli.h"
#include "daemon/daemon.h"

int tsr_cli_daemon_main(const tsr_cli_globals_t *g, int argc, char **argv) {
  (void)g; /* the daemon takes its own --socket */
  return tsr_daemon_main(argc, argv);
}
