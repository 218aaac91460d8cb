/* daemon/handlers.h: the protocol's ops (handlers.c): one request line in,
 * one reply object out; leases that fall due; and the ended leases kept for
 * `lease show`. */
#ifndef TESSERA_DAEMON_HANDLERS_H
#define TESSERA_DAEMON_HANDLERS_H

#include <stdbool.h>
#include <stddef.h>

#include "base/json.h"
#include "daemon/daemon.h"
#include "daemon/identity.h"
#include "lease/lease.h"

/* Handles one request line from `who` (`len` bytes, no newline) and writes
 * the whole reply object to `w`. */
void tsr_daemon_handle(tsr_daemon_t *d, const tsr_identity_t *who, const char *line, size_t len, tsr_json_writer_t *w);

/* Ends every lease that is due (called by the expiry timer). True if a due
 * lease could not be ended (its lock file would not go): retry later. */
bool tsr_daemon_expire(tsr_daemon_t *d);

/* Records an ended lease for `lease show`. */
void tsr_daemon_remember(tsr_daemon_t *d, const tsr_lease_t *lease);

/* Writes lease `lease` as a reply carries it (with what its processes use
 * when it has a region). */
void tsr_daemon_lease_write(tsr_daemon_t *d, tsr_json_writer_t *w, const tsr_lease_t *lease, uint64_t now_wall_ns);

#endif
