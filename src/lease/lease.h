/* lease/lease.h: time-bounded leases of GPU memory (seed 000, Chronos).
 *
 * A lease gives its owner `fraction` of one device's memory (and optionally a
 * share of its SMs) until a deadline. This header has two parts:
 *
 *  - the lease table: the in-memory rules (admission, ownership, admin
 *    override, the per-(device, fraction) lock rule, expiry order). It does no
 *    I/O and takes the current time as an argument, so it can be tested
 *    exhaustively. Not thread-safe: one owner (the daemon's event loop) uses it.
 *
 *  - the lease store: the durable side, one lock file per lease in a state
 *    directory, written atomically, and the never-repeating id counter. Not
 *    thread-safe either; the daemon is its single writer.
 *
 * The daemon (src/daemon) ties them together: rules first, then the file,
 * then the reply. See docs/leases.md. */
#ifndef TESSERA_LEASE_H
#define TESSERA_LEASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "device/device.h"
#include "tessera/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TSR_LEASE_NAME_MAX 64 /* user names, host names (with NUL) */
#define TSR_LEASE_JOB_MAX 64  /* a job label's bytes, NUL included */
/* The largest lease id the daemon issues or accepts from a lock file: ids
 * stay within a signed 64-bit integer, so every JSON reader (and jansson's
 * json_int_t) holds them exactly. */
#define TSR_LEASE_ID_MAX UINT64_C(0x7fffffffffffffff)

/* Is `name` usable as a user or host name in a lease: 1 to
 * TSR_LEASE_NAME_MAX - 1 bytes (read no further than TSR_LEASE_NAME_MAX), none
 * a space or control character, so that it fits on a lock file's
 * "key: value" line and a log line? NULL is not. The one check the table
 * (creates, restores) and the lock file parser share. */
bool tsr_lease_name_ok(const char *name);

/* What happens to a lease's processes when it ends (expiry or release).
 * What the daemon's backstop does to processes over the lease is
 * tsr_lease_over_limit_t, a setting of its own. */
typedef enum tsr_lease_action_e {
  TSR_LEASE_ACTION_DEFAULT = 0, /* the node's on_expiry (a lock file from before actions) */
  TSR_LEASE_ACTION_REVOKE = 1,  /* the region is ended (allocations fail); processes live */
  TSR_LEASE_ACTION_SIGNAL = 2,  /* the region is ended, then SIGTERM, SIGKILL after a grace */
} tsr_lease_action_t;

/* "default", "revoke", "signal"; "?" for a value out of range. */
const char *tsr_lease_action_name(tsr_lease_action_t action);

/* Reads "revoke" or "signal" (never "default"). False for anything else. */
bool tsr_lease_action_parse(const char *text, tsr_lease_action_t *out_action);

/* What the daemon's backstop does when it finds a lease's processes using
 * more than the lease (NVML's per-process memory), by whatever route they
 * got it, shim or no shim. Apart from the expiry action: a lease that ends
 * is tsr_lease_action_t's. */
typedef enum tsr_lease_over_limit_e {
  TSR_LEASE_OVER_LIMIT_DEFAULT = 0, /* the node's over_limit, whatever it is when the backstop
                                       acts (not set on the lease; lock files before it) */
  TSR_LEASE_OVER_LIMIT_SIGNAL = 1,  /* SIGTERM to the lease's processes, SIGKILL after a grace */
  TSR_LEASE_OVER_LIMIT_LOG = 2,     /* a log line and an audit line, nothing else */
} tsr_lease_over_limit_t;

/* "default", "signal", "log"; "?" for a value out of range. */
const char *tsr_lease_over_limit_name(tsr_lease_over_limit_t over_limit);

/* Reads "signal" or "log" (never "default"). False for anything else;
 * *out_over_limit is then untouched. */
bool tsr_lease_over_limit_parse(const char *text, tsr_lease_over_limit_t *out_over_limit);

typedef enum tsr_lease_state_e {
  TSR_LEASE_ACTIVE = 0,
  TSR_LEASE_RELEASED = 1, /* ended by its owner or an admin */
  TSR_LEASE_EXPIRED = 2,  /* ended by reaching its deadline */
} tsr_lease_state_t;

/* One lease. Plain value: copy freely. Times are nanoseconds; *_wall_ns since
 * the Unix epoch (what is stored and shown), deadline_mono_ns on
 * CLOCK_MONOTONIC (what the expiry timer uses; rebuilt from the wall deadline
 * when the daemon restarts). */
typedef struct tsr_lease_s {
  uint64_t id;           /* > 0, never reused, also across restarts */
  uint32_t device;       /* device index */
  uint32_t fraction_ppm; /* share of device memory, (0, 1e6] */
  uint64_t bytes;        /* device total x fraction, rounded down */
  uint32_t sm_ppm;       /* SM share, 0 = not limited, else (0, 1e6] */
  uint32_t owner_uid;
  uint32_t creator_uid;             /* differs from owner when an admin created it */
  int32_t pid;                      /* the creating client's pid (seed: `pid`) */
  char owner[TSR_LEASE_NAME_MAX];   /* owner's user name */
  char creator[TSR_LEASE_NAME_MAX]; /* creator's user name */
  char host[TSR_LEASE_NAME_MAX];    /* node the lease was made on */
  uint64_t start_wall_ns;
  uint64_t deadline_wall_ns;
  uint64_t deadline_mono_ns;
  tsr_lease_state_t state;
  uint64_t ended_wall_ns;            /* when it was released or expired; 0 while active */
  tsr_lease_action_t on_expiry;      /* DEFAULT only for leases restored from older lock files */
  tsr_lease_over_limit_t over_limit; /* DEFAULT: the node's (not set when it was made) */
  char job[TSR_LEASE_JOB_MAX];       /* "" or the scheduler's job id, set by an admin (tsr_lease_job_ok) */
} tsr_lease_t;

/* Who asks. Built by the daemon from the socket's peer credentials, never
 * from what the client claims. */
typedef struct tsr_lease_actor_s {
  uint32_t uid;
  const char *name; /* user name of uid */
  bool admin;       /* uid 0, the daemon's own uid, or in the admin group */
  int32_t pid;
} tsr_lease_actor_t;

/* What a create asks for. */
typedef struct tsr_lease_request_s {
  uint32_t device;
  uint32_t fraction_ppm; /* must be in (0, 1e6] */
  uint32_t sm_ppm;       /* 0 = no SM share, else (0, 1e6] */
  uint64_t duration_ns;  /* must be > 0 */
  bool has_target;       /* create for another user (admin only) */
  uint32_t target_uid;
  const char *target_name;
  tsr_lease_action_t on_expiry;      /* stored with the lease; DEFAULT: the daemon's choice */
  tsr_lease_over_limit_t over_limit; /* stored with the lease; DEFAULT: the node's, then */
  const char *job;                   /* NULL or "": none; else a job id (admin only, tsr_lease_job_ok) */
} tsr_lease_request_t;

/* Whether `job` can label a lease: 1 to TSR_LEASE_JOB_MAX - 1 bytes of
 * letters, digits and . _ : @ + - (a Slurm job id, "cluster:123", "123_4"). */
bool tsr_lease_job_ok(const char *job);

/* The clock a table operation runs at. */
typedef struct tsr_lease_now_s {
  uint64_t mono_ns;
  uint64_t wall_ns;
} tsr_lease_now_t;

/* The (device, fraction) lock key of the seed: fraction x 1000, rounded to
 * the nearest 0.1% (so 50% -> 500). Two active leases with the same device
 * and key must have the same owner (safety property S1). */
static inline uint32_t tsr_lease_lock_key(uint32_t fraction_ppm) { return (fraction_ppm + 500) / 1000; }

/* ---- the lease table ---------------------------------------------------- */

typedef struct tsr_lease_table_s tsr_lease_table_t;

/* The node's admission limits (tesserad's configuration). Zero means "no
 * limit" for each. */
typedef struct tsr_lease_limits_s {
  uint64_t max_duration_ns;  /* longest lease */
  uint32_t min_fraction_ppm; /* smallest share a create may ask for */
  uint64_t min_bytes;        /* smallest size a create may ask for */
  uint32_t max_per_owner;    /* active leases one owner may hold; an admin
                                creating a lease is not held to it */
} tsr_lease_limits_t;

/* Makes an empty table over `devices` (copied; count may be 0). `host` is
 * the node's name, written into each lease. `limits` (copied; NULL = none)
 * are checked by every create; a restore checks what is left of a lease against max_duration_ns, but not the
 * per-owner count or the minimum size (a limit lowered in the configuration
 * does not take away leases already granted). */
TSR_MUST_USE tsr_status_t tsr_lease_table_create(const tsr_device_t *devices, size_t count, const char *host,
                                                 const tsr_lease_limits_t *limits, tsr_lease_table_t **out_table);
void tsr_lease_table_free(tsr_lease_table_t *table);

/* Checks a create against the rules (seed Algorithm 1) and the node's
 * limits and, if it passes, adds the lease with id `id` and returns a copy in
 * *out_lease. Nothing changes on failure. Errors:
 *   TSR_INVALID_ARGUMENT    fraction/sm/duration out of range, longer than
 *                           max_duration_ns, smaller than min_fraction_ppm or
 *                           min_bytes, id 0, above TSR_LEASE_ID_MAX or in use
 *   TSR_NOT_FOUND           no such device
 *   TSR_PERMISSION_DENIED   a non-admin creating for another user
 *   TSR_CONFLICT            another owner holds the same (device, fraction key)
 *   TSR_RESOURCE_EXHAUSTED  total x fraction > available, SM shares > 100%, or
 *                           the owner already holds max_per_owner leases (not
 *                           checked when actor->admin creates)
 * The lease starts at `now` and ends at now + duration (saturating). O(1)
 * apart from growing the arrays. */
TSR_MUST_USE tsr_status_t tsr_lease_table_create_lease(tsr_lease_table_t *table, const tsr_lease_request_t *request,
                                                       const tsr_lease_actor_t *actor, tsr_lease_now_t now, uint64_t id,
                                                       tsr_lease_t *out_lease);

/* The checks of tsr_lease_table_create_lease, changing nothing: *out_lease
 * (may be NULL) gets the lease a create at `now` would make. */
TSR_MUST_USE tsr_status_t tsr_lease_table_check_create(const tsr_lease_table_t *table,
                                                       const tsr_lease_request_t *request,
                                                       const tsr_lease_actor_t *actor, tsr_lease_now_t now, uint64_t id,
                                                       tsr_lease_t *out_lease);

/* A count bumped by every change of a lease (create, restore, renew,
 * resize, remove): equal counts, the same leases. */
uint64_t tsr_lease_table_changes(const tsr_lease_table_t *table);

/* When device `device` is sure to have room for `fraction_ppm` of its
 * memory and `sm_ppm` of its SMs if no lease is created, renewed or resized
 * meanwhile: now when it has, else the deadline (monotonic) of the lease
 * whose end, with those of every lease ending before it, makes the room.
 * Capacity alone: not the lock rule, not the per-owner count. False when
 * the device could not hold it even empty, or out of memory. */
bool tsr_lease_table_room_at(const tsr_lease_table_t *table, uint32_t device, uint32_t fraction_ppm, uint32_t sm_ppm,
                             uint64_t now_mono_ns, uint64_t *out_mono_ns);

/* Adds a lease read back from the store at start-up, checked with the rules
 * of a create (not who asks, the per-owner count or the minimum size): id in
 * [1, TSR_LEASE_ID_MAX] and fresh, a device this node has, fraction and SM
 * share in range, `bytes` exactly what the fraction of that device gives,
 * usable owner, creator and host names, a start not in the future (beyond a
 * minute of clock skew), a deadline after the start and no further than the
 * longest lease allows, capacity and the lock rule. The error says which
 * rule failed, with the values (the store quarantines the file with it):
 * TSR_ALREADY_EXISTS for an id restored twice, TSR_NOT_FOUND for a device
 * this node lacks, TSR_CONFLICT and TSR_RESOURCE_EXHAUSTED as a create,
 * TSR_INVALID_ARGUMENT for the rest. Recomputes deadline_mono_ns from the
 * wall deadline and `now`. O(log n) when leases come in id order, as the
 * store gives them. */
TSR_MUST_USE tsr_status_t tsr_lease_table_restore(tsr_lease_table_t *table, const tsr_lease_t *lease,
                                                  tsr_lease_now_t now);

/* May `actor` release lease `id` (seed Algorithm 3: owner or admin)?
 * TSR_NOT_FOUND if there is no active lease `id`, TSR_PERMISSION_DENIED if not.
 * Changes nothing; copies the lease into *out_lease (may be NULL) on success. */
TSR_MUST_USE tsr_status_t tsr_lease_table_authorize_release(const tsr_lease_table_t *table, uint64_t id,
                                                            const tsr_lease_actor_t *actor, tsr_lease_t *out_lease);

/* Renew (seed 000 has no renew; the rules are release's and create's):
 * moves active lease `id`'s deadline to `deadline_wall_ns`, which must be
 * after now.wall_ns and, past an admin's word, at most max_duration_ns
 * after it (a renewal is bounded like a create, from now; the lease may
 * outlive max_duration_ns in all). The owner or an admin may renew; the
 * deadline may move later or earlier. TSR_NOT_FOUND, TSR_PERMISSION_DENIED,
 * TSR_INVALID_ARGUMENT; TSR_OUT_OF_MEMORY changes nothing. *out_lease (may
 * be NULL) gets the lease as it now is. tsr_lease_table_check_renew
 * checks the same and changes nothing: *out_lease gets the lease as a renew
 * would leave it. */
TSR_MUST_USE tsr_status_t tsr_lease_table_check_renew(const tsr_lease_table_t *table, uint64_t id,
                                                      const tsr_lease_actor_t *actor, uint64_t deadline_wall_ns,
                                                      tsr_lease_now_t now, tsr_lease_t *out_lease);
TSR_MUST_USE tsr_status_t tsr_lease_table_renew(tsr_lease_table_t *table, uint64_t id, const tsr_lease_actor_t *actor,
                                                uint64_t deadline_wall_ns, tsr_lease_now_t now, tsr_lease_t *out_lease);

/* Resize: the owner or an admin gives active lease `id` a new memory share
 * (`fraction_ppm`; 0 keeps it) and SM share (`sm_ppm`; 0 none,
 * TSR_LEASE_SM_UNCHANGED keeps it), checked as a create would be with the
 * lease's own memory and share counted as free: the capacity, the lock rule
 * for the new fraction, the node's minimum size. The check and the change
 * are one step (nothing runs between them). Its deadline and the rest stay.
 * TSR_NOT_FOUND, TSR_PERMISSION_DENIED, TSR_INVALID_ARGUMENT, TSR_CONFLICT,
 * TSR_RESOURCE_EXHAUSTED, TSR_OUT_OF_MEMORY; a refusal changes nothing.
 * *out_lease (may be NULL) gets the lease as it now is.
 * tsr_lease_table_check_resize checks the same and changes nothing:
 * *out_lease gets the lease as a resize would leave it. */
#define TSR_LEASE_SM_UNCHANGED UINT32_MAX
TSR_MUST_USE tsr_status_t tsr_lease_table_check_resize(const tsr_lease_table_t *table, uint64_t id,
                                                       const tsr_lease_actor_t *actor, uint32_t fraction_ppm,
                                                       uint32_t sm_ppm, tsr_lease_t *out_lease);
TSR_MUST_USE tsr_status_t tsr_lease_table_resize(tsr_lease_table_t *table, uint64_t id, const tsr_lease_actor_t *actor,
                                                 uint32_t fraction_ppm, uint32_t sm_ppm, tsr_lease_t *out_lease);

/* Removes active lease `id`, returning its memory and SM share to the device
 * (seed Algorithm 4). `state` is TSR_LEASE_RELEASED or TSR_LEASE_EXPIRED and
 * is written with `now` into *out_lease (may be NULL). TSR_NOT_FOUND if absent. */
TSR_MUST_USE tsr_status_t tsr_lease_table_remove(tsr_lease_table_t *table, uint64_t id, tsr_lease_state_t state,
                                                 tsr_lease_now_t now, tsr_lease_t *out_lease);

/* The earliest deadline (monotonic) of any active lease; false if none. O(1). */
bool tsr_lease_table_next_deadline(const tsr_lease_table_t *table, uint64_t *out_mono_ns);

/* An active lease whose deadline is <= now_mono_ns (the earliest such); false
 * if none. Does not remove it: the caller removes its lock file, then calls
 * tsr_lease_table_remove. O(1). */
bool tsr_lease_table_peek_expired(const tsr_lease_table_t *table, uint64_t now_mono_ns, tsr_lease_t *out_lease);

/* The active lease `id`, or NULL. The pointer is valid until the next change. */
const tsr_lease_t *tsr_lease_table_find(const tsr_lease_table_t *table, uint64_t id);

/* Active leases in creation (id) order: `i` in [0, count). Pointers are valid
 * until the next change. */
size_t tsr_lease_table_count(const tsr_lease_table_t *table);
const tsr_lease_t *tsr_lease_table_at(const tsr_lease_table_t *table, size_t i);

/* The devices the table was made over. */
size_t tsr_lease_table_device_count(const tsr_lease_table_t *table);
const tsr_device_t *tsr_lease_table_device(const tsr_lease_table_t *table, uint32_t index);

/* Device memory not held by any lease: total - sum of active leases' bytes
 * (invariant I1). 0 for an unknown device. */
uint64_t tsr_lease_table_available_bytes(const tsr_lease_table_t *table, uint32_t device);

/* Sum of the SM shares of the device's active leases, in ppm. */
uint32_t tsr_lease_table_sm_committed(const tsr_lease_table_t *table, uint32_t device);

/* ---- lock files ---------------------------------------------------------- */

/* The lock file name of a lease: "gpu_<device>_<key:04>_<id>.lock" (the seed's
 * gpu_<device>_<fraction*1000>.lock, made unique per lease). */
void tsr_lease_lockfile_name(const tsr_lease_t *lease, char *buf, size_t cap);

/* Writes the lock file contents: the seed's key-value lines (pid, user, host,
 * time, device, fraction, partition) plus uid, bytes, sm, deadline, creator,
 * creator_uid and, unless they are DEFAULT, on_expiry and over_limit (and
 * job, when set). Returns the length, or 0 if `cap` is too small. */
size_t tsr_lease_lockfile_format(const tsr_lease_t *lease, char *buf, size_t cap);

/* Parses lock file contents strictly: every key exactly once (on_expiry,
 * over_limit and job at most once: files written before them lack them,
 * and get DEFAULT or none),
 * nothing else, values in range (partition, the id, in [1, TSR_LEASE_ID_MAX]; names as
 * tsr_lease_name_ok), deadline after time. The error names the line. */
TSR_MUST_USE tsr_status_t tsr_lease_lockfile_parse(const char *text, size_t len, tsr_lease_t *out_lease);

/* ---- the lease store ------------------------------------------------------ */

typedef struct tsr_lease_store_s tsr_lease_store_t;

typedef enum tsr_lease_sync_e {
  TSR_LEASE_SYNC_FULL = 0, /* fsync files and the directory: survives power loss */
  TSR_LEASE_SYNC_NONE = 1, /* atomic rename only: survives a killed daemon, not a
                              power cut */
} tsr_lease_sync_t;

/* Opens (creating it and missing parents if needed, mode 0755) the state
 * directory `dir`, an absolute path, which must pass
 * tsr_fs_check_private_dir (base/fs.h): owned by the effective uid, writable
 * by nobody else, in parents nobody else can change; else
 * TSR_FAILED_PRECONDITION saying why, and nothing is written in it. Reads
 * the id counter (TSR_DATA_LOSS if it is damaged, or not a regular file).
 * Does not read leases: call tsr_lease_store_load. */
TSR_MUST_USE tsr_status_t tsr_lease_store_open(const char *dir, tsr_lease_sync_t sync, tsr_lease_store_t **out_store);
void tsr_lease_store_close(tsr_lease_store_t *store);

/* Called for each lease read back; return non-NULL to reject it (the file is
 * then quarantined with that reason). */
typedef tsr_status_t (*tsr_lease_store_visit_fn)(void *ctx, const tsr_lease_t *lease);

/* Reads every lock file in id order and calls `visit` for each. Unreadable or
 * malformed files, lock file names that are not regular files (a symlink, a
 * FIFO, a directory: never followed nor opened), and files `visit` rejects
 * are moved to the quarantine/ subfolder with a warning in the log, never a
 * failure. If quarantine/ cannot be used safely (a symlink, not a directory
 * of this uid), such a file is left where it is with an error in the log,
 * and still not restored. Leftover temporary files of an interrupted write
 * are removed. Sets the id counter past every id seen. *out_quarantined (may
 * be NULL) counts the files set aside either way. */
TSR_MUST_USE tsr_status_t tsr_lease_store_load(tsr_lease_store_t *store, tsr_lease_store_visit_fn visit, void *ctx,
                                               size_t *out_quarantined);

/* A fresh lease id, never returned before by any store on this directory,
 * and never above TSR_LEASE_ID_MAX (then TSR_RESOURCE_EXHAUSTED "lease ids are
 * exhausted"). Ids are reserved on disk in blocks, so most calls do no I/O. */
TSR_MUST_USE tsr_status_t tsr_lease_store_next_id(tsr_lease_store_t *store, uint64_t *out_id);

/* Writes the lease's lock file atomically (temporary file, then rename): a
 * crash at any instant leaves either no file or the whole file. The
 * temporary file is made with O_EXCL and never through a symlink; a spare
 * is reused only if it is a regular file of this uid with one link. A write
 * that fails (a full disk, EIO) is TSR_IO_ERROR and leaves no file. */
TSR_MUST_USE tsr_status_t tsr_lease_store_put(tsr_lease_store_t *store, const tsr_lease_t *lease);

/* Removes the lease's lock file. A file already gone is not an error;
 * failures are TSR_IO_ERROR. */
TSR_MUST_USE tsr_status_t tsr_lease_store_remove(tsr_lease_store_t *store, const tsr_lease_t *lease);

/* The state directory path. */
const char *tsr_lease_store_dir(const tsr_lease_store_t *store);

/* Group commit. With `deferred` (and TSR_LEASE_SYNC_FULL), put and remove
 * still rename or unlink at once (a killed process loses nothing) but leave
 * the fdatasync/fsync to tsr_lease_store_sync, which the caller runs once per
 * batch before it acknowledges any change of the batch. */
void tsr_lease_store_defer_sync(tsr_lease_store_t *store, bool deferred);

/* Makes every change since the last call durable: fdatasync of each new lock
 * file, then one fsync of the directory. Cheap when nothing is pending. */
TSR_MUST_USE tsr_status_t tsr_lease_store_sync(tsr_lease_store_t *store);

/* ---- the lease service: table + store, in the order that keeps them true ---- */

/* Create: rules, then id, then the lock file, then what the owner adds
 * (hooks.created: the daemon's region and audit line), then the answer; a
 * failed step undoes the ones before it. Release: rules, then what the owner
 * does first (hooks.releasing: the audit line), then the lock file is
 * removed, then the table entry, then hooks.released. Renew: below. Expiry: the lock file,
 * then the table entry. So at every instant each active lease has its lock
 * file (I2), and a crash between two steps leaves at worst a lease whose
 * client got no answer, which ends at its deadline. The order is kept here
 * alone: the daemon's handlers make one call. Not thread-safe. */
typedef struct tsr_lease_service_s tsr_lease_service_t;

/* What the service's owner does inside a create or a release, at the
 * points above (each may be NULL). `actor` is the create's or release's. */
typedef struct tsr_lease_hooks_s {
  void *ctx;
  /* The new lease is in the table and its lock file is written; nobody has
   * heard of it. A failure takes it back (file, table) and fails the create. */
  tsr_status_t (*created)(void *ctx, const tsr_lease_t *lease, const tsr_lease_actor_t *actor);
  /* The release is allowed; nothing has changed. A failure changes nothing
   * and fails the release. */
  tsr_status_t (*releasing)(void *ctx, const tsr_lease_t *lease, const tsr_lease_actor_t *actor);
  /* The lease has left the file and the table (its state RELEASED). */
  void (*released)(void *ctx, const tsr_lease_t *lease, const tsr_lease_actor_t *actor);
  /* The lease's new deadline is in its lock file and the table; `before`
   * is the lease as it was. */
  void (*renewed)(void *ctx, const tsr_lease_t *lease, const tsr_lease_t *before, const tsr_lease_actor_t *actor);
  /* The lease's new size is in its lock file and the table. */
  void (*resized)(void *ctx, const tsr_lease_t *lease, const tsr_lease_t *before, const tsr_lease_actor_t *actor);
} tsr_lease_hooks_t;

typedef struct tsr_lease_service_config_s {
  const char *state_dir;
  tsr_lease_sync_t sync;
  const char *host;          /* node name written into leases */
  tsr_lease_limits_t limits; /* admission limits (see tsr_lease_limits_t) */
  bool group_commit;         /* defer syncs to tsr_lease_service_sync (see the store) */
} tsr_lease_service_config_t;

/* Opens the store, builds the table over `devices` and restores every lease
 * found on disk (quarantining what cannot be restored). Leases past their
 * deadline are restored as due: the first tsr_lease_service_expire ends them.
 * *out_quarantined (may be NULL) counts quarantined files. */
TSR_MUST_USE tsr_status_t tsr_lease_service_open(const tsr_lease_service_config_t *config, const tsr_device_t *devices,
                                                 size_t count, tsr_lease_now_t now, tsr_lease_service_t **out_service,
                                                 size_t *out_quarantined);
void tsr_lease_service_close(tsr_lease_service_t *service);

/* The owner's hooks for every later create and release (copied). */
void tsr_lease_service_set_hooks(tsr_lease_service_t *service, const tsr_lease_hooks_t *hooks);

TSR_MUST_USE tsr_status_t tsr_lease_service_create(tsr_lease_service_t *service, const tsr_lease_request_t *request,
                                                   const tsr_lease_actor_t *actor, tsr_lease_now_t now,
                                                   tsr_lease_t *out_lease);

/* A fresh lease id for a create that waits (lease/queue.h): its lease gets
 * it when granted, through tsr_lease_service_create_as. An id reserved and
 * never used is skipped, never reused. */
TSR_MUST_USE tsr_status_t tsr_lease_service_reserve_id(tsr_lease_service_t *service, uint64_t *out_id);
TSR_MUST_USE tsr_status_t tsr_lease_service_create_as(tsr_lease_service_t *service, uint64_t id,
                                                      const tsr_lease_request_t *request,
                                                      const tsr_lease_actor_t *actor, tsr_lease_now_t now,
                                                      tsr_lease_t *out_lease);

TSR_MUST_USE tsr_status_t tsr_lease_service_release(tsr_lease_service_t *service, uint64_t id,
                                                    const tsr_lease_actor_t *actor, tsr_lease_now_t now,
                                                    tsr_lease_t *out_lease);

/* Renew: the rules (tsr_lease_table_renew, checked without a change), then
 * the lock file rewritten with the new deadline, then the table, then
 * hooks.renewed. A crash between the file and the answer leaves the lease
 * renewed and its client unanswered, as for a create. */
TSR_MUST_USE tsr_status_t tsr_lease_service_renew(tsr_lease_service_t *service, uint64_t id,
                                                  const tsr_lease_actor_t *actor, uint64_t deadline_wall_ns,
                                                  tsr_lease_now_t now, tsr_lease_t *out_lease);

/* Resize: the rules (tsr_lease_table_check_resize), then the lock file
 * written with the new size (its name follows the fraction: the new file is
 * written, then the old one removed), then the table, then hooks.resized.
 * A crash between the two files leaves both; the restart restores the
 * lease from one and quarantines the other (the same id twice), so the
 * device is never promised twice. */
TSR_MUST_USE tsr_status_t tsr_lease_service_resize(tsr_lease_service_t *service, uint64_t id,
                                                   const tsr_lease_actor_t *actor, uint32_t fraction_ppm,
                                                   uint32_t sm_ppm, tsr_lease_t *out_lease);

/* Called once for each lease a call ends. */
typedef void (*tsr_lease_ended_fn)(void *ctx, const tsr_lease_t *lease);

/* Ends every lease whose deadline is <= now.mono_ns, earliest first, calling
 * `ended` (may be NULL) for each. Returns how many ended. A lease whose lock
 * file cannot be removed stays active and is retried on the next call; the
 * error is logged and *out_stuck (may be NULL) is set, so that the caller
 * can wait before retrying instead of spinning. */
size_t tsr_lease_service_expire(tsr_lease_service_t *service, tsr_lease_now_t now, tsr_lease_ended_fn ended, void *ctx,
                                bool *out_stuck);

/* With group_commit: makes the changes since the last call durable. Call it
 * before acknowledging them. */
TSR_MUST_USE tsr_status_t tsr_lease_service_sync(tsr_lease_service_t *service);

/* The table, for reading (lists, lookups, next deadline). */
const tsr_lease_table_t *tsr_lease_service_table(const tsr_lease_service_t *service);

#ifdef __cplusplus
}
#endif
#endif
