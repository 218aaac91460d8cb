/* daemon/lifecycle.h: the daemon's part of every create and release, given
 * to the lease service as its hooks (lifecycle.c). */
#ifndef TESSERA_DAEMON_LIFECYCLE_H
#define TESSERA_DAEMON_LIFECYCLE_H

#include "daemon/daemon.h"

/* Gives d->leases the daemon's part of every create and release
 * (lifecycle.c): a new lease's region and audit line, a release's audit
 * line, and the end of a released lease. */
void tsr_daemon_lease_hooks(tsr_daemon_t *d);

#endif
