/* daemon/procs.h: one /proc snapshot per enforcement tick (procs.c): pids,
 * PID namespaces, start times and the process tree, and what a region
 * slot's process is on the host. */
#ifndef TESSERA_DAEMON_PROCS_H
#define TESSERA_DAEMON_PROCS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "region/region.h"

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

#endif
