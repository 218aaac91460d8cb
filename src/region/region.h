/* region/region.h: the shared region of one lease (seed 002, FCSP).
 *
 * One file per lease, created by tesserad in a directory only it can write,
 * owned by the lease's owner with mode 0600, and mapped MAP_SHARED by the
 * daemon and by every process that runs under the lease (through
 * libtessera-cuda.so). It holds the lease's memory limit and its running
 * totals, one slot per process, heartbeats, and the lease's compute share:
 * its settings, its token bucket (region/bucket.h) and its counters. docs/enforcement.md gives the layout byte by byte.
 *
 * Accounting, lock-free and without a syscall:
 *   reserved  the admission counter of the seed's protocol: a relaxed
 *             pre-check, fetch_add (acq_rel), a re-check, and a roll-back on
 *             overshoot. It can pass the limit for an instant (between a
 *             losing fetch_add and its roll-back), but an allocation is
 *             admitted only if the counter stayed within the limit.
 *   used      the admitted bytes: raised after admission, lowered before the
 *             reservation is given back. It never exceeds the limit at any
 *             instant, under any interleaving of threads and processes, so
 *             it is what a sampler reads (the daemon, `tessera lease show`).
 *
 * Who may call what: tsr_region_create, _read, _repair, _write_state,
 * _write_share_now, _mark_dead and _remove are the daemon's, and work on the
 * file through a descriptor, never a mapping; every process of the lease may
 * _open (map), _attach, _charge, _credit, _reclaim, _detach. A tenant can
 * write its own region (it owns the file), and shrink it, and so can only
 * lie to itself: the daemon reads a copy (a shrunk file is a short read,
 * not a fault), takes the limit, state and shares from its own lease table
 * (tsr_region_read says what differs, tsr_region_repair puts it back), and
 * treats the counters as the tenants' report; its NVML backstop sees the
 * driver's own numbers.
 *
 * Thread safety: every function may be called from any thread of any
 * process at once, except create/remove (one caller per name) and close
 * (after the last use of that handle). */
#ifndef TESSERA_REGION_H
#define TESSERA_REGION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "tessera/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TSR_REGION_VERSION 1
#define TSR_REGION_SLOTS 256 /* processes attached to one lease at once */

typedef enum tsr_region_state_e {
  TSR_REGION_ACTIVE = 1,   /* allocations are admitted up to the limit */
  TSR_REGION_EXPIRED = 2,  /* the lease reached its deadline: every charge fails */
  TSR_REGION_RELEASED = 3, /* the lease was released: every charge fails */
} tsr_region_state_t;

/* What the daemon writes into a new region. */
typedef struct tsr_region_params_s {
  uint64_t lease_id;
  uint32_t device;
  const char *device_uuid;   /* "GPU-..." or "" when unknown (at most 63 bytes) */
  const char *device_pci;    /* "0000:01:00.0" or NULL/"" when unknown (at most 15 bytes) */
  const char *device_opencl; /* the OpenCL device name it answers to, a trailing '*'
                                a prefix; NULL/"" none (at most 47 bytes) */
  uint64_t limit_bytes;
  uint64_t high_limit_bytes; /* the largest limit the lease has had (a shrink leaves
                                counters up to it), 0 = limit_bytes; not written */
  uint64_t deadline_wall_ns;
  uint32_t owner_uid;
  uint64_t generation; /* changes when the daemon creates the region anew */
  uint32_t sm_ppm;     /* the lease's SM share, 0 = not limited */
  uint32_t stream_ppm; /* one stream's share of the lease's share, 0 = all of it */
  uint64_t burst_ns;   /* idle time that earns credit, 0 = TSR_REGION_BURST_DEFAULT_NS */
} tsr_region_params_t;

#define TSR_REGION_BURST_DEFAULT_NS UINT64_C(50000000) /* 50 ms */

/* A region's compute settings, as the shim uses them (checked: a share
 * out of range reads as not limited, a burst past 10 s as 10 s). */
typedef struct tsr_region_compute_s {
  uint32_t sm_ppm;     /* 0: not limited, else 1 .. 1e6 */
  uint32_t stream_ppm; /* 1 .. 1e6 */
  uint64_t burst_ns;
} tsr_region_compute_t;

/* A mapped region. Opaque; one per mapping. */
typedef struct tsr_region_s tsr_region_t;

/* A process as a region knows it. A tenant in a PID namespace (a
 * container) sees its own pids, so a slot keeps the pid the tenant saw and
 * the namespace it saw it in; the daemon maps it to a host pid (NSpid). */
typedef struct tsr_region_proc_s {
  int32_t pid;          /* in the process's own PID namespace */
  uint64_t start_ticks; /* field 22 of /proc/PID/stat */
  uint64_t pidns;       /* inode of /proc/PID/ns/pid; 0 when unknown */
} tsr_region_proc_t;

/* One held slot, for the daemon's reaper and backstop. */
typedef struct tsr_region_slot_info_s {
  uint32_t slot;
  tsr_region_proc_t proc;
  uint64_t used_bytes;
  uint64_t heartbeat_ns;
  bool dead; /* the daemon marked its holder gone (tsr_region_mark_dead) */
} tsr_region_slot_info_t;

/* Whether `proc` is still the process that claimed the slot. */
typedef bool (*tsr_region_alive_fn)(void *ctx, const tsr_region_proc_t *proc);

/* A snapshot of the counters, for people and the daemon. */
typedef struct tsr_region_stats_s {
  uint64_t lease_id;
  uint32_t device;
  tsr_region_state_t state;
  uint64_t limit_bytes;
  uint64_t used_bytes;   /* admitted and not yet freed */
  uint64_t peak_bytes;   /* the largest used_bytes seen */
  uint64_t denied;       /* charges refused (over the limit, or the lease ended) */
  uint32_t processes;    /* slots held by live or claiming processes */
  uint32_t sm_ppm;       /* the lease's SM share, 0 = not limited */
  uint32_t sm_now_ppm;   /* the share in force now (tsr_region_share_now) */
  uint64_t gpu_ns;       /* GPU time charged by the lease's launches (the cost model's) */
  uint64_t throttled_ns; /* time the lease's launch calls waited for the bucket */
  uint64_t launches;     /* launches charged */
  uint64_t bypassed;     /* launches let through uncharged (NCCL kernels) */
  bool corrupt;          /* a value no correct writer can produce was read (used and
                            peak past the limit are not: a resize may lower it) */
} tsr_region_stats_t;

/* The file name of lease `id`'s region: "lease-<id>.region". */
void tsr_region_file_name(uint64_t lease_id, char *buf, size_t cap);

/* The size of a region file in bytes (whole pages). */
size_t tsr_region_file_size(void);

/* ---- the daemon -------------------------------------------------------------
 *
 * The daemon never maps a region: a mapping of a file its tenant shrinks
 * faults (SIGBUS) at the next access. It opens the file by name for each
 * access (without following links; the directory is the daemon's alone, so
 * the name always means the file it made), reads a copy with pread, and
 * writes its own words with pwrite. */

/* Creates (or re-creates) the region of a lease in directory `dir_fd`:
 * written under a temporary name created with O_EXCL|O_NOFOLLOW, owned by
 * params->owner_uid (fchown: needs root unless it is the caller) with mode
 * 0600, then renamed into place, so a tenant never sees a half-written
 * region. */
TSR_MUST_USE tsr_status_t tsr_region_create(int dir_fd, const tsr_region_params_t *params);

/* Removes lease `id`'s region file from `dir_fd` (mappings stay valid until
 * closed). A file already gone is not an error. */
TSR_MUST_USE tsr_status_t tsr_region_remove(int dir_fd, uint64_t lease_id);

/* What tsr_region_read found different from the daemon's truth (bits). */
enum {
  TSR_REGION_DAMAGE_SIZE = 1u << 0,     /* not TSR_REGION_FILE_BYTES long: shrunk or grown */
  TSR_REGION_DAMAGE_HEADER = 1u << 1,   /* magic, version, sizes, lease, device, owner, limit,
                                           deadline or the device's names */
  TSR_REGION_DAMAGE_STATE = 1u << 2,    /* the state word is not the daemon's */
  TSR_REGION_DAMAGE_COMPUTE = 1u << 3,  /* the SM share, stream share, burst or share in force */
  TSR_REGION_DAMAGE_COUNTERS = 1u << 4, /* used, peak or a slot's bytes past the largest
                                           limit the lease has had (high_limit_bytes): no
                                           correct tenant writes that */
};

/* The daemon's copy of a region, as read: what the tenants report, and the
 * slots. Nothing in it is trusted: the daemon clamps what it shows and checks
 * every pid against /proc. */
typedef struct tsr_region_copy_s {
  tsr_region_stats_t stats; /* the counters as written (limit and state: the file's words) */
  uint32_t nslots;          /* held slots in `slots`, in slot order */
  tsr_region_slot_info_t slots[TSR_REGION_SLOTS];
  uint64_t dead_bytes; /* what slots the daemon marked dead still hold */
  uint64_t generation; /* the file's generation word */
  uint32_t damage;     /* TSR_REGION_DAMAGE_* bits */
} tsr_region_copy_t;

/* Reads lease params->lease_id's region from `dir_fd` into *out and compares
 * it with `truth` (the lease table's) and `state` (the state the daemon gave
 * it). A file of the wrong size is read as far as it goes (what is missing
 * reads as zeros) and flagged. truth->generation 0 takes the file's (a
 * restarted daemon adopting a region). TSR_NOT_FOUND: no such file; another
 * error: not a regular file, or unreadable. Never faults. */
TSR_MUST_USE tsr_status_t tsr_region_read(int dir_fd, const tsr_region_params_t *truth, tsr_region_state_t state,
                                          tsr_region_copy_t *out_copy);

/* Puts back what `damage` says differs: the file's size (the counters and
 * slots of a resized file start again from zero), the header and the
 * device's names, the state, the compute settings. In place: processes that
 * map the file keep their mapping, which is valid again. */
TSR_MUST_USE tsr_status_t tsr_region_repair(int dir_fd, const tsr_region_params_t *truth, tsr_region_state_t state,
                                            uint32_t share_now_ppm, uint32_t damage);

/* Writes the state word (the next charge of every tenant sees it). */
TSR_MUST_USE tsr_status_t tsr_region_write_state(int dir_fd, uint64_t lease_id, tsr_region_state_t state);

/* Writes the SM share in force now (0: the lease's own; see
 * tsr_region_share_now). */
TSR_MUST_USE tsr_status_t tsr_region_write_share_now(int dir_fd, uint64_t lease_id, uint32_t ppm);

/* Marks slot `slot`, which held process `proc` when the daemon read it, as
 * left by a process that is gone: a tenant of the lease gives back what it
 * held and frees it (tsr_region_reclaim) before its next charge that does
 * not fit, and when it attaches. A slot that changed hands since is not
 * touched by the mark (it names (pid, start time)). */
TSR_MUST_USE tsr_status_t tsr_region_mark_dead(int dir_fd, uint64_t lease_id, uint32_t slot,
                                               const tsr_region_proc_t *proc);

/* The default liveness check: a process of the caller's own PID namespace
 * (or pidns 0) lives if /proc/PID/stat shows the same start time and not
 * every one of its threads is on its way out (exited, or PF_EXITING: a
 * killed process is so from the moment it begins to exit, tens of ms before
 * the driver has freed its memory; it will take no more). For a
 * process of another namespace this cannot be told from here and the
 * answer is true (never reap what may live): pass a resolver instead. */
bool tsr_region_proc_alive(const tsr_region_proc_t *proc);

/* ---- every process of the lease -------------------------------------------- */

/* Maps the region file `name` in `dir_fd` (AT_FDCWD and a path work too),
 * read-write, without following links. Checks that it is a regular file of
 * the right size and that its header holds (magic, version, sizes, slot
 * count, state, and `lease_id` when it is not 0). Errors:
 *   TSR_NOT_FOUND            no such region (the lease is unknown or ended)
 *   TSR_PERMISSION_DENIED    not the caller's region
 *   TSR_FAILED_PRECONDITION  a link, not a regular file, another version
 *   TSR_DATA_LOSS            wrong size, magic or fields: not a region */
TSR_MUST_USE tsr_status_t tsr_region_open(int dir_fd, const char *name, uint64_t lease_id, tsr_region_t **out_region);

/* Unmaps. Does not detach: call tsr_region_detach first if attached. */
void tsr_region_close(tsr_region_t *region);

/* Claims a slot for process `proc` (tsr_region_proc_self fills it in for
 * the caller). TSR_RESOURCE_EXHAUSTED when all TSR_REGION_SLOTS are held.
 * Lock-free: a CAS per slot tried, at most TSR_REGION_SLOTS of them. */
TSR_MUST_USE tsr_status_t tsr_region_attach(tsr_region_t *region, const tsr_region_proc_t *proc, uint32_t *out_slot);

/* Gives the slot back, crediting whatever it still holds (the process's
 * memory is returned when it exits). */
void tsr_region_detach(tsr_region_t *region, uint32_t slot);

/* Frees the slots the daemon marked as left by dead processes
 * (tsr_region_mark_dead), crediting what they held. A charge that does not
 * fit does this, and tsr_region_reap with the default check, once before it
 * refuses. Returns the slots freed; *out_bytes
 * (may be NULL) gets the bytes credited. Bounded by TSR_REGION_SLOTS. */
uint32_t tsr_region_reclaim(tsr_region_t *region, uint64_t *out_bytes);

/* Frees the slots of processes that are gone, crediting what they held.
 * `alive` (NULL: tsr_region_proc_alive) says whether a slot's process still
 * lives; it is asked twice per freed slot (before and after taking the slot
 * over), so a pid reused in between is never reaped. Returns the number of
 * slots freed; *out_bytes (may be NULL) gets the bytes credited. Bounded by
 * TSR_REGION_SLOTS. A tenant calls it when every slot is held, and before
 * it refuses a charge. */
uint32_t tsr_region_reap(tsr_region_t *region, tsr_region_alive_fn alive, void *ctx, uint64_t *out_bytes);

/* The held slots (at most `cap`), in slot order; returns how many. */
uint32_t tsr_region_slots(tsr_region_t *region, tsr_region_slot_info_t *out, uint32_t cap);

/* The hot path: admits `bytes` for `slot` if the lease is active and the
 * admitted total stays within the limit. True if admitted. No syscall, no
 * lock; a few atomic operations. bytes = 0 is admitted without change. A
 * charge that does not fit first takes back what gone processes held
 * (tsr_region_reclaim, then tsr_region_reap: a /proc read per held slot,
 * at most once a millisecond per mapping) and tries once more. */
bool tsr_region_charge(tsr_region_t *region, uint32_t slot, uint64_t bytes);

/* Gives back `bytes` that tsr_region_charge admitted for `slot`. A credit
 * larger than the slot holds is corruption: logged once, clamped. */
void tsr_region_credit(tsr_region_t *region, uint32_t slot, uint64_t bytes);

/* Marks the slot alive (heartbeat, CLOCK_MONOTONIC ns). */
void tsr_region_heartbeat(tsr_region_t *region, uint32_t slot, uint64_t now_mono_ns);

/* The compute settings the daemon wrote. */
void tsr_region_compute(tsr_region_t *region, tsr_region_compute_t *out_compute);

/* The SM share in force now: the lease's share, or less while the daemon
 * reserves some of the device for switching between leases that run
 * together (tsr_region_set_share_now). Never more than the lease's share,
 * read afresh (a resize moves it while the lease runs); 0 when the lease is
 * not limited. Two relaxed loads. */
uint32_t tsr_region_share_now(tsr_region_t *region);

/* The lease's token bucket (region/bucket.h): takes `span_ns` of wall time
 * at `now_ns` (CLOCK_MONOTONIC). 0 if admitted, else the ns to wait before
 * asking again. One CAS; no lock, no syscall. */
uint64_t tsr_region_take(tsr_region_t *region, uint64_t now_ns, uint64_t span_ns);

/* Moves the lease's bucket by `delta_ns` (a debt > 0 or a credit < 0),
 * when a launch's cost turned out other than what was charged. */
void tsr_region_adjust(tsr_region_t *region, uint64_t now_ns, int64_t delta_ns);

/* Counts `launches` charged `gpu_ns` in all after waiting `throttled_ns`,
 * and `bypassed` launches let through uncharged (a process adds up its
 * own and writes them in batches). Saturating, relaxed. */
void tsr_region_note_launches(tsr_region_t *region, uint64_t launches, uint64_t gpu_ns, uint64_t throttled_ns,
                              uint64_t bypassed);

/* A snapshot of the counters. */
void tsr_region_stats(tsr_region_t *region, tsr_region_stats_t *out_stats);

/* The device's UUID as the daemon wrote it ("GPU-...", or "" when unknown),
 * NUL-terminated within 64 bytes, copied into buf. */
void tsr_region_device_uuid(tsr_region_t *region, char *buf, size_t cap);

/* The device's PCI bus id ("0000:01:00.0", or "" when unknown) and the
 * OpenCL device name it answers to ("" when none), as the daemon wrote
 * them, NUL-terminated, copied into buf. */
void tsr_region_device_pci(tsr_region_t *region, char *buf, size_t cap);
void tsr_region_device_opencl(tsr_region_t *region, char *buf, size_t cap);

/* The start time of process `pid` in clock ticks since boot (field 22 of
 * /proc/PID/stat). False if there is no such process. */
bool tsr_region_proc_start(int32_t pid, uint64_t *out_ticks);

/* The parent pid (field 4, may be NULL) and the start time (field 22) from
 * the text of a /proc/PID/stat file. False if it is not one. */
bool tsr_region_proc_stat_parse(const char *stat_line, int32_t *out_ppid, uint64_t *out_start_ticks);

/* The inode of process `pid`'s PID namespace (0 for the caller: "self").
 * False if it cannot be read. */
bool tsr_region_proc_pidns(int32_t pid, uint64_t *out_inode);

/* The calling process: its pid, start time and PID namespace. */
void tsr_region_proc_self(tsr_region_proc_t *out_proc);

#ifdef __cplusplus
}
#endif
#endif
