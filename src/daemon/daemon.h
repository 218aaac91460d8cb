/* daemon/daemon.h: tesserad's parts and how they meet.
 *
 *   main.c      options, configuration, devices, start-up and shutdown
 *   server.c    the event loop: socket, connections, expiry timer, signals
 *   handlers.c  one function per protocol op
 *   identity.c  who is on the other end of a connection (SO_PEERCRED)
 *   audit.c     the audit log, one JSON line per event
 *   regions.c   the shared region of every active lease
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
#include "tessera/region.h"

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

/* ---- audit log (audit.c) ---- */

typedef struct tsr_audit_s tsr_audit_t;

typedef struct tsr_audit_config_s {
  const char *path;   /* absolute; its directory must pass tsr_fs_check_private_dir */
  uint64_t max_bytes; /* rotate past this size; 0 = never */
  uint32_t keep;      /* rotated files kept (audit.log.1 ...); 0 = keep all */
  uint32_t deny_rate; /* refusals per user per second written in full */
} tsr_audit_config_t;

/* What an expiry line adds. */
typedef struct tsr_audit_expiry_s {
  uint64_t late_ns;     /* how long after its deadline the lease ended */
  bool during_downtime; /* the deadline passed while no daemon ran */
} tsr_audit_expiry_t;

/* Opens (creating, mode 0640) the log; refuses a directory others can write,
 * a link, or a file that is not the daemon's own. */
tsr_status_t tsr_audit_open(const tsr_audit_config_t *config, tsr_audit_t **out_audit);
/* Writes what is pending and closes. */
void tsr_audit_close(tsr_audit_t *audit);
/* Writes one "create", "release" or "expire" line now (with the refusal
 * lines gathered before it). `actor` is NULL and `expiry` set for expiry.
 * Fails (TSR_IO_ERROR, or out of memory) when the line is not in the file:
 * the caller must then fail the request and undo it. */
tsr_status_t tsr_audit_lease(tsr_audit_t *audit, const char *event, const tsr_identity_t *actor,
                             const tsr_lease_t *lease, const tsr_audit_expiry_t *expiry);
/* Records a refusal: the first `deny_rate` of a user per second as "deny"
 * lines, the rest counted into one "deny_summary" line per user and second.
 * Gathered, not written: see tsr_audit_flush. Never fails the caller. */
void tsr_audit_deny(tsr_audit_t *audit, const tsr_identity_t *actor, const char *op,
                    const char *code, const char *message, uint64_t now_mono_ns);
/* Writes the gathered refusal lines (one write), after summing up the
 * seconds that are over. The event loop calls it after each batch, before
 * that batch's replies, and once a second. */
void tsr_audit_flush(tsr_audit_t *audit, uint64_t now_mono_ns);
/* deny_summary lines written so far. */
uint64_t tsr_audit_summaries(const tsr_audit_t *audit);

/* ---- the shared regions (regions.c) ---- */

typedef struct tsr_regions_s tsr_regions_t;

/* Opens (creating, mode 0711) the region directory; refuses one that
 * tsr_fs_check_private_dir refuses. */
tsr_status_t tsr_regions_open(const char *dir, tsr_regions_t **out_regions);
void tsr_regions_close(tsr_regions_t *regions);
const char *tsr_regions_dir(const tsr_regions_t *regions);
/* The region of active lease `lease` on device `device`: an intact one left
 * by an earlier daemon is adopted with its counters, else one is made. */
tsr_status_t tsr_regions_add(tsr_regions_t *regions, const tsr_lease_t *lease,
                             const tsr_device_t *device);
/* Marks lease `id`'s region ended (every charge fails from now on), unmaps
 * it and removes its file. */
void tsr_regions_end(tsr_regions_t *regions, uint64_t id, tsr_region_state_t state);
/* The mapping of lease `id`, or NULL. */
tsr_region_t *tsr_regions_find(const tsr_regions_t *regions, uint64_t id);
/* Removes region files of leases that are not active (after start-up). */
void tsr_regions_sweep(tsr_regions_t *regions);
/* Frees the slots of exited processes in every region (the reaper, once a
 * second). Returns the slots freed; *out_bytes gets the bytes credited. */
uint32_t tsr_regions_reap(tsr_regions_t *regions, uint64_t *out_bytes);

/* ---- the daemon's state, shared by server.c and handlers.c ---- */

typedef struct tsr_daemon_s {
  tsr_config_t config;
  tsr_lease_service_t *leases;
  tsr_audit_t *audit;
  tsr_regions_t *regions;
  tsr_lease_t history[TSR_HISTORY_MAX]; /* ring of ended leases */
  size_t history_next, history_count;
  uint64_t requests, expired;
  uint64_t started_wall_ns; /* when this daemon started: earlier deadlines fell due while none ran */
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
