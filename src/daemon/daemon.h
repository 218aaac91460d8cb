/* daemon/daemon.h: tesserad's parts and how they meet.
 *
 *   main.c      options, configuration, devices, start-up and shutdown
 *   server.c    the event loop: socket, connections, expiry timer, signals
 *   handlers.c  one function per protocol op
 *   identity.c  who is on the other end of a connection (SO_PEERCRED)
 *   audit.c     the audit log, one JSON line per event
 *
 * Everything runs on one thread, the event loop's; nothing here locks. */
#ifndef TESSERA_DAEMON_DAEMON_H
#define TESSERA_DAEMON_DAEMON_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/json.h"
#include "daemon/config.h"
#include "tessera/lease.h"

#define TSR_HISTORY_MAX 1024 /* ended leases kept for `lease show` */

/* ---- identity ---- */

typedef struct tsr_identity_s {
  uint32_t uid;
  uint32_t gid;
  int32_t pid;
  char user[TSR_LEASE_NAME_MAX];
  bool admin;
} tsr_identity_t;

/* Reads the peer's credentials from connected socket `fd` and resolves its
 * user name and admin right (uid 0, the daemon's own uid, or a member of
 * `admin_group`). */
tsr_status_t tsr_identity_from_socket(int fd, const char *admin_group, tsr_identity_t *out);

/* Resolves a user given by name (or by decimal uid) for "create for another
 * user". TSR_NOT_FOUND if there is no such user. */
tsr_status_t tsr_identity_lookup_user(const char *name_or_uid, uint32_t *out_uid,
                                      char *out_name, size_t cap);

/* ---- audit log ---- */

typedef struct tsr_audit_s tsr_audit_t;

tsr_status_t tsr_audit_open(const char *path, tsr_audit_t **out_audit);
void tsr_audit_close(tsr_audit_t *audit);
/* Appends one event: "create", "release", "expire" (with lease) or "deny"
 * (with op, code, message). `actor` is NULL for expiry. Never fails the
 * caller: a write error is logged once. */
void tsr_audit_lease(tsr_audit_t *audit, const char *event, const tsr_identity_t *actor,
                     const tsr_lease_t *lease, int64_t late_ns);
void tsr_audit_deny(tsr_audit_t *audit, const tsr_identity_t *actor, const char *op,
                    const char *code, const char *message);
/* Writes the gathered lines (one write). The event loop calls it once per
 * batch, before sending that batch's replies. */
void tsr_audit_flush(tsr_audit_t *audit);

/* ---- the daemon's state, shared by server.c and handlers.c ---- */

typedef struct tsr_daemon_s {
  tsr_config_t config;
  tsr_lease_service_t *leases;
  tsr_audit_t *audit;
  tsr_lease_t history[TSR_HISTORY_MAX]; /* ring of ended leases */
  size_t history_next, history_count;
  uint64_t requests, expired;
} tsr_daemon_t;

/* Handles one request line from `who` (`len` bytes, no newline) and writes
 * the whole reply object to `w`. */
void tsr_daemon_handle(tsr_daemon_t *d, const tsr_identity_t *who, const char *line, size_t len,
                       tsr_json_writer_t *w);

/* Ends every lease that is due (called by the expiry timer). True if a due
 * lease could not be ended (its lock file would not go): retry later. */
bool tsr_daemon_expire(tsr_daemon_t *d);

/* Records an ended lease for `lease show`. */
void tsr_daemon_remember(tsr_daemon_t *d, const tsr_lease_t *lease);

/* Runs the event loop on listening socket `listen_fd` until SIGTERM/SIGINT.
 * Returns 0 on a clean stop. */
int tsr_server_run(tsr_daemon_t *d, int listen_fd);

/* tesserad's main (also `tessera daemon`). */
int tsr_daemon_main(int argc, char **argv);

#endif
