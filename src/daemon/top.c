/* top.c: the `top` request: what a node's GPUs hold, at a glance.
 *
 * For every device: its active leases with their regions' counters (memory
 * admitted against the limit, the compute share's counters), each with its
 * processes, and the GPU processes NVML lists that belong to no lease. A
 * lease's processes are the holders of its region's slots (resolved to
 * host pids through the /proc snapshot) and the processes NVML lists that
 * the backstop's rules give it (tsr_backstop_attribute: the very answer the
 * backstop acts on). NVML's per-process SM utilisation, the mean of each
 * process's samples over the last second, is summed per lease. Without the
 * backstop (off, declared devices, no NVML) only the regions speak: the
 * processes that hold slots, and null where NVML would have answered.
 *
 * Cost: a /proc snapshot at most every TSR_TOP_SNAPSHOT_AGE_NS (the one the
 * enforcement tick keeps, when it is recent enough), two NVML calls per
 * watched device, and per process listed two small /proc reads and a user
 * lookup (cached for the request). Bounded by TSR_TOP_PROCS_MAX per device.
 * Any local user may ask. An admin sees every lease and process; an
 * ordinary user sees her own leases and her own processes in full, and of
 * everyone else's only counts and sums per device ("others"): who holds
 * what, and what they run, is for its owner and the admins. Of a command
 * only its executable's name is shown, never its arguments. */
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/time.h"
#include "daemon/backstop.h"
#include "daemon/daemon.h"
#include "daemon/identity.h"
#include "daemon/procs.h"
#include "daemon/regions.h"
#include "daemon/top.h"
#include "proto/proto.h"

#define TSR__UTIL_WINDOW_US 1000000ull /* NVML's samples of the last second */
#define TSR__COMMAND_MAX 64
#define TSR__USERS_CACHED 64

/* One process of a device's part of the reply: a (pid, lease) pair, so a
 * process with slots in two leases is listed under each. */
typedef struct {
  int32_t pid;
  uint64_t lease;      /* 0: no lease */
  bool slot;           /* holds a slot of the lease's region */
  uint64_t slot_bytes; /* what its slot holds (the shim's charges) */
  bool listed;         /* NVML lists it */
  uint64_t gpu_bytes;  /* NVML's used memory */
} tsr__entry_t;

typedef struct {
  tsr_daemon_t *d;
  const tsr_identity_t *who; /* who asks: an admin sees all, a user her own */
  tsr__entry_t *v;           /* TSR_TOP_PROCS_MAX of them */
  size_t count;
  tsr_backstop_proc_t *nv; /* NVML's rows of one device */
  tsr_region_copy_t *copy; /* scratch: one region at a time */
  tsr_device_proc_util_t *util;
  size_t nutil;
  bool util_known;
  struct {
    uint32_t uid;
    char name[TSR_LEASE_NAME_MAX];
  } users[TSR__USERS_CACHED];
  size_t nusers;
} tsr__top_t;

static uint64_t tsr__add_sat(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

static int tsr__cmp_entry(const void *a, const void *b) {
  const tsr__entry_t *x = a, *y = b;
  if (x->lease != y->lease) return x->lease < y->lease ? -1 : 1;
  return x->pid < y->pid ? -1 : x->pid > y->pid;
}

static tsr__entry_t *tsr__entry(tsr__top_t *t, int32_t pid, uint64_t lease) {
  for (size_t i = 0; i < t->count; i++)
    if (t->v[i].pid == pid && t->v[i].lease == lease) return &t->v[i];
  if (t->count >= TSR_TOP_PROCS_MAX) return NULL;
  t->v[t->count] = (tsr__entry_t){.pid = pid, .lease = lease};
  return &t->v[t->count++];
}

/* The SM utilisation NVML gave process `pid` (util is in pid order). */
static const tsr_device_proc_util_t *tsr__util_of(const tsr__top_t *t, int32_t pid) {
  size_t lo = 0, hi = t->nutil;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (t->util[mid].pid < (uint32_t)pid)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < t->nutil && t->util[lo].pid == (uint32_t)pid ? &t->util[lo] : NULL;
}

/* ---- what a process is ------------------------------------------------------ */

static const char *tsr__user_name(tsr__top_t *t, uint32_t uid) {
  for (size_t i = 0; i < t->nusers; i++)
    if (t->users[i].uid == uid) return t->users[i].name;
  size_t k = t->nusers < TSR__USERS_CACHED ? t->nusers++ : TSR__USERS_CACHED - 1;
  t->users[k].uid = uid;
  struct passwd pw, *found = NULL;
  char buf[4096];
  if (getpwuid_r(uid, &pw, buf, sizeof(buf), &found) == 0 && found && found->pw_name[0])
    snprintf(t->users[k].name, sizeof(t->users[k].name), "%s", found->pw_name);
  else
    snprintf(t->users[k].name, sizeof(t->users[k].name), "%u", uid);
  return t->users[k].name;
}

/* Control characters become '?': a name is shown in other people's
 * terminals. */
static void tsr__printable(char *s) {
  for (; *s; s++)
    if ((unsigned char)*s < 0x20 || *s == 0x7f) *s = '?';
}

/* Copies `src` into out[cap], cut to fit. */
static void tsr__copy(char *out, size_t cap, const char *src) {
  size_t n = strnlen(src, cap - 1);
  memcpy(out, src, n);
  out[n] = '\0';
}

/* The process's command: the last path element of its first argument,
 * else its comm; "" when it is gone. */
static void tsr__command_of(int32_t pid, char *out, size_t cap) {
  char path[32], buf[512];
  out[0] = '\0';
  snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
  if (fd >= 0) close(fd);
  if (n > 0) {
    buf[n] = '\0'; /* the first argument ends at its NUL */
    const char *slash = strrchr(buf, '/');
    tsr__copy(out, cap, slash && slash[1] ? slash + 1 : buf);
  }
  if (!out[0]) { /* a kernel thread, a zombie, or an emptied argv */
    snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
    if (fd >= 0) close(fd);
    if (n > 0) {
      buf[n] = '\0';
      buf[strcspn(buf, "\n")] = '\0';
      tsr__copy(out, cap, buf);
    }
  }
  tsr__printable(out);
}

/* ---- the reply -------------------------------------------------------------- */

static void tsr__write_proc(tsr__top_t *t, tsr_json_writer_t *w, const tsr__entry_t *e) {
  uint32_t uid = 0;
  bool has_uid = tsr_procs_uid(&t->d->procs, e->pid, &uid);
  char command[TSR__COMMAND_MAX];
  tsr__command_of(e->pid, command, sizeof(command));
  const tsr_device_proc_util_t *u = tsr__util_of(t, e->pid);
  tsr_json_object_begin(w);
  tsr_json_key_i64(w, "pid", e->pid);
  tsr_json_key_u64_or_null(w, "uid", has_uid, uid);
  tsr_json_key_string_or_null(w, "user", has_uid ? tsr__user_name(t, uid) : NULL);
  tsr_json_key_string(w, "command", command);
  tsr_json_key_bool(w, "slot", e->slot);
  tsr_json_key_u64_or_null(w, "used_bytes", e->slot, e->slot_bytes);
  tsr_json_key_u64_or_null(w, "gpu_bytes", e->listed, e->gpu_bytes);
  /* a process NVML has no sample of ran no kernel in the window: 0% */
  tsr_json_key_u64_or_null(w, "sm_util", t->util_known, u ? u->sm_percent : 0);
  tsr_json_object_end(w);
}

/* Entries [first, end) of lease `id` (t->v sorted by lease, then pid). */
static size_t tsr__range(const tsr__top_t *t, uint64_t id, size_t *out_first) {
  size_t first = 0;
  while (first < t->count && t->v[first].lease < id) first++;
  size_t end = first;
  while (end < t->count && t->v[end].lease == id) end++;
  *out_first = first;
  return end;
}

static void tsr__write_lease(tsr__top_t *t, tsr_json_writer_t *w, const tsr_lease_t *l, bool listed,
                             uint64_t now_wall) {
  tsr_region_stats_t s = {0};
  bool r = tsr_regions_stats(t->d->regions, l->id, &s); /* the tenants' report, clamped */
  size_t first, end = tsr__range(t, l->id, &first);
  uint64_t gpu = 0, sm = 0;
  for (size_t i = first; i < end; i++) {
    const tsr_device_proc_util_t *u = tsr__util_of(t, t->v[i].pid);
    if (u) sm += u->sm_percent;
    if (t->v[i].listed) gpu = tsr__add_sat(gpu, t->v[i].gpu_bytes);
  }
  tsr_json_object_begin(w);
  tsr_json_key_u64(w, "id", l->id);
  tsr_json_key_string(w, "owner", l->owner);
  tsr_json_key_u64(w, "owner_uid", l->owner_uid);
  tsr_json_key_u64(w, "limit_bytes", l->bytes);
  tsr_json_key_u64_or_null(w, "used_bytes", r, s.used_bytes);
  tsr_json_key_u64_or_null(w, "peak_bytes", r, s.peak_bytes);
  tsr_json_key_u64_or_null(w, "attached", r, s.processes);
  tsr_json_key_u64_or_null(w, "gpu_bytes", listed, gpu);
  tsr_json_key_ppm_or_null(w, "sm_share", l->sm_ppm);
  tsr_json_key_u64(w, "sm_ppm", l->sm_ppm);
  tsr_json_key_u64_or_null(w, "sm_measured", t->util_known, sm > 100 ? 100 : sm);
  tsr_json_key_u64_or_null(w, "gpu_ns", r, s.gpu_ns);
  tsr_json_key_u64_or_null(w, "throttled_ns", r, s.throttled_ns);
  tsr_json_key_u64_or_null(w, "launches", r, s.launches);
  tsr_json_key_u64_or_null(w, "bypassed", r, s.bypassed);
  char b[48];
  tsr_time_format_rfc3339(l->deadline_wall_ns, 3, b, sizeof(b));
  tsr_json_key_string(w, "deadline", b);
  tsr_json_key_u64(w, "deadline_ns", l->deadline_wall_ns > INT64_MAX ? INT64_MAX : l->deadline_wall_ns);
  uint64_t left = tsr_time_sub_sat(l->deadline_wall_ns, now_wall);
  tsr_json_key_u64(w, "remaining_ns", left > INT64_MAX ? INT64_MAX : left);
  tsr_json_key_bool(w, "revoked", tsr_regions_revoked(t->d->regions, l->id));
  tsr_json_key_bool(w, "tampered", tsr_regions_tampered(t->d->regions, l->id));
  tsr_json_key_string(w, "usage", "reported");
  tsr_json_key(w, "processes");
  tsr_json_array_begin(w);
  for (size_t i = first; i < end; i++) tsr__write_proc(t, w, &t->v[i]);
  tsr_json_array_end(w);
  tsr_json_object_end(w);
}

/* Gathers device i's processes into t->v: NVML's rows, attributed, then
 * the holders of the slots of its leases' regions. */
static bool tsr__gather(tsr__top_t *t, uint32_t i, uint64_t now_wall) {
  tsr_daemon_t *d = t->d;
  t->count = 0;
  t->nutil = 0;
  long n = tsr_backstop_attribute(d->backstop, &d->procs, i, t->nv, TSR_TOP_PROCS_MAX);
  for (long k = 0; k < n; k++) {
    tsr__entry_t *e = tsr__entry(t, t->nv[k].pid, t->nv[k].lease);
    if (!e) break;
    e->listed = true;
    e->gpu_bytes = tsr__add_sat(e->gpu_bytes, t->nv[k].used_bytes);
  }
  const tsr_lease_table_t *table = tsr_lease_service_table(d->leases);
  for (size_t k = 0; k < tsr_lease_table_count(table); k++) {
    const tsr_lease_t *l = tsr_lease_table_at(table, k);
    if (l->device != i || !tsr_regions_read(d->regions, l->id, t->copy)) continue;
    for (uint32_t s = 0; s < t->copy->nslots; s++) {
      const tsr_region_slot_info_t *slot = &t->copy->slots[s];
      /* a slot names whatever process its tenant wrote: only the owner's count */
      const tsr_proc_t *p = slot->dead ? NULL : tsr_procs_resolve(&d->procs, &slot->proc);
      tsr__entry_t *e = p && p->uid == l->owner_uid ? tsr__entry(t, p->pid, l->id) : NULL;
      if (!e) continue; /* gone (tsr__snapshot_covers looked afresh) */
      e->slot = true;
      e->slot_bytes = tsr__add_sat(e->slot_bytes, slot->used_bytes);
    }
  }
  if (t->count > 1) qsort(t->v, t->count, sizeof(*t->v), tsr__cmp_entry);
  uint64_t since = now_wall / 1000 > TSR__UTIL_WINDOW_US ? now_wall / 1000 - TSR__UTIL_WINDOW_US : 0;
  t->util_known = n >= 0 && tsr_backstop_sm_util(d->backstop, i, since, t->util, TSR_TOP_PROCS_MAX, &t->nutil);
  return n >= 0;
}

/* Whether `who` may see lease `l`'s details. */
static bool tsr__sees_lease(const tsr__top_t *t, const tsr_lease_t *l) {
  return t->who->admin || l->owner_uid == t->who->uid;
}

/* Whether `who` may see process `e` of no lease. */
static bool tsr__sees_proc(tsr__top_t *t, const tsr__entry_t *e) {
  uint32_t uid = 0;
  return t->who->admin || (tsr_procs_uid(&t->d->procs, e->pid, &uid) && uid == t->who->uid);
}

/* What an ordinary user may know of the others on device i: counts and sums. */
static void tsr__write_others(tsr__top_t *t, tsr_json_writer_t *w, uint32_t i, bool listed) {
  const tsr_lease_table_t *table = tsr_lease_service_table(t->d->leases);
  uint64_t leases = 0, limit = 0, gpu = 0, procs = 0, loose = 0, loose_gpu = 0;
  for (size_t k = 0; k < tsr_lease_table_count(table); k++) {
    const tsr_lease_t *l = tsr_lease_table_at(table, k);
    if (l->device != i || tsr__sees_lease(t, l)) continue;
    leases++;
    limit = tsr__add_sat(limit, l->bytes);
    size_t first, end = tsr__range(t, l->id, &first);
    procs += end - first;
    for (size_t e = first; e < end; e++)
      if (t->v[e].listed) gpu = tsr__add_sat(gpu, t->v[e].gpu_bytes);
  }
  size_t first, end = tsr__range(t, 0, &first);
  for (size_t e = first; e < end; e++) {
    if (tsr__sees_proc(t, &t->v[e])) continue;
    loose++;
    if (t->v[e].listed) loose_gpu = tsr__add_sat(loose_gpu, t->v[e].gpu_bytes);
  }
  tsr_json_key(w, "others");
  tsr_json_object_begin(w);
  tsr_json_key_u64(w, "leases", leases);
  tsr_json_key_u64(w, "limit_bytes", limit);
  tsr_json_key_u64(w, "processes", procs);
  tsr_json_key_u64_or_null(w, "gpu_bytes", listed, gpu);
  tsr_json_key_u64(w, "unleased_processes", loose);
  tsr_json_key_u64_or_null(w, "unleased_gpu_bytes", listed, loose_gpu);
  tsr_json_object_end(w);
}

static void tsr__write_device(tsr__top_t *t, tsr_json_writer_t *w, uint32_t i, uint64_t now_wall) {
  const tsr_lease_table_t *table = tsr_lease_service_table(t->d->leases);
  const tsr_device_t *dev = tsr_lease_table_device(table, i);
  bool listed = tsr__gather(t, i, now_wall);
  tsr_json_object_begin(w);
  tsr_json_key_u64(w, "index", i);
  tsr_json_key_string_or_null(w, "uuid", dev->uuid);
  tsr_json_key_string(w, "name", dev->name);
  tsr_json_key_u64(w, "memory_bytes", dev->total_bytes);
  tsr_json_key_u64_or_null(w, "sm_count", dev->sm_count != 0, dev->sm_count);
  uint32_t committed = tsr_lease_table_sm_committed(table, i);
  tsr_json_key(w, "sm_committed");
  tsr_json_ppm(w, committed);
  tsr_json_key_u64(w, "sm_committed_ppm", committed);
  tsr_json_key_bool(w, "nvml", listed);
  tsr_json_key_bool(w, "sm_util_known", t->util_known);
  /* creates waiting for its room (lease create --wait): a count, whoever's */
  tsr_json_key_u64(w, "queued", tsr_lease_queue_count_on(t->d->waits.queue, i));
  tsr_json_key(w, "leases");
  tsr_json_array_begin(w);
  for (size_t k = 0; k < tsr_lease_table_count(table); k++) {
    const tsr_lease_t *l = tsr_lease_table_at(table, k);
    if (l->device == i && tsr__sees_lease(t, l)) tsr__write_lease(t, w, l, listed, now_wall);
  }
  tsr_json_array_end(w);
  tsr_json_key(w, "unleased");
  tsr_json_array_begin(w);
  size_t first, end = tsr__range(t, 0, &first);
  for (size_t k = first; k < end; k++)
    if (tsr__sees_proc(t, &t->v[k])) tsr__write_proc(t, w, &t->v[k]);
  tsr_json_array_end(w);
  if (!t->who->admin) tsr__write_others(t, w, i, listed);
  tsr_json_object_end(w);
}

/* Whether every holder of a slot of an active lease is in the snapshot: a
 * process that attached after it was taken is not, and the answer must
 * have it (NVML's processes are attributed through the snapshot too). */
static bool tsr__snapshot_covers(tsr_daemon_t *d, tsr_region_copy_t *copy) {
  const tsr_lease_table_t *table = tsr_lease_service_table(d->leases);
  for (size_t k = 0; k < tsr_lease_table_count(table); k++) {
    uint32_t ns = tsr_regions_read(d->regions, tsr_lease_table_at(table, k)->id, copy) ? copy->nslots : 0;
    for (uint32_t s = 0; s < ns; s++)
      if (!copy->slots[s].dead && !tsr_procs_resolve(&d->procs, &copy->slots[s].proc)) return false;
  }
  return true;
}

/* Whether the daemon's snapshot is recent enough to resolve slots by. */
static bool tsr__snapshot_recent(const tsr_procs_t *p) {
  if (!p->hz || !p->taken_ticks) return false;
  struct timespec ts;
  clock_gettime(CLOCK_BOOTTIME, &ts);
  uint64_t now = (uint64_t)ts.tv_sec * p->hz + (uint64_t)ts.tv_nsec * p->hz / TSR_NS_PER_S;
  return now >= p->taken_ticks && (now - p->taken_ticks) * TSR_NS_PER_S / p->hz < TSR_TOP_SNAPSHOT_AGE_NS;
}

void tsr_daemon_top(tsr_daemon_t *d, const tsr_identity_t *who, tsr_json_writer_t *w) {
  tsr__top_t *t = calloc(1, sizeof(*t));
  tsr__entry_t *v = calloc(TSR_TOP_PROCS_MAX, sizeof(*v));
  tsr_backstop_proc_t *nv = calloc(TSR_TOP_PROCS_MAX, sizeof(*nv));
  tsr_device_proc_util_t *util = calloc(TSR_TOP_PROCS_MAX, sizeof(*util));
  tsr_region_copy_t *copy = malloc(sizeof(*copy));
  if (!t || !v || !nv || !util || !copy) {
    free(t);
    free(v);
    free(nv);
    free(util);
    free(copy);
    tsr_proto_error_write(w, "out_of_memory", "out of memory");
    return;
  }
  t->d = d;
  t->who = who;
  t->v = v;
  t->nv = nv;
  t->util = util;
  t->copy = copy;
  /* the tick keeps the snapshot fresh when the backstop runs; else take one */
  if (!tsr__snapshot_recent(&d->procs) || !tsr__snapshot_covers(d, copy)) tsr_procs_scan(&d->procs);
  uint64_t now = tsr_time_wall_ns();
  const tsr_lease_table_t *table = tsr_lease_service_table(d->leases);
  tsr_json_key_bool(w, "ok", true);
  tsr_json_key(w, "top");
  tsr_json_object_begin(w);
  char b[48];
  tsr_time_format_rfc3339(now, 3, b, sizeof(b));
  tsr_json_key_string(w, "now", b);
  tsr_json_key_u64(w, "now_ns", now > INT64_MAX ? INT64_MAX : now);
  tsr_json_key(w, "devices");
  tsr_json_array_begin(w);
  for (uint32_t i = 0; i < tsr_lease_table_device_count(table); i++) tsr__write_device(t, w, i, now);
  tsr_json_array_end(w);
  tsr_json_object_end(w);
  free(t);
  free(v);
  free(nv);
  free(util);
  free(copy);
}
