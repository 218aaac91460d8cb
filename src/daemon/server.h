/* daemon/server.h: tesserad's event loop (server.c). */
#ifndef TESSERA_DAEMON_SERVER_H
#define TESSERA_DAEMON_SERVER_H

#include "daemon/daemon.h"

/* Runs the event loop on listening socket `listen_fd` until SIGTERM/SIGINT.
 * Returns 0 on a clean stop. */
int tsr_server_run(tsr_daemon_t *d, int listen_fd);

#endif
