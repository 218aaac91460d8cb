/* backstop.c: what the driver says the lease's processes hold.
 *
 * The shim governs the processes that load it. A static binary, a process
 * started without the preload, one that wrote into its own region, or memory
 * the driver takes by a route the shim cannot see: the backstop catches
 * those after the fact. Every backstop_period it reads each watched GPU's
 * running compute processes and their used memory from NVML
 * (nvmlDeviceGetComputeRunningProcesses_v3, host pids) and attributes each
 * process to a lease of that device:
 *   a. it holds a slot in the lease's region (the slot's pid, PID namespace
 *      and start time resolved to a host pid through the /proc snapshot);
 *   b. else it descends from a process registered for the lease
 *      (lease.attach: the `tessera run` that started it);
 *   c. else its real uid owns an active lease on the device (several: the
 *      one created last): the node-wide mode's "a user's own lease".
 * A process is a lease's only if its real uid is the lease's owner: a slot
 * is what a tenant wrote (any pid, with its world-readable start time), so
 * (a) is a hint checked against /proc, and (b) stops at a set-user-ID
 * program in the tree. Signals are checked once more when they are sent
 * (actions.c).
 * When the attributed processes of a lease use more than its limit, the
 * lease's over-limit action runs (its own over_limit, else the node's; not
 * its expiry action, which is for its end), in the round that finds it:
 *   signal: SIGTERM to every attributed process, slot holders included (a
 *     process over its lease escaped the shim, whatever it holds), SIGKILL
 *     to those alive after the grace (actions.c); not again while one of
 *     the lease's graces runs, nor twice to the same processes in one
 *     episode (from the round that finds the lease over to one that finds
 *     it within its limit again);
 *   log: a log line and an audit line, once per episode.
 * The processes of a lease of root, of the daemon's user or of an admin
 * are never signalled (actions.c refuses each, whatever the lease says):
 * there `signal` is logged as `log`, and the line says why. The region is
 * left as it is: ending it is the expiry action's (enforce.c). Under
 * `policy = deny`, a process on a GPU where its user holds no lease is
 * signalled, unless its uid is 0, the daemon's, or an admin's. Each act is
 * logged and audited ("backstop").
 *
 * `tessera top` (top.c) reads the same attribution and NVML's per-process
 * SM utilisation through the backstop's handles (tsr_backstop_attribute,
 * tsr_backstop_sm_util), so both say the same about whose a process is.
 *
 * The daemon's state reaches it only through its context (tsr_backstop_ctx_t,
 * backstop.h): the leases, their regions and roots, the actions, the audit
 * log, the act counter and the settings it reads, built where the daemon
 * opens the backstop.
 *
 * Devices are matched by UUID, never by ordinal. Everything is bounded: at
 * most TSR__PROCS_MAX processes per GPU are read, TSR__TREE_DEPTH parents
 * walked per process. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/array.h"
#include "base/log.h"
#include "base/time.h"
#include "base/units.h"
#include "daemon/actions.h"
#include "daemon/audit.h"
#include "daemon/backstop.h"
#include "daemon/config.h"
#include "daemon/identity.h"
#include "daemon/procs.h"
#include "daemon/regions.h"
#include "daemon/roots.h"
#include "device/nvml_abi.h"

#define TSR__PROCS_MAX 4096            /* processes read from one GPU per round */
#define TSR__TREE_DEPTH 64             /* parents walked up from one process */
#define TSR__AUDIT_PIDS 64             /* pids named in one audit line */
#define TSR__EXEMPT_CACHE 64           /* uids whose deny exemption one round remembers */
#define TSR__UTIL_WINDOW_US 2000000ull /* NVML's SM samples that say a lease runs */

typedef struct {
  tsr_nvml_device_t handle; /* NULL: not watched */
  bool warned;              /* a failure was logged (once per device) */
} tsr__watched_t;

/* What the last rounds found about one active lease. */
typedef struct {
  uint64_t lease;
  uint64_t used;     /* NVML's used memory of its processes, the last round */
  uint64_t acted_fp; /* with acted: the processes acted on (tsr__fingerprint) */
  int ran;           /* its processes ran kernels lately (NVML): 1, 0, or -1 unknown */
  bool seen;         /* in the last round */
  bool acted;        /* acted on in this episode (over its limit since then) */
} tsr__lease_seen_t;

struct tsr_backstop_s {
  tsr_backstop_ctx_t ctx; /* what it reads of the daemon, and calls */
  tsr_device_nvml_t *nvml;
  size_t count;
  tsr__watched_t dev[TSR_CONFIG_MAX_DEVICES];
  tsr_nvml_process_info_t *buf;
  size_t buf_cap;
  tsr__lease_seen_t *seen; /* in lease id order */
  size_t nseen, seen_cap;
  tsr_device_proc_util_t *util;
  size_t util_cap;
};

tsr_status_t tsr_backstop_open(const char *library, const tsr_backstop_ctx_t *ctx, tsr_backstop_t **out) {
  *out = NULL;
  tsr_device_nvml_t *nv = NULL;
  TSR_RETURN_IF_ERROR(tsr_device_nvml_open(library, TSR_DEVICE_NVML_FOR_DISCOVERY, &nv));
  if (!nv->device_compute_processes) {
    tsr_device_nvml_close(nv);
    return tsr_status_make(TSR_UNAVAILABLE,
                           "NVML lacks nvmlDeviceGetComputeRunningProcesses_v3 (a driver before "
                           "510?)");
  }
  tsr_backstop_t *b = calloc(1, sizeof(*b));
  if (!b) {
    tsr_device_nvml_close(nv);
    return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory");
  }
  b->ctx = *ctx;
  b->nvml = nv;
  b->count = ctx->device_count < TSR_CONFIG_MAX_DEVICES ? ctx->device_count : TSR_CONFIG_MAX_DEVICES;
  unsigned int n = 0;
  if (nv->device_count(&n) != TSR_NVML_SUCCESS) n = 0;
  if (n > 1024) n = 1024;
  size_t watched = 0;
  size_t opencl = 0;
  for (size_t i = 0; i < b->count; i++) {
    const tsr_device_t *want = &ctx->devices[i];
    if (want->kind == TSR_DEVICE_KIND_OPENCL) { /* NVML does not see it */
      opencl++;
      continue;
    }
    for (unsigned int k = 0; k < n && !b->dev[i].handle; k++) {
      tsr_nvml_device_t h = NULL;
      if (nv->device_handle(k, &h) != TSR_NVML_SUCCESS) continue;
      char uuid[TSR_DEVICE_UUID_MAX] = "";
      if (nv->device_uuid && nv->device_uuid(h, uuid, sizeof(uuid)) != TSR_NVML_SUCCESS) uuid[0] = 0;
      uuid[sizeof(uuid) - 1] = '\0';
      bool same =
          want->uuid[0] ? strcmp(uuid, want->uuid) == 0 : want->source == TSR_DEVICE_FROM_NVML && k == want->index;
      if (same) b->dev[i].handle = h;
    }
    if (b->dev[i].handle)
      watched++;
    else
      tsr_log_warn("backstop: NVML has no GPU %s (device %zu): not watched",
                   want->uuid[0] ? want->uuid : "without a UUID", i);
  }
  tsr_log_info("backstop: watching %zu of %zu device(s) through NVML%s", watched, b->count,
               opencl ? " (OpenCL devices are not NVML's)" : "");
  *out = b;
  return NULL;
}

void tsr_backstop_close(tsr_backstop_t *b) {
  if (!b) return;
  tsr_device_nvml_close(b->nvml);
  free(b->buf);
  free(b->seen);
  free(b->util);
  free(b);
}

static bool tsr__seen_before(const void *entry, const void *id) {
  return ((const tsr__lease_seen_t *)entry)->lease < *(const uint64_t *)id;
}

/* Lease `id`'s entry (made when `make`); NULL when there is none. */
static tsr__lease_seen_t *tsr__seen(tsr_backstop_t *b, uint64_t id, bool make) {
  size_t lo = tsr_array_lower_bound(b->seen, b->nseen, sizeof(*b->seen), &id, tsr__seen_before);
  if (lo < b->nseen && b->seen[lo].lease == id) return &b->seen[lo];
  if (!make) return NULL;
  tsr__lease_seen_t *v = tsr_array_grow(b->seen, &b->seen_cap, b->nseen + 1, sizeof(*v), 16);
  if (!v) return NULL;
  b->seen = v;
  memmove(&v[lo + 1], &v[lo], (b->nseen - lo) * sizeof(*v));
  v[lo] = (tsr__lease_seen_t){.lease = id, .ran = -1};
  b->nseen++;
  return &v[lo];
}

/* ---- one round -------------------------------------------------------------- */

/* Reads device i's processes into b->buf; how many, or -1 (logged once). */
static long tsr__read_procs(tsr_backstop_t *b, size_t i) {
  tsr__watched_t *w = &b->dev[i];
  for (int attempt = 0; attempt < 2; attempt++) {
    unsigned int n = (unsigned int)b->buf_cap;
    tsr_nvml_return_t r = b->nvml->device_compute_processes(w->handle, &n, b->buf);
    if (r == TSR_NVML_SUCCESS) return n <= b->buf_cap ? (long)n : (long)b->buf_cap;
    if (r == TSR_NVML_ERROR_INSUFFICIENT_SIZE && n > b->buf_cap) {
      size_t want = n + 16 < TSR__PROCS_MAX ? n + 16 : TSR__PROCS_MAX;
      if (want <= b->buf_cap) break;
      tsr_nvml_process_info_t *p = tsr_array_grow(b->buf, &b->buf_cap, want, sizeof(*p), 64);
      if (!p) break;
      b->buf = p;
      continue;
    }
    if (!w->warned)
      tsr_log_warn("backstop: device %zu: nvmlDeviceGetComputeRunningProcesses_v3: %s%s", i,
                   tsr_device_nvml_error(b->nvml, r),
                   r == TSR_NVML_ERROR_NOT_SUPPORTED ? "; not watched from now on" : "");
    w->warned = true;
    if (r == TSR_NVML_ERROR_NOT_SUPPORTED) w->handle = NULL;
    return -1;
  }
  if (!w->warned) tsr_log_warn("backstop: device %zu: more than %d processes, or out of memory", i, TSR__PROCS_MAX);
  w->warned = true;
  return -1;
}

/* A host pid holding a slot of a lease (a), for one device's round. */
typedef struct {
  int32_t pid;
  uint64_t lease;
} tsr__slot_pid_t;

/* What one lease's attributed processes use in this round. */
typedef struct {
  const tsr_lease_t *lease;
  uint64_t used;
  tsr_target_t *targets;
  size_t ntargets, cap;
} tsr__lease_use_t;

typedef struct {
  const tsr_backstop_ctx_t *ctx;
  const tsr_procs_t *procs;
  uint32_t device;
  tsr__slot_pid_t *slots;
  size_t nslots, slots_cap;
  tsr__lease_use_t *uses; /* the device's active leases */
  size_t nuses, uses_cap;
  tsr_region_copy_t *copy; /* scratch: one region's copy at a time */
  struct {
    uint32_t uid;
    bool exempt;
  } exempt[TSR__EXEMPT_CACHE];
  size_t nexempt;
} tsr__round_t;

static tsr__lease_use_t *tsr__use_of(tsr__round_t *r, uint64_t lease) {
  for (size_t i = 0; i < r->nuses; i++)
    if (r->uses[i].lease->id == lease) return &r->uses[i];
  return NULL;
}

/* (a) and (b) and (c), in that order; NULL: no lease of this device. */
static tsr__lease_use_t *tsr__attribute(tsr__round_t *r, int32_t pid, const tsr_proc_t *p) {
  for (size_t i = 0; i < r->nslots; i++)
    if (r->slots[i].pid == pid) return tsr__use_of(r, r->slots[i].lease);
  if (!p) return NULL; /* started after the snapshot: the next round knows it */
  const tsr_roots_t *roots = r->ctx->roots;
  const tsr_proc_t *a = p;
  for (int depth = 0; a && depth < TSR__TREE_DEPTH && roots->count; depth++) {
    for (size_t k = 0; k < roots->count; k++) {
      const tsr_root_t *root = &roots->v[k];
      if (root->pid != a->pid || root->start_ticks != a->start_ticks) continue;
      tsr__lease_use_t *u = tsr__use_of(r, root->lease);
      if (u && p->uid == u->lease->owner_uid) return u;
    }
    if (a->ppid <= 0 || a->ppid == a->pid) break;
    a = tsr_procs_find(r->procs, a->ppid);
  }
  tsr__lease_use_t *last = NULL;
  for (size_t i = 0; i < r->nuses; i++)
    if (r->uses[i].lease->owner_uid == p->uid) last = &r->uses[i]; /* id order: created last wins */
  return last;
}

static bool tsr__exempt(tsr__round_t *r, uint32_t uid) {
  for (size_t i = 0; i < r->nexempt; i++)
    if (r->exempt[i].uid == uid) return r->exempt[i].exempt;
  bool e = tsr_identity_uid_exempt(uid, r->ctx->admin_group);
  if (r->nexempt < TSR__EXEMPT_CACHE) {
    r->exempt[r->nexempt].uid = uid;
    r->exempt[r->nexempt].exempt = e;
    r->nexempt++;
  }
  return e;
}

static bool tsr__add_target(tsr__lease_use_t *u, int32_t pid, const tsr_proc_t *p) {
  tsr_target_t *t = tsr_array_grow(u->targets, &u->cap, u->ntargets + 1, sizeof(*t), 8);
  if (!t) return false;
  u->targets = t;
  uint64_t start = p ? p->start_ticks : 0;
  if (!p && !tsr_procs_start_of(pid, &start)) return false;
  u->targets[u->ntargets++] = (tsr_target_t){pid, start};
  return true;
}

/* Logs and audits one act. */
static void tsr__report(const tsr_backstop_ctx_t *ctx, const tsr_audit_backstop_t *a) {
  char used[32];
  tsr_format_size(a->used_bytes, used, sizeof(used));
  if (a->lease)
    tsr_log_warn("backstop: lease %" PRIu64 " of %s on device %u, %zu process(es) (pid %d%s): %s: %s", a->lease,
                 a->owner, a->device, a->npids, a->npids ? a->pids[0] : 0, a->npids > 1 ? ", ..." : "", a->action,
                 a->reason);
  else
    tsr_log_warn(
        "backstop: pid %d of %s (uid %u) uses %s on device %u without a lease (policy "
        "deny): %s",
        a->npids ? a->pids[0] : 0, a->owner, a->uid, used, a->device, a->action);
  (*ctx->acts)++;
  tsr_status_t st = tsr_audit_backstop(ctx->audit, a);
  if (st) {
    tsr_log_error("backstop: no audit line: %s", tsr_status_message(st));
    tsr_status_free(st);
  }
}

/* Which processes a set of targets is, in any order: equal sets give equal
 * values (a sum of mixed pid and start time, and the count). */
static uint64_t tsr__fingerprint(const tsr_target_t *t, size_t n) {
  uint64_t sum = n;
  for (size_t i = 0; i < n; i++) {
    uint64_t x = ((uint64_t)(uint32_t)t[i].pid << 32) ^ t[i].start_ticks;
    x ^= x >> 33; /* splitmix64's finaliser */
    x *= UINT64_C(0xff51afd7ed558ccd);
    x ^= x >> 33;
    sum += x;
  }
  return sum;
}

/* The lease's processes use more than its limit: its over-limit action, in
 * this round (see the top of the file), then its log and audit lines.
 * signal: SIGTERM now to every attributed process, SIGKILL after the
 * grace; nothing while a grace of the lease runs, and not again for the
 * same processes in one episode (actions.c may have refused them: not the
 * owner's, set-user-ID). log, and signal on a lease whose owner is exempt
 * from signals: one line per episode. */
static void tsr__act_on_lease(tsr_backstop_t *b, tsr__round_t *r, tsr__lease_use_t *u, uint64_t now) {
  const tsr_backstop_ctx_t *ctx = r->ctx;
  const tsr_lease_t *l = u->lease;
  tsr_lease_over_limit_t over = tsr_backstop_over_limit_of(l, ctx->over_limit);
  bool exempt = tsr__exempt(r, l->owner_uid);
  bool signal = over == TSR_LEASE_OVER_LIMIT_SIGNAL && !exempt;
  if (signal && (!u->ntargets || tsr_actions_pending(ctx->actions, l->id, 0))) return;
  uint64_t fp = signal ? tsr__fingerprint(u->targets, u->ntargets) : 0;
  tsr__lease_seen_t *seen = tsr__seen(b, l->id, true);
  if (seen && seen->acted && seen->acted_fp == fp) return; /* done already in this episode */
  if (seen) {
    seen->acted = true;
    seen->acted_fp = fp;
  }
  /* the act first, so that the line says what was done: actions.c checks
   * each process again and may refuse some (not the owner's to end) */
  size_t sent = signal ? tsr_actions_signal(ctx->actions, l->id, l->owner_uid, u->targets, u->ntargets, now) : 0;
  int32_t pids[TSR__AUDIT_PIDS];
  size_t npids = u->ntargets < TSR__AUDIT_PIDS ? u->ntargets : TSR__AUDIT_PIDS;
  for (size_t i = 0; i < npids; i++) pids[i] = u->targets[i].pid;
  char why[384];
  char used[32], limit[32];
  tsr_format_size(u->used, used, sizeof(used));
  tsr_format_size(l->bytes, limit, sizeof(limit));
  int n = snprintf(why, sizeof(why), "the lease's processes use %s on device %u (NVML), over its limit of %s", used,
                   l->device, limit);
  if (n > 0 && (size_t)n < sizeof(why)) {
    if (signal && sent == u->ntargets)
      snprintf(why + n, sizeof(why) - (size_t)n,
               "; over_limit signal: SIGTERM to %zu process(es), SIGKILL after %.1f s to those "
               "still alive",
               sent, (double)ctx->expiry_grace_ns / 1e9);
    else if (signal)
      snprintf(why + n, sizeof(why) - (size_t)n,
               "; over_limit signal: SIGTERM to %zu of %zu process(es) (the others are gone, or "
               "not the owner's to end), SIGKILL after %.1f s to those still alive",
               sent, u->ntargets, (double)ctx->expiry_grace_ns / 1e9);
    else if (over == TSR_LEASE_OVER_LIMIT_SIGNAL)
      snprintf(why + n, sizeof(why) - (size_t)n,
               "; over_limit signal, but its owner is root, the daemon's user or an admin, whose "
               "processes are never signalled: logged only");
    else
      snprintf(why + n, sizeof(why) - (size_t)n, "; over_limit log: its processes are left running");
  }
  tsr_audit_backstop_t a = {.lease = l->id,
                            .owner = l->owner,
                            .uid = l->owner_uid,
                            .device = l->device,
                            .pids = pids,
                            .npids = npids,
                            .used_bytes = u->used,
                            .limit_bytes = l->bytes,
                            .action = signal ? "signal" : "log",
                            .reason = why};
  tsr__report(ctx, &a);
}

/* An ordinary user's process on a GPU with no lease of theirs (deny). */
static void tsr__act_on_unleased(tsr__round_t *r, const tsr_nvml_process_info_t *info, const tsr_proc_t *p,
                                 uint64_t used, uint64_t now) {
  const tsr_backstop_ctx_t *ctx = r->ctx;
  if (!p || tsr__exempt(r, p->uid) || tsr_actions_pending(ctx->actions, 0, p->pid)) return;
  char user[TSR_LEASE_NAME_MAX], why[2 * TSR_LEASE_NAME_MAX + 96];
  uint32_t uid = p->uid;
  snprintf(user, sizeof(user), "uid%u", uid);
  char name_uid[16];
  snprintf(name_uid, sizeof(name_uid), "%u", uid);
  uint32_t looked = 0;
  tsr_status_t st = tsr_identity_lookup_user(name_uid, &looked, user, sizeof(user));
  tsr_status_free(st);
  snprintf(why, sizeof(why), "a process of %s on device %u, where %s holds no lease (policy deny)", user, r->device,
           user);
  int32_t pid = (int32_t)info->pid;
  tsr_audit_backstop_t a = {.lease = 0,
                            .owner = user,
                            .uid = uid,
                            .device = r->device,
                            .pids = &pid,
                            .npids = 1,
                            .used_bytes = used,
                            .limit_bytes = 0,
                            .action = "signal",
                            .reason = why};
  tsr__report(ctx, &a);
  tsr_target_t t = {pid, p->start_ticks};
  tsr_actions_signal(ctx->actions, 0, uid, &t, 1, now);
}

/* Starts round r on device i: the device's active leases (r->uses) and the
 * host pids of their regions' slots (r->slots, rule a). False when out of
 * memory. */
static bool tsr__round_begin(tsr__round_t *r, size_t i) {
  const tsr_backstop_ctx_t *ctx = r->ctx;
  const tsr_lease_table_t *t = tsr_lease_service_table(ctx->leases);
  r->device = (uint32_t)i;
  r->nuses = r->nslots = 0;
  for (size_t k = 0; k < tsr_lease_table_count(t); k++) {
    const tsr_lease_t *l = tsr_lease_table_at(t, k);
    if (l->device != i) continue;
    tsr__lease_use_t *u = tsr_array_grow(r->uses, &r->uses_cap, r->nuses + 1, sizeof(*u), 8);
    if (!u) return false;
    r->uses = u;
    r->uses[r->nuses++] = (tsr__lease_use_t){.lease = l};
    /* (a): the slots of its region, resolved to host pids */
    uint32_t n = tsr_regions_read(ctx->regions, l->id, r->copy) ? r->copy->nslots : 0;
    for (uint32_t s = 0; s < n; s++) {
      const tsr_region_slot_info_t *slot = &r->copy->slots[s];
      const tsr_proc_t *p = slot->dead ? NULL : tsr_procs_resolve(r->procs, &slot->proc);
      if (!p || p->uid != l->owner_uid) continue; /* a slot is the tenant's word: checked */
      tsr__slot_pid_t *sp = tsr_array_grow(r->slots, &r->slots_cap, r->nslots + 1, sizeof(*sp), 16);
      if (!sp) break;
      r->slots = sp;
      r->slots[r->nslots++] = (tsr__slot_pid_t){p->pid, l->id};
    }
  }
  return true;
}

static void tsr__round_end(tsr__round_t *r) {
  free(r->uses);
  free(r->slots);
  free(r->copy);
}

/* Whether the processes of each lease of device `i` ran kernels in the
 * last TSR__UTIL_WINDOW_US, from NVML's per-process SM samples (unknown
 * where NVML cannot tell). */
static void tsr__note_running(tsr_backstop_t *b, tsr__round_t *r, size_t i, uint64_t now_wall_us) {
  size_t nutil = 0;
  bool known =
      b->util && tsr_backstop_sm_util(b, (uint32_t)i, now_wall_us - TSR__UTIL_WINDOW_US, b->util, b->util_cap, &nutil);
  for (size_t k = 0; k < r->nuses; k++) {
    tsr__lease_seen_t *seen = tsr__seen(b, r->uses[k].lease->id, true);
    if (!seen) continue;
    seen->ran = known ? 0 : -1;
    for (size_t t = 0; known && t < r->uses[k].ntargets && !seen->ran; t++)
      for (size_t x = 0; x < nutil; x++)
        if (b->util[x].pid == (uint32_t)r->uses[k].targets[t].pid && b->util[x].sm_percent > 0) {
          seen->ran = 1;
          break;
        }
  }
}

/* NVML's used memory of a process row (0 when it does not say). */
static uint64_t tsr__used_of(const tsr_nvml_process_info_t *info) {
  return info->usedGpuMemory == TSR_NVML_VALUE_NOT_AVAILABLE ? 0 : info->usedGpuMemory;
}

static void tsr__round_device(tsr_backstop_t *b, tsr__round_t *r, size_t i, uint64_t now) {
  if (!tsr__round_begin(r, i)) return;
  if (r->nuses == 0 && !r->ctx->policy_deny) return; /* nothing could be acted on */
  long n = tsr__read_procs(b, i);
  for (long k = 0; k < n; k++) {
    const tsr_nvml_process_info_t *info = &b->buf[k];
    if (info->pid == 0 || info->pid > INT32_MAX) continue;
    uint64_t used = tsr__used_of(info);
    const tsr_proc_t *p = tsr_procs_find(r->procs, (int32_t)info->pid);
    tsr__lease_use_t *u = tsr__attribute(r, (int32_t)info->pid, p);
    if (u) {
      u->used = used > UINT64_MAX - u->used ? UINT64_MAX : u->used + used;
      tsr__add_target(u, (int32_t)info->pid, p);
    } else if (r->ctx->policy_deny) {
      tsr__act_on_unleased(r, info, p, used, now);
    }
  }
  if (n >= 0) tsr__note_running(b, r, i, tsr_time_wall_ns() / 1000);
  for (size_t k = 0; k < r->nuses; k++) {
    tsr__lease_use_t *u = &r->uses[k];
    tsr__lease_seen_t *seen = tsr__seen(b, u->lease->id, true);
    if (seen) {
      seen->used = n >= 0 ? u->used : 0;
      seen->seen = n >= 0;
      if (n >= 0 && u->used <= u->lease->bytes) seen->acted = false; /* the episode is over */
    }
    if (u->used > u->lease->bytes) tsr__act_on_lease(b, r, u, now);
    free(u->targets);
    u->targets = NULL;
    u->ntargets = u->cap = 0;
  }
}

/* The scratch buffers (NVML's process rows, their SM samples), made at
 * first use. */
static bool tsr__buf_ready(tsr_backstop_t *b) {
  if (!b->util) {
    b->util = calloc(TSR__PROCS_MAX, sizeof(*b->util));
    b->util_cap = b->util ? TSR__PROCS_MAX : 0;
  }
  if (b->buf) return true;
  b->buf = calloc(64, sizeof(*b->buf));
  if (!b->buf) return false;
  b->buf_cap = 64;
  return true;
}

/* Forgets the leases that are no longer active. */
static void tsr__seen_prune(tsr_backstop_t *b) {
  const tsr_lease_table_t *t = tsr_lease_service_table(b->ctx.leases);
  size_t kept = 0;
  for (size_t i = 0; i < b->nseen; i++)
    if (tsr_lease_table_find(t, b->seen[i].lease)) b->seen[kept++] = b->seen[i];
  b->nseen = kept;
}

void tsr_backstop_run(tsr_backstop_t *b, const tsr_procs_t *procs, uint64_t now) {
  if (!b || !tsr__buf_ready(b)) return;
  tsr__seen_prune(b);
  tsr__round_t r = {.ctx = &b->ctx, .procs = procs, .copy = malloc(sizeof(tsr_region_copy_t))};
  if (!r.copy) return;
  for (size_t i = 0; i < b->count; i++)
    if (b->dev[i].handle) tsr__round_device(b, &r, i, now);
  tsr__round_end(&r);
}

tsr_lease_over_limit_t tsr_backstop_over_limit_of(const tsr_lease_t *l, tsr_lease_over_limit_t node) {
  return l->over_limit != TSR_LEASE_OVER_LIMIT_DEFAULT ? l->over_limit : node;
}

int tsr_backstop_running(void *ctx, uint64_t lease, uint32_t device) {
  tsr_backstop_t *b = ctx;
  if (!tsr_backstop_watches(b, device)) return -1;
  const tsr__lease_seen_t *s = tsr__seen(b, lease, false);
  return s ? s->ran : -1;
}

bool tsr_backstop_lease_used(tsr_backstop_t *b, uint64_t lease, uint64_t *out_bytes) {
  const tsr__lease_seen_t *s = b ? tsr__seen(b, lease, false) : NULL;
  if (!s || !s->seen) return false;
  *out_bytes = s->used;
  return true;
}

/* ---- for other readers (`tessera top`) ------------------------------------------ */

bool tsr_backstop_watches(const tsr_backstop_t *b, uint32_t device) {
  return b && device < b->count && b->dev[device].handle != NULL;
}

long tsr_backstop_attribute(tsr_backstop_t *b, const tsr_procs_t *procs, uint32_t device, tsr_backstop_proc_t *out,
                            size_t cap) {
  if (!tsr_backstop_watches(b, device) || !tsr__buf_ready(b)) return -1;
  tsr__round_t r = {.ctx = &b->ctx, .procs = procs, .copy = malloc(sizeof(tsr_region_copy_t))};
  long n = r.copy && tsr__round_begin(&r, device) ? tsr__read_procs(b, device) : -1;
  size_t k = 0;
  for (long i = 0; i < n && k < cap; i++) {
    const tsr_nvml_process_info_t *info = &b->buf[i];
    if (info->pid == 0 || info->pid > INT32_MAX) continue;
    int32_t pid = (int32_t)info->pid;
    const tsr__lease_use_t *u = tsr__attribute(&r, pid, tsr_procs_find(procs, pid));
    out[k++] = (tsr_backstop_proc_t){.pid = pid, .used_bytes = tsr__used_of(info), .lease = u ? u->lease->id : 0};
  }
  tsr__round_end(&r);
  return n < 0 ? -1 : (long)k;
}

bool tsr_backstop_sm_util(tsr_backstop_t *b, uint32_t device, uint64_t since_us, tsr_device_proc_util_t *out,
                          size_t cap, size_t *out_count) {
  *out_count = 0;
  if (!tsr_backstop_watches(b, device)) return false;
  tsr_nvml_return_t r = tsr_device_nvml_process_sm(b->nvml, b->dev[device].handle, since_us, out, cap, out_count);
  if (r != TSR_NVML_SUCCESS && r != TSR_NVML_ERROR_NOT_SUPPORTED)
    tsr_log_debug("device %u: nvmlDeviceGetProcessUtilization: %s", device, tsr_device_nvml_error(b->nvml, r));
  return r == TSR_NVML_SUCCESS;
}
