/* daemon/daemon.h: tesserad's parts and how they meet.
 *
 *   main.c      options, configuration, devices, start-up and shutdown
 *   server.c    the event loop: socket, connections, expiry timer, signals
 *   handlers.c  one function per protocol op
 *   lifecycle.c what a create and a release add (region, audit, signals, history): the lease service's hooks
 *   identity.c  who is on the other end of a connection (SO_PEERCRED)
 *   audit.c     the audit log, one JSON line per event
 *   regions.c   the shared region of every active lease
 *   userindex.c the per-user lease index beside the regions (the shim's node-wide mode)
 *   procs.c     one /proc snapshot per enforcement tick (pids, namespaces, the tree)
 *   roots.c     processes registered for a lease (lease.attach, `tessera run`)
 *   actions.c   SIGTERM, then SIGKILL after the grace, without touching a reused pid
 *   backstop.c  NVML's per-process memory, attributed to leases, checked
 *   top.c       the `top` request: a node's leases, their processes and use
 *   enforce.c   the enforcement tick, and what ends a lease's processes
 *
 * Everything runs on one thread, the event loop's; nothing here locks,
 * except /metrics: its HTTP server has a thread of its own (metrics_http.c)
 * that shares only the published snapshot, under a mutex. */
#ifndef TESSERA_DAEMON_DAEMON_H
#define TESSERA_DAEMON_DAEMON_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/json.h"
#include "daemon/config.h"
#include "lease/lease.h"
#include "region/region.h"

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
TSR_MUST_USE tsr_status_t tsr_identity_from_socket(int fd, const char *admin_group, tsr_identity_t *out);

/* Resolves a user given by name (or by decimal uid) for "create for another
 * user". TSR_NOT_FOUND if there is no such user. */
TSR_MUST_USE tsr_status_t tsr_identity_lookup_user(const char *name_or_uid, uint32_t *out_uid, char *out_name,
                                                   size_t cap);

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
TSR_MUST_USE tsr_status_t tsr_audit_open(const tsr_audit_config_t *config, tsr_audit_t **out_audit);
/* Writes what is pending and closes. */
void tsr_audit_close(tsr_audit_t *audit);
/* Writes one "create", "release" or "expire" line now (with the refusal
 * lines gathered before it). `actor` is NULL and `expiry` set for expiry.
 * Fails (TSR_IO_ERROR, or out of memory) when the line is not in the file:
 * the caller must then fail the request and undo it. */
TSR_MUST_USE tsr_status_t tsr_audit_lease(tsr_audit_t *audit, const char *event, const tsr_identity_t *actor,
                                          const tsr_lease_t *lease, const tsr_audit_expiry_t *expiry);
/* What a "backstop" line says: the backstop acted on processes. */
typedef struct tsr_audit_backstop_s {
  uint64_t lease;    /* 0: no lease (the deny rule) */
  const char *owner; /* the lease's owner, or the process's user */
  uint32_t uid;
  uint32_t device;
  const int32_t *pids; /* host pids acted on */
  size_t npids;
  uint64_t used_bytes;  /* what NVML says they use */
  uint64_t limit_bytes; /* the lease's limit; 0 without a lease */
  const char *action;   /* what was done: "signal" or "log" */
  const char *reason;
} tsr_audit_backstop_t;

/* Writes one "backstop" line now (with the refusals gathered before it). */
TSR_MUST_USE tsr_status_t tsr_audit_backstop(tsr_audit_t *audit, const tsr_audit_backstop_t *b);
/* Writes one "region" line: lease `lease`'s region was found saying what
 * the lease does not (`damage`: TSR_REGION_DAMAGE_* bits, "found"), and
 * whether the daemon's words were put back ("action"). */
TSR_MUST_USE tsr_status_t tsr_audit_region(tsr_audit_t *audit, const tsr_lease_t *lease, uint32_t damage,
                                           bool repaired);
/* Records a refusal: the first `deny_rate` of a user per second as "deny"
 * lines, the rest counted into one "deny_summary" line per user and second.
 * Gathered, not written: see tsr_audit_flush. Never fails the caller. */
void tsr_audit_deny(tsr_audit_t *audit, const tsr_identity_t *actor, const char *op, const char *code,
                    const char *message, uint64_t now_mono_ns);
/* Writes the gathered refusal lines (one write), after summing up the
 * seconds that are over. The event loop calls it after each batch, before
 * that batch's replies, and once a second. */
void tsr_audit_flush(tsr_audit_t *audit, uint64_t now_mono_ns);
/* deny_summary lines written so far. */
uint64_t tsr_audit_summaries(const tsr_audit_t *audit);
/* Refusals recorded (tsr_audit_deny calls) since the log was opened. */
uint64_t tsr_audit_denies(const tsr_audit_t *audit);

/* ---- the shared regions (regions.c) ---- */

typedef struct tsr_regions_s tsr_regions_t;

/* Opens (creating, mode 0711) the region directory; refuses one that
 * tsr_fs_check_private_dir refuses. */
TSR_MUST_USE tsr_status_t tsr_regions_open(const char *dir, tsr_regions_t **out_regions);
void tsr_regions_close(tsr_regions_t *regions);
/* What new regions get besides their lease: one stream's share of the
 * lease's SM share (ppm, 0 = all of it) and the bucket's burst (ns). */
void tsr_regions_set_compute(tsr_regions_t *regions, uint32_t stream_ppm, uint64_t burst_ns);
const char *tsr_regions_dir(const tsr_regions_t *regions);
/* The region directory, open (O_DIRECTORY), for the files kept beside the
 * regions. */
int tsr_regions_dir_fd(const tsr_regions_t *regions);

/* Told when a region is found to say what its lease does not (`damage`:
 * TSR_REGION_DAMAGE_* bits), once per kind of damage and region; `repaired`:
 * the daemon's words are back in place. */
typedef void (*tsr_regions_damage_fn)(void *ctx, uint64_t lease, uint32_t damage, bool repaired);
void tsr_regions_on_damage(tsr_regions_t *regions, tsr_regions_damage_fn fn, void *ctx);

/* The region of active lease `lease` on device `device`: an intact one left
 * by an earlier daemon is adopted with its counters, else one is made. */
TSR_MUST_USE tsr_status_t tsr_regions_add(tsr_regions_t *regions, const tsr_lease_t *lease, const tsr_device_t *device);
/* Whether lease `id` has a region. */
bool tsr_regions_has(const tsr_regions_t *regions, uint64_t id);
/* Gives lease `id`'s region state `state` (every charge fails from now on
 * unless it is active) and keeps it so. */
void tsr_regions_set_state(tsr_regions_t *regions, uint64_t id, tsr_region_state_t state);
/* Marks lease `id`'s region ended and removes its file. */
void tsr_regions_end(tsr_regions_t *regions, uint64_t id, tsr_region_state_t state);
/* Whether lease `id`'s region is ended while the lease is active (the
 * daemon's word, not the file's). Nothing in this daemon revokes a live
 * lease's region; a region an earlier tesserad's backstop revoked (before
 * over_limit, it applied the expiry action) is adopted as it is, and stays
 * so. */
bool tsr_regions_revoked(const tsr_regions_t *regions, uint64_t id);
/* Whether lease `id`'s region was ever found saying what its lease does not:
 * its tenants wrote what no shim writes, and nothing it says is trusted. */
bool tsr_regions_tampered(const tsr_regions_t *regions, uint64_t id);
/* A copy of lease `id`'s region as it is now, compared with what it must
 * say; the daemon's words are put back in place if a tenant changed them.
 * False when the lease has no region or it cannot be read. */
bool tsr_regions_read(tsr_regions_t *regions, uint64_t id, tsr_region_copy_t *out_copy);
/* What lease `id`'s processes report through its region, for people:
 * used and peak clamped to the lease's limit (what dead processes' slots
 * still hold left out), and the limit, state and shares the daemon's own.
 * False when it has no region. */
bool tsr_regions_stats(tsr_regions_t *regions, uint64_t id, tsr_region_stats_t *out_stats);
/* Removes region files of leases that are not active (after start-up). */
void tsr_regions_sweep(tsr_regions_t *regions);
/* Marks the slots of exited processes in every region (the reaper, once an
 * enforcement tick), through the liveness resolver `alive` (NULL: the region
 * library's default check); a tenant of the lease gives back what they held
 * (tsr_region_reclaim). Returns the slots marked; *out_bytes gets what they
 * hold. */
uint32_t tsr_regions_reap_with(tsr_regions_t *regions, tsr_region_alive_fn alive, void *ctx, uint64_t *out_bytes);
/* Whether lease `id` on `device` ran kernels since the last tick, as the
 * driver says: 1 yes, 0 no, -1 it cannot tell. */
typedef int (*tsr_regions_running_fn)(void *ctx, uint64_t id, uint32_t device);
/* The switching reserve, once per enforcement tick: a lease with an SM
 * share "runs" when `running` says so (NULL, or it cannot tell: when its
 * launch counters moved since the last tick). While two or more run on one
 * device and their shares add up to more than all of it less
 * `switch_cost_ppm` (the device time the GPU loses switching between their
 * contexts), each gets share x (1e6 - cost) / sum in force; otherwise its
 * own share. Returns how many leases are scaled down. */
uint32_t tsr_regions_share_tick(tsr_regions_t *regions, uint32_t switch_cost_ppm, tsr_regions_running_fn running,
                                void *ctx);

/* ---- the per-user lease index (userindex.c) ---- */

#define TSR_USER_INDEX_MAX 64 /* lease lines in one index */

/* Writes <region_dir>/user-<uid>.leases for `uid` from the active leases of
 * `table` (removes it when the user holds none). The file is the daemon's
 * (the user cannot rewrite it), readable by `uid` alone (a POSIX ACL entry,
 * else the user's primary group), written under a temporary name created
 * with O_EXCL|O_NOFOLLOW and renamed into place. Format (the shim parses it):
 *   tessera-leases 1
 *   <lease id> <device index> <device uuid or ->     one per lease, oldest first */
TSR_MUST_USE tsr_status_t tsr_user_index_update(int dir_fd, const tsr_lease_table_t *table, uint32_t uid);
/* At start: removes every index file, then writes one per user with leases. */
void tsr_user_index_rebuild(int dir_fd, const tsr_lease_table_t *table);
/* Writes <region_dir>/node.policy: "deny" or "pass" and a newline, the
 * daemon's own, mode 0644 (the shim reads it in the node-wide mode). */
TSR_MUST_USE tsr_status_t tsr_node_policy_write(int dir_fd, bool deny);

/* ---- the /proc snapshot (procs.c) ---- */

/* One process as the daemon's /proc shows it. */
typedef struct tsr_proc_s {
  int32_t pid; /* in the daemon's PID namespace (the host's, on a node) */
  int32_t ppid;
  uint32_t uid;         /* real uid */
  int32_t nspid;        /* innermost NSpid: the pid it sees itself as; = pid outside containers */
  uint64_t start_ticks; /* field 22 of /proc/PID/stat: the same in every namespace */
  uint64_t pidns;       /* inode of /proc/PID/ns/pid; 0 when it cannot be read */
} tsr_proc_t;

#define TSR_PROCS_MAX 65536 /* processes one snapshot holds; beyond, it is marked truncated */

typedef struct tsr_procs_s {
  tsr_proc_t *v; /* sorted by pid */
  size_t count, cap;
  uint32_t *by_ns, *by_ppid; /* indexes into v: by (pidns, nspid) and by ppid */
  size_t ns_cap, ppid_cap;
  uint64_t own_pidns;   /* the daemon's own PID namespace */
  uint64_t taken_ticks; /* when it was taken, in clock ticks since boot */
  uint64_t hz;          /* clock ticks per second */
  bool ns_unknown;      /* some process's namespace could not be read */
  bool truncated;       /* more than TSR_PROCS_MAX processes */
  bool fresh;           /* taken this tick (tsr_daemon_enforce clears it) */
} tsr_procs_t;

/* Takes a snapshot of /proc, replacing the one in *procs (start from {0}).
 * Bounded by TSR_PROCS_MAX; a process that goes while it is read is left out. */
void tsr_procs_scan(tsr_procs_t *procs);
void tsr_procs_free(tsr_procs_t *procs);
/* Process `pid` of the snapshot, or NULL. O(log n). */
const tsr_proc_t *tsr_procs_find(const tsr_procs_t *procs, int32_t pid);
/* Process `pid`'s real uid: from the snapshot, else read afresh (a process
 * newer than the snapshot). False if there is no such process. */
bool tsr_procs_uid(const tsr_procs_t *procs, int32_t pid, uint32_t *out_uid);
/* The host process a region slot names (its own pid, namespace and start
 * time), or NULL if the snapshot has none. O(log n). */
const tsr_proc_t *tsr_procs_resolve(const tsr_procs_t *procs, const tsr_region_proc_t *proc);
/* tsr_region_alive_fn over a snapshot (ctx: the tsr_procs_t, taken first
 * if it is not fresh: only a tenant in a container needs one): a process of
 * another namespace lives if the snapshot resolves it, or if the snapshot
 * cannot tell (it started about when the snapshot was taken, the snapshot
 * was cut short, or a process whose namespace could not be read has the
 * same innermost pid and start time): never reap what may live. A process of the
 * daemon's own namespace is looked up afresh. */
bool tsr_procs_alive(void *ctx, const tsr_region_proc_t *proc);
/* Calls `fn` for every process that descends from process `pid` (whose
 * start time must be `start_ticks`), not `pid` itself; at most `max`
 * processes. Returns how many were visited. */
size_t tsr_procs_descendants(const tsr_procs_t *procs, int32_t pid, uint64_t start_ticks, size_t max,
                             void (*fn)(void *ctx, const tsr_proc_t *proc), void *ctx);
/* The start time of live process `pid`, read afresh. False if it is gone. */
bool tsr_procs_start_of(int32_t pid, uint64_t *out_ticks);
/* The real, effective and saved uids of process `pid`, read afresh. False
 * if it is gone or its status does not read. */
bool tsr_procs_uids_of(int32_t pid, uint32_t out_uids[3]);

/* ---- roots: processes registered for a lease (roots.c) ---- */

#define TSR_ROOTS_PER_LEASE 64

typedef struct tsr_root_s {
  uint64_t lease;
  int32_t pid; /* the daemon's namespace (SO_PEERCRED gives it so) */
  uint64_t start_ticks;
} tsr_root_t;

typedef struct tsr_roots_s {
  tsr_root_t *v;
  size_t count, cap;
} tsr_roots_t;

/* Registers process (pid, start) for `lease`; a second registration of the
 * same process is a no-op. TSR_RESOURCE_EXHAUSTED past TSR_ROOTS_PER_LEASE. */
TSR_MUST_USE tsr_status_t tsr_roots_add(tsr_roots_t *roots, uint64_t lease, int32_t pid, uint64_t start_ticks);
/* Forgets every root of `lease`. */
void tsr_roots_forget_lease(tsr_roots_t *roots, uint64_t lease);
/* Forgets roots whose process is not in the snapshot. */
void tsr_roots_prune(tsr_roots_t *roots, const tsr_procs_t *procs);
void tsr_roots_free(tsr_roots_t *roots);

/* ---- actions: signals with a grace (actions.c) ---- */

typedef struct tsr_actions_s tsr_actions_t;

/* One process to signal: its pid in the daemon's namespace and start time. */
typedef struct tsr_target_s {
  int32_t pid;
  uint64_t start_ticks;
} tsr_target_t;

/* Whether processes of `uid` may never be signalled: root, the daemon's
 * user and admins (tsr_identity_uid_exempt with the admin group). */
typedef bool (*tsr_actions_exempt_fn)(void *ctx, uint32_t uid);

/* `exempt` (with `ctx`) is asked about every uid of every target. */
TSR_MUST_USE tsr_status_t tsr_actions_create(uint64_t grace_ns, tsr_actions_exempt_fn exempt, void *ctx,
                                             tsr_actions_t **out_actions);
void tsr_actions_free(tsr_actions_t *actions);
/* SIGTERM to each target not already being signalled, and SIGKILL to those
 * still alive `grace_ns` later (tsr_actions_tick). Whatever named them (a
 * region slot a tenant wrote, a process tree, NVML), a target is signalled
 * only if it is still the same process (its start time) and its real uid is
 * `owner_uid`, and none of its real, effective and saved uids is exempt:
 * no process of another user, of root, of the daemon's user or of an admin
 * is ever signalled. `lease` groups them (0: the deny rule, whose owner is
 * the process's own user). Returns how many got SIGTERM now. */
size_t tsr_actions_signal(tsr_actions_t *actions, uint64_t lease, uint32_t owner_uid, const tsr_target_t *targets,
                          size_t count, uint64_t now_mono_ns);
/* Targets refused since the actions were made: not the owner's, or exempt. */
uint64_t tsr_actions_refused(const tsr_actions_t *actions);
/* True while a grace period runs for lease `lease` (or, with lease 0, for
 * process `pid`). */
bool tsr_actions_pending(const tsr_actions_t *actions, uint64_t lease, int32_t pid);
/* Sends the SIGKILLs that are due, forgets targets that are gone. */
void tsr_actions_tick(tsr_actions_t *actions, uint64_t now_mono_ns);

/* ---- the NVML backstop (backstop.c) ---- */

typedef struct tsr_backstop_s tsr_backstop_t;
struct tsr_daemon_s;

/* Loads NVML (`library`, NULL: libnvidia-ml.so.1) and finds each of the
 * daemon's devices in it by UUID (by index when it has none). A device NVML
 * does not know, or a library without nvmlDeviceGetComputeRunningProcesses_v3,
 * is logged once and not watched. */
TSR_MUST_USE tsr_status_t tsr_backstop_open(const char *library, const tsr_device_t *devices, size_t count,
                                            tsr_backstop_t **out_backstop);
void tsr_backstop_close(tsr_backstop_t *backstop);
/* One round: reads every watched device's processes, attributes each to a
 * lease, and acts on leases over their limit and (policy deny) on unleased
 * processes of ordinary users. `procs` is this tick's snapshot. */
void tsr_backstop_run(tsr_backstop_t *backstop, struct tsr_daemon_s *d, const tsr_procs_t *procs, uint64_t now_mono_ns);

/* A tsr_regions_running_fn (ctx: the backstop, may be NULL): whether lease
 * `lease`'s processes ran kernels lately, by NVML's per-process SM samples
 * of the last round; -1 where the backstop cannot tell. */
int tsr_backstop_running(void *backstop, uint64_t lease, uint32_t device);
/* What NVML said lease `lease`'s processes use, in the last round. False
 * when the backstop did not see it (not watched, NVML failed). */
bool tsr_backstop_lease_used(tsr_backstop_t *backstop, uint64_t lease, uint64_t *out_bytes);

/* Whether the backstop watches device `device` (NVML knows it and answers). */
bool tsr_backstop_watches(const tsr_backstop_t *backstop, uint32_t device);

/* One GPU process as NVML lists it, attributed as a backstop round does. */
typedef struct tsr_backstop_proc_s {
  int32_t pid;         /* host pid */
  uint64_t used_bytes; /* NVML's used memory; 0 when it does not say */
  uint64_t lease;      /* the lease of the device it belongs to; 0: none */
} tsr_backstop_proc_t;

/* Device `device`'s compute processes from NVML, each attributed to a lease
 * by the backstop's rules (slot, root, the user's own lease) from snapshot
 * `procs`; acts on nothing. At most `cap` into `out`; returns how many, or
 * -1 when the device is not watched or NVML failed. */
long tsr_backstop_attribute(tsr_backstop_t *backstop, struct tsr_daemon_s *d, const tsr_procs_t *procs, uint32_t device,
                            tsr_backstop_proc_t *out, size_t cap);

/* NVML's SM utilisation per process on device `device` over the samples
 * after `since_us` (us since the epoch; tsr_device_nvml_process_sm). False
 * when it is unknown: not watched, or NVML cannot or did not tell. */
bool tsr_backstop_sm_util(tsr_backstop_t *backstop, uint32_t device, uint64_t since_us, tsr_device_proc_util_t *out,
                          size_t cap, size_t *out_count);

/* ---- the Prometheus endpoint (metrics.c, metrics_http.c, metrics_peer.c) ---- */

#define TSR_METRICS_BUCKETS 12                   /* request latency histogram */
#define TSR_METRICS_PERIOD_NS (250 * 1000000ull) /* the snapshot is rewritten at most this often */
/* Connections one client may hold at once: a local user (by uid) or a
 * remote address. One more is refused with 503. */
#define TSR_METRICS_PER_CLIENT 4
/* Connections in all. Past it, a new one is let in by closing the oldest
 * that is still sending its request (a scrape always gets in). */
#define TSR_METRICS_CONNECTIONS 64
extern const double tsr_metrics_request_buckets[TSR_METRICS_BUCKETS];

/* What the daemon counts for /metrics besides tsr_daemon_t's requests and
 * expired (the event loop's thread only). */
typedef struct tsr_daemon_counters_s {
  uint64_t created, released; /* leases */
  uint64_t reaped;            /* dead processes' memory given back */
  uint64_t backstop_actions;
  uint64_t request_bucket[TSR_METRICS_BUCKETS], request_sum_ns; /* their count is requests */
} tsr_daemon_counters_t;

/* One exposition, cut into runs of whole lines: node-wide lines (every
 * audience sees them, HELP and TYPE included) or the series of leases of
 * one owner. The event loop builds it; scrapes copy what their audience may
 * see, so the HTTP side never touches the lease table. */
typedef struct tsr_metrics_run_s {
  size_t end;     /* the run is text[end of the run before, end) */
  bool lease;     /* a lease's series: its owner's and the full audience's */
  uint32_t owner; /* with lease: the lease's owner uid */
} tsr_metrics_run_t;

typedef struct tsr_metrics_snapshot_s {
  char *text; /* NUL-terminated */
  size_t len;
  tsr_metrics_run_t *runs; /* in order, the last ends at len */
  size_t run_count;
} tsr_metrics_snapshot_t;

void tsr_metrics_snapshot_free(tsr_metrics_snapshot_t *snapshot);

typedef enum tsr_metrics_scope_e {
  TSR_METRICS_SCOPE_COUNTS = 0, /* the node-wide series only */
  TSR_METRICS_SCOPE_OWN,        /* the node-wide series and those of uid's own leases */
  TSR_METRICS_SCOPE_ALL,        /* every series, every lease with its owner */
} tsr_metrics_scope_t;

typedef struct tsr_metrics_audience_s {
  tsr_metrics_scope_t scope;
  uint32_t uid; /* with TSR_METRICS_SCOPE_OWN */
} tsr_metrics_audience_t;

/* The lines of `snapshot` that `audience` may see, in order (malloc'd,
 * NUL-terminated; *out_len without the NUL), or NULL out of memory. */
char *tsr_metrics_snapshot_filter(const tsr_metrics_snapshot_t *snapshot, tsr_metrics_audience_t audience,
                                  size_t *out_len);

/* Who is at the other end of a /metrics connection. */
typedef enum tsr_metrics_peer_kind_e {
  TSR_METRICS_PEER_UNKNOWN = 0, /* not known as remote, but the kernel named no uid */
  TSR_METRICS_PEER_LOCAL,       /* a socket of this host's network namespace: uid */
  TSR_METRICS_PEER_REMOTE,      /* the kernel holds no socket at its end */
} tsr_metrics_peer_kind_t;

typedef struct tsr_metrics_peer_s {
  tsr_metrics_peer_kind_t kind;
  uint32_t uid;     /* with TSR_METRICS_PEER_LOCAL */
  uint8_t addr[16]; /* its address; IPv4 as ::ffff:a.b.c.d */
} tsr_metrics_peer_t;

/* Finds who holds the other end of accepted TCP socket `fd`, whose peer
 * address accept gave as `peer`, through NETLINK_SOCK_DIAG socket `diag_fd`
 * (-1: none, every peer is unknown): the socket whose source is the peer's
 * address and whose destination is ours (inet_diag's exact lookup,
 * idiag_uid). A socket no process holds any more (a time-wait socket
 * reports uid 0) names no uid. Not found: remote, unless the peer's address
 * is one of this host's (a local peer that went away, or one the exact
 * lookup cannot see, is never taken for a remote one). */
struct sockaddr_storage;
tsr_metrics_peer_t tsr_metrics_peer_find(int diag_fd, int fd, const struct sockaddr_storage *peer);
/* Whether `addr` (16 bytes, IPv4 as ::ffff:a.b.c.d) is an address of this
 * host, loopback included. The metrics thread's (a cache without a lock). */
bool tsr_metrics_addr_local(const uint8_t addr[16]);
/* Whether two peers are the same client: local ones by uid; every unknown
 * one is one client; remote ones by address (IPv6 by its /64). */
bool tsr_metrics_peer_same_client(const tsr_metrics_peer_t *a, const tsr_metrics_peer_t *b);
/* What `peer` may see: a local peer everything if `privileged` (uid 0, the
 * daemon's, admin_group or metrics_group: the caller asks), else its own
 * leases; a remote peer everything if `remote_full`, else the counts; an
 * unknown peer the counts. */
tsr_metrics_audience_t tsr_metrics_audience_decide(const tsr_metrics_peer_t *peer, bool privileged, bool remote_full);

/* One connection of the HTTP side, as its admission sees it. */
typedef struct tsr_metrics_conn_s {
  tsr_metrics_peer_t peer;
  uint64_t accepted_ns; /* monotonic */
  bool answered;        /* its request was whole and answered: the deadline is over */
  bool closing;         /* shut down; libmicrohttpd has yet to see it and close it */
  bool fresh;           /* let in since libmicrohttpd last ran: not read yet, never a victim */
  int fd;               /* its socket, libmicrohttpd's: only ever shut down, never closed */
} tsr_metrics_conn_t;

typedef enum tsr_metrics_admission_e {
  TSR_METRICS_ADMIT = 0,
  TSR_METRICS_ADMIT_EVICT,   /* after closing the victim */
  TSR_METRICS_REFUSE_CLIENT, /* the client holds per_client connections already */
  TSR_METRICS_REFUSE_FULL,   /* `slots` connections are open, closing ones included */
} tsr_metrics_admission_t;

/* The connection to give up for a newcomer: the oldest still sending its
 * request, else the oldest; never one closing or fresh. False: none. */
bool tsr_metrics_pick_victim(tsr_metrics_conn_t *const *conns, size_t count, size_t *out_victim);
/* Whether a new connection from `peer` may join the `count` open ones:
 * refused past `per_client` of its client's (closing ones not counted) or
 * when every one of `slots` is taken; past `total`, let in by closing the
 * one tsr_metrics_pick_victim picks (its index in *out_victim), refused when
 * it picks none. */
tsr_metrics_admission_t tsr_metrics_admission_decide(tsr_metrics_conn_t *const *conns, size_t count,
                                                     const tsr_metrics_peer_t *peer, size_t per_client, size_t total,
                                                     size_t slots, size_t *out_victim);

typedef struct tsr_metrics_s tsr_metrics_t;
/* Serves GET /metrics on config->metrics from a thread of its own, which
 * runs libmicrohttpd's loop (docs/operations.md, "Metrics"): who asks is
 * found per connection, a connection must send its whole request within
 * config->metrics_request_timeout_ns of its accept, and the connection
 * limits above hold. */
TSR_MUST_USE tsr_status_t tsr_metrics_start(const tsr_config_t *config, tsr_metrics_t **out_metrics);
void tsr_metrics_stop(tsr_metrics_t *metrics);
/* Replaces the snapshot scrapes copy from with *snapshot (taken over; it is
 * left empty). */
void tsr_metrics_publish(tsr_metrics_t *metrics, tsr_metrics_snapshot_t *snapshot);
/* Adds one request that took `ns` to the latency buckets and sum (tsr_daemon_handle counts it in requests). */
void tsr_metrics_observe_request(tsr_daemon_counters_t *counters, uint64_t ns);
/* The exposition of the daemon's state now, tagged for the audiences (the
 * event loop's thread). False out of memory. */
struct tsr_daemon_s;
bool tsr_daemon_metrics_snapshot(struct tsr_daemon_s *d, tsr_metrics_snapshot_t *out_snapshot);

/* ---- the daemon's state, shared by server.c and handlers.c ---- */

typedef struct tsr_daemon_s {
  tsr_config_t config;
  tsr_lease_service_t *leases;
  tsr_audit_t *audit;
  tsr_regions_t *regions;
  tsr_procs_t procs;                    /* the last /proc snapshot */
  tsr_roots_t roots;                    /* lease.attach */
  tsr_actions_t *actions;               /* signals in their grace period */
  tsr_backstop_t *backstop;             /* NULL: no backstop (off, or no NVML) */
  uint64_t backstop_next_ns;            /* monotonic: when the backstop runs next */
  tsr_lease_t history[TSR_HISTORY_MAX]; /* ring of ended leases */
  size_t history_next, history_count;
  uint64_t requests, expired; /* requests handled, leases expired */
  uint64_t started_wall_ns;   /* when this daemon started: earlier deadlines fell due while none ran */
  tsr_daemon_counters_t counters;
  tsr_metrics_t *metrics;        /* NULL: no /metrics */
  uint64_t metrics_published_ns; /* monotonic */
} tsr_daemon_t;

/* Rewrites /metrics' snapshot if TSR_METRICS_PERIOD_NS passed since the last. */
void tsr_daemon_metrics_publish(tsr_daemon_t *d, uint64_t now_mono_ns);

/* Handles one request line from `who` (`len` bytes, no newline) and writes
 * the whole reply object to `w`. */
void tsr_daemon_handle(tsr_daemon_t *d, const tsr_identity_t *who, const char *line, size_t len, tsr_json_writer_t *w);

/* Ends every lease that is due (called by the expiry timer). True if a due
 * lease could not be ended (its lock file would not go): retry later. */
bool tsr_daemon_expire(tsr_daemon_t *d);

/* Records an ended lease for `lease show`. */
void tsr_daemon_remember(tsr_daemon_t *d, const tsr_lease_t *lease);

/* Gives d->leases the daemon's part of every create and release
 * (lifecycle.c): a new lease's region and audit line, a release's audit
 * line, and the end of a released lease. */
void tsr_daemon_lease_hooks(tsr_daemon_t *d);

/* ---- the `top` request (top.c) ---- */

#define TSR_TOP_PROCS_MAX 4096                     /* GPU processes one device's part of a reply lists */
#define TSR_TOP_SNAPSHOT_AGE_NS (500 * 1000000ull) /* an older /proc snapshot is taken anew */

/* Writes the members of a `top` reply into the open reply object: "ok" and
 * "top", every device with its active leases (region counters, processes,
 * NVML's per-process SM utilisation over the last second) and the GPU
 * processes of no lease (docs/top.md). Any local user may ask: an admin
 * sees every lease and process, an ordinary user (`who`) her own, and of
 * the others only how many there are and what they hold ("others"). Takes
 * a /proc snapshot when the last is older than TSR_TOP_SNAPSHOT_AGE_NS. */
void tsr_daemon_top(tsr_daemon_t *d, const tsr_identity_t *who, tsr_json_writer_t *w);

/* ---- enforcement (enforce.c) ---- */

/* The action lease `l` takes when it ends: its own, or the node's on_expiry. */
tsr_lease_action_t tsr_daemon_action_of(const tsr_daemon_t *d, const tsr_lease_t *l);
/* What the backstop does when lease `l`'s processes are over it: its own
 * over_limit, or the node's (as the configuration says now). Never DEFAULT. */
tsr_lease_over_limit_t tsr_daemon_over_limit_of(const tsr_daemon_t *d, const tsr_lease_t *l);
/* A lease ended (`state`: released or expired): its region is ended at once,
 * then its action runs (signal: SIGTERM to its processes, SIGKILL after the
 * grace), its roots are forgotten and its owner's lease index rewritten. */
void tsr_daemon_lease_ended(tsr_daemon_t *d, const tsr_lease_t *lease, tsr_region_state_t state);
/* A tsr_regions_damage_fn (ctx: the daemon): lease `lease`'s region says
 * what the lease does not; logged and audited ("region"). */
void tsr_daemon_region_damaged(void *d, uint64_t lease, uint32_t damage, bool repaired);
/* A lease was created: its owner's lease index is rewritten. */
void tsr_daemon_lease_created(tsr_daemon_t *d, const tsr_lease_t *lease);
/* The lease's processes as the daemon knows them: slot holders of its region
 * and descendants of its roots, from snapshot `procs`, whose real uid is the
 * lease's owner; at most `cap`. Returns how many. */
size_t tsr_daemon_lease_procs(const tsr_daemon_t *d, const tsr_lease_t *lease, const tsr_procs_t *procs,
                              tsr_target_t *out, size_t cap);
/* The enforcement tick: a /proc snapshot, the reaper, roots pruned, due
 * SIGKILLs, and a backstop round. */
void tsr_daemon_enforce(tsr_daemon_t *d);
/* How often tsr_daemon_enforce runs: the backstop period, at most 500 ms. */
uint64_t tsr_daemon_enforce_period_ns(const tsr_daemon_t *d);

/* Whether uid is exempt from the deny rule and from every signal: 0, the
 * daemon's own, or an admin. */
bool tsr_identity_uid_exempt(uint32_t uid, const char *admin_group);
/* Whether uid is exempt (above), or a member of `group` (NULL or empty:
 * none): one look into the user database for both. */
bool tsr_identity_uid_exempt_or_in(uint32_t uid, const char *admin_group, const char *group);
/* The same as a tsr_actions_exempt_fn; ctx is the admin group (a string). */
bool tsr_identity_exempt_fn(void *admin_group, uint32_t uid);

/* Runs the event loop on listening socket `listen_fd` until SIGTERM/SIGINT.
 * Returns 0 on a clean stop. */
int tsr_server_run(tsr_daemon_t *d, int listen_fd);

/* tesserad's main (also `tessera daemon`). */
int tsr_daemon_main(int argc, char **argv);

#endif
