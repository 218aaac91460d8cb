/* regions.c: the shared region of every active lease (seed 002).
 *
 * The daemon keeps, per active lease, what its region must say (the lease
 * table's limit, device and owner, the compute settings, the state the
 * daemon gave it, the share it put in force), in id order (ids only grow,
 * so a new lease is an append), in a directory only it can write. It never
 * maps a region: its tenant owns the file and can shrink it under any
 * mapping (region/region.h). Every access reads a copy; every enforcement
 * tick compares the copy with what the region must say and puts the
 * daemon's words back in place when a tenant changed them (the limit, the
 * state word, the size), reports it once, and remembers that
 * the lease's tenants wrote what no shim writes (lease show and top say
 * so; the backstop never took a region's word for what a lease uses).
 *
 * A region outlives a daemon restart: tenants keep their mappings, so at
 * start an intact region of a restored lease is adopted with its counters,
 * and only a missing or damaged one is made anew. Files of leases that are
 * no longer active are removed. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/array.h"
#include "base/fs.h"
#include "base/log.h"
#include "base/time.h"
#include "base/units.h"
#include "daemon/regions.h"

/* Damage a tenant can do that the daemon puts back; counters it cannot. */
#define TSR__REPAIRABLE \
  (TSR_REGION_DAMAGE_SIZE | TSR_REGION_DAMAGE_HEADER | TSR_REGION_DAMAGE_STATE | TSR_REGION_DAMAGE_COMPUTE)

typedef struct {
  uint64_t id;
  tsr_region_params_t truth; /* its strings: see tsr__truth_of */
  char uuid[TSR_DEVICE_UUID_MAX], pci[TSR_DEVICE_PCI_MAX], opencl[TSR_DEVICE_OPENCL_MAX];
  tsr_region_state_t state;            /* active, or expired while the lease lives (adopted so) */
  uint32_t share_now;                  /* the share the daemon put in force (0: the lease's) */
  uint64_t seen_launches, seen_gpu_ns; /* the counters at the last share tick */
  bool running;                        /* launched between the last two share ticks */
  uint32_t found;                      /* every damage bit seen since the region was made */
} tsr__held_t;

struct tsr_regions_s {
  char dir[256];
  int dir_fd;
  tsr__held_t *held; /* sorted by id */
  uint32_t stream_ppm;
  uint64_t burst_ns;
  size_t count, cap;
  tsr_regions_damage_fn on_damage;
  void *on_damage_ctx;
};

tsr_status_t tsr_regions_open(const char *dir, tsr_regions_t **out) {
  *out = NULL;
  if (strlen(dir) >= sizeof(((tsr_regions_t *)0)->dir))
    return tsr_status_make(TSR_INVALID_ARGUMENT, "region directory path is too long");
  /* 0711: tenants reach their own file by name, nobody lists the others */
  TSR_RETURN_IF_ERROR(tsr_fs_make_private_dir(dir, 0711, "region directory"));
  tsr_regions_t *rs = calloc(1, sizeof(*rs));
  if (!rs) return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory");
  snprintf(rs->dir, sizeof(rs->dir), "%s", dir);
  rs->dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (rs->dir_fd < 0) {
    tsr_status_t st = tsr_status_from_errno(errno, "open region directory %s", dir);
    free(rs);
    return st;
  }
  *out = rs;
  return NULL;
}

void tsr_regions_close(tsr_regions_t *rs) {
  if (!rs) return;
  free(rs->held);
  close(rs->dir_fd);
  free(rs);
}

const char *tsr_regions_dir(const tsr_regions_t *rs) { return rs->dir; }

int tsr_regions_dir_fd(const tsr_regions_t *rs) { return rs->dir_fd; }

void tsr_regions_on_damage(tsr_regions_t *rs, tsr_regions_damage_fn fn, void *ctx) {
  rs->on_damage = fn;
  rs->on_damage_ctx = ctx;
}

static ptrdiff_t tsr__find(const tsr_regions_t *rs, uint64_t id) {
  size_t lo = 0, hi = rs ? rs->count : 0;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (rs->held[mid].id < id)
      lo = mid + 1;
    else
      hi = mid;
  }
  return rs && lo < rs->count && rs->held[lo].id == id ? (ptrdiff_t)lo : -1;
}

static tsr__held_t *tsr__held(const tsr_regions_t *rs, uint64_t id) {
  ptrdiff_t i = tsr__find(rs, id);
  return i < 0 ? NULL : &rs->held[i];
}

/* What the region must say. Entries move (the array grows, entries are
 * removed), so the device's names are pointed at afresh each time. */
static const tsr_region_params_t *tsr__truth_of(tsr__held_t *h) {
  h->truth.device_uuid = h->uuid;
  h->truth.device_pci = h->pci;
  h->truth.device_opencl = h->opencl;
  return &h->truth;
}

tsr_status_t tsr_regions_update(tsr_regions_t *rs, const tsr_lease_t *l) {
  tsr__held_t *h = tsr__held(rs, l->id);
  if (!h) return tsr_status_make(TSR_NOT_FOUND, "lease %llu has no region", (unsigned long long)l->id);
  tsr_region_params_t *t = &h->truth;
  uint32_t damage = TSR_REGION_DAMAGE_HEADER;
  if (t->sm_ppm != l->sm_ppm) {
    /* the lease's own share until the next share tick weighs it again */
    damage |= TSR_REGION_DAMAGE_COMPUTE;
    h->share_now = 0;
  }
  if (l->bytes > t->high_limit_bytes) t->high_limit_bytes = l->bytes;
  t->limit_bytes = l->bytes;
  t->sm_ppm = l->sm_ppm;
  t->deadline_wall_ns = l->deadline_wall_ns;
  return tsr_region_repair(rs->dir_fd, tsr__truth_of(h), h->state, h->share_now, damage);
}

bool tsr_regions_has(const tsr_regions_t *rs, uint64_t id) { return tsr__find(rs, id) >= 0; }

void tsr_regions_set_compute(tsr_regions_t *rs, uint32_t stream_ppm, uint64_t burst_ns) {
  rs->stream_ppm = stream_ppm;
  rs->burst_ns = burst_ns;
}

/* What lease `l`'s region must say (generation 0: not yet known). */
static void tsr__truth(const tsr_regions_t *rs, tsr__held_t *h, const tsr_lease_t *l, const tsr_device_t *dev) {
  snprintf(h->uuid, sizeof(h->uuid), "%s", dev ? dev->uuid : "");
  snprintf(h->pci, sizeof(h->pci), "%s", dev ? dev->pci : "");
  snprintf(h->opencl, sizeof(h->opencl), "%s", dev ? dev->opencl : "");
  h->truth = (tsr_region_params_t){.lease_id = l->id,
                                   .device = l->device,
                                   .limit_bytes = l->bytes,
                                   .high_limit_bytes = l->bytes,
                                   .deadline_wall_ns = l->deadline_wall_ns,
                                   .owner_uid = l->owner_uid,
                                   .sm_ppm = l->sm_ppm,
                                   .stream_ppm = rs->stream_ppm,
                                   .burst_ns = rs->burst_ns};
}

/* An intact region of this very lease, as a restarted daemon finds it: its
 * generation and state (expired while the lease is active: an earlier
 * tesserad's backstop revoked it, and that stays). False: make it anew. */
static bool tsr__adopt(tsr_regions_t *rs, tsr__held_t *h, uint64_t device_bytes) {
  tsr_region_copy_t *c = malloc(sizeof(*c));
  if (!c) return false;
  /* A restarted daemon does not know the limits the lease had before (a
   * shrink leaves counters above the limit): counters up to the device's
   * size are the tenants' report, not tampering. */
  h->truth.high_limit_bytes = device_bytes > h->truth.limit_bytes ? device_bytes : h->truth.limit_bytes;
  tsr_status_t st = tsr_region_read(rs->dir_fd, tsr__truth_of(h), TSR_REGION_ACTIVE, c);
  bool ok = false;
  if (st) {
    if (tsr_status_code(st) != TSR_NOT_FOUND)
      tsr_log_warn("region of lease %" PRIu64 " is made anew: %s", h->id, tsr_status_message(st));
    tsr_status_free(st);
  } else if ((c->damage & ~TSR_REGION_DAMAGE_STATE) || !c->generation ||
             (c->stats.state != TSR_REGION_ACTIVE && c->stats.state != TSR_REGION_EXPIRED)) {
    tsr_log_warn("region of lease %" PRIu64 " does not match the lease; made anew", h->id);
  } else {
    h->truth.generation = c->generation;
    h->state = c->stats.state;
    uint64_t held = c->stats.used_bytes > c->stats.peak_bytes ? c->stats.used_bytes : c->stats.peak_bytes;
    h->truth.high_limit_bytes = held > h->truth.limit_bytes ? held : h->truth.limit_bytes;
    ok = true;
  }
  if (!ok) h->truth.high_limit_bytes = h->truth.limit_bytes;
  free(c);
  return ok;
}

tsr_status_t tsr_regions_add(tsr_regions_t *rs, const tsr_lease_t *l, const tsr_device_t *dev) {
  if (tsr__find(rs, l->id) >= 0) return NULL;
  tsr__held_t *v = tsr_array_grow(rs->held, &rs->cap, rs->count + 1, sizeof(*v), 16);
  if (!v) return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory");
  rs->held = v;
  tsr__held_t h = {.id = l->id, .state = TSR_REGION_ACTIVE};
  tsr__truth(rs, &h, l, dev);
  if (!tsr__adopt(rs, &h, dev ? dev->total_bytes : 0)) {
    h.truth.generation = tsr_time_wall_ns();
    h.state = TSR_REGION_ACTIVE;
    TSR_RETURN_IF_ERROR(tsr_status_annotate(tsr_region_create(rs->dir_fd, tsr__truth_of(&h)),
                                            "region of lease %" PRIu64 " in %s", l->id, rs->dir));
  }
  /* ids only grow, except at start-up, which adds in id order too */
  size_t pos = rs->count;
  while (pos > 0 && rs->held[pos - 1].id > l->id) pos--;
  memmove(&rs->held[pos + 1], &rs->held[pos], (rs->count - pos) * sizeof(*v));
  rs->held[pos] = h;
  rs->count++;
  tsr_region_copy_t *c = malloc(sizeof(*c));
  if (c && tsr_regions_read(rs, l->id, c)) {
    tsr__held_t *e = tsr__held(rs, l->id);
    e->seen_launches = c->stats.launches;
    e->seen_gpu_ns = c->stats.gpu_ns;
  }
  free(c);
  return NULL;
}

static void tsr__warn(const char *what, uint64_t id, tsr_status_t st) {
  if (!st) return;
  tsr_log_warn("region of lease %" PRIu64 ": %s: %s", id, what, tsr_status_message(st));
  tsr_status_free(st);
}

void tsr_regions_set_state(tsr_regions_t *rs, uint64_t id, tsr_region_state_t state) {
  tsr__held_t *h = tsr__held(rs, id);
  if (!h) return;
  h->state = state;
  /* tenants see it at once: their next charge fails */
  tsr__warn("state not written", id, tsr_region_write_state(rs->dir_fd, id, state));
}

void tsr_regions_end(tsr_regions_t *rs, uint64_t id, tsr_region_state_t state) {
  if (!rs) return;
  ptrdiff_t i = tsr__find(rs, id);
  if (i >= 0) {
    if (rs->held[i].state != state) tsr_regions_set_state(rs, id, state);
    memmove(&rs->held[i], &rs->held[i + 1], (rs->count - (size_t)i - 1) * sizeof(*rs->held));
    rs->count--;
  }
  tsr__warn("not removed", id, tsr_region_remove(rs->dir_fd, id));
}

bool tsr_regions_revoked(const tsr_regions_t *rs, uint64_t id) {
  const tsr__held_t *h = tsr__held(rs, id);
  return h && h->state != TSR_REGION_ACTIVE;
}

bool tsr_regions_tampered(const tsr_regions_t *rs, uint64_t id) {
  const tsr__held_t *h = tsr__held(rs, id);
  return h && h->found != 0;
}

bool tsr_regions_read(tsr_regions_t *rs, uint64_t id, tsr_region_copy_t *out) {
  tsr__held_t *h = tsr__held(rs, id);
  if (!h) return false;
  tsr_status_t st = tsr_region_read(rs->dir_fd, tsr__truth_of(h), h->state, out);
  if (st && tsr_status_code(st) == TSR_NOT_FOUND) {
    /* only the daemon can unlink in its directory: gone means it was never
     * made, or a restart lost it; make it anew */
    tsr_status_free(st);
    h->truth.generation = tsr_time_wall_ns();
    st = tsr_region_create(rs->dir_fd, tsr__truth_of(h));
    if (!st && h->state != TSR_REGION_ACTIVE) st = tsr_region_write_state(rs->dir_fd, id, h->state);
    if (!st) st = tsr_region_read(rs->dir_fd, tsr__truth_of(h), h->state, out);
  }
  if (st) {
    tsr__warn("not read", id, st);
    return false;
  }
  if (!out->damage) return true;
  uint32_t fresh = out->damage & ~h->found; /* reported once per kind and region */
  h->found |= out->damage;
  tsr_status_t rst = NULL;
  if (out->damage & TSR__REPAIRABLE)
    rst = tsr_region_repair(rs->dir_fd, tsr__truth_of(h), h->state, h->share_now, out->damage);
  if (fresh && rs->on_damage) rs->on_damage(rs->on_damage_ctx, id, out->damage, rst == NULL);
  tsr__warn("not repaired", id, rst);
  return true;
}

bool tsr_regions_stats(tsr_regions_t *rs, uint64_t id, tsr_region_stats_t *out) {
  memset(out, 0, sizeof(*out));
  tsr_region_copy_t *c = malloc(sizeof(*c));
  if (!c) return false;
  bool ok = tsr_regions_read(rs, id, c);
  const tsr__held_t *h = tsr__held(rs, id);
  if (ok && h) {
    *out = c->stats;
    uint64_t limit = h->truth.limit_bytes;
    /* the tenants' word, clamped: never more than the lease may hold, and
     * without what the slots of dead processes still hold */
    uint64_t used = c->stats.used_bytes > c->dead_bytes ? c->stats.used_bytes - c->dead_bytes : 0;
    out->used_bytes = used < limit ? used : limit;
    out->peak_bytes = c->stats.peak_bytes < limit ? c->stats.peak_bytes : limit;
    if (out->peak_bytes < out->used_bytes) out->peak_bytes = out->used_bytes;
    out->limit_bytes = limit;
    out->lease_id = id;
    out->device = h->truth.device;
    out->state = h->state;
    out->sm_ppm = h->truth.sm_ppm;
    out->sm_now_ppm = h->share_now && h->share_now < h->truth.sm_ppm ? h->share_now : h->truth.sm_ppm;
    out->corrupt = h->found != 0;
  }
  free(c);
  return ok && h;
}

void tsr_regions_sweep(tsr_regions_t *rs) {
  int fd = dup(rs->dir_fd);
  DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
  if (!d) {
    if (fd >= 0) close(fd);
    return;
  }
  rewinddir(d);
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    uint64_t id = 0;
    char tail[16] = "";
    bool ours = sscanf(e->d_name, "lease-%" SCNu64 ".regio%15s", &id, tail) == 2 && strcmp(tail, "n") == 0;
    bool stale_tmp = strncmp(e->d_name, ".tmp-lease-", 11) == 0;
    if ((ours && tsr__find(rs, id) < 0) || stale_tmp) {
      if (unlinkat(rs->dir_fd, e->d_name, 0) == 0)
        tsr_log_info("removed region file %s/%s of no active lease", rs->dir, e->d_name);
    }
  }
  closedir(d);
}

uint32_t tsr_regions_reap_with(tsr_regions_t *rs, tsr_region_alive_fn alive, void *ctx, uint64_t *out_bytes) {
  uint32_t marked = 0;
  uint64_t total = 0;
  tsr_region_copy_t *c = rs && rs->count ? malloc(sizeof(*c)) : NULL;
  for (size_t i = 0; c && i < rs->count; i++) {
    uint64_t id = rs->held[i].id;
    if (!tsr_regions_read(rs, id, c)) continue;
    uint32_t n = 0;
    uint64_t bytes = 0;
    for (uint32_t k = 0; k < c->nslots; k++) {
      const tsr_region_slot_info_t *s = &c->slots[k];
      if (s->dead || (alive ? alive(ctx, &s->proc) : tsr_region_proc_alive(&s->proc))) continue;
      tsr_status_t st = tsr_region_mark_dead(rs->dir_fd, id, s->slot, &s->proc);
      if (st) {
        tsr__warn("a dead process's slot not marked", id, st);
        continue;
      }
      n++;
      bytes += s->used_bytes;
    }
    if (n)
      tsr_log_info("lease %" PRIu64 ": %u slot(s) of exited processes marked, %" PRIu64 " bytes back to the lease", id,
                   n, bytes);
    marked += n;
    total += bytes;
  }
  free(c);
  if (out_bytes) *out_bytes = total;
  return marked;
}

uint32_t tsr_regions_share_tick(tsr_regions_t *rs, uint32_t switch_cost_ppm, tsr_regions_running_fn running,
                                void *ctx) {
  if (!rs || !rs->count) return 0;
  tsr_region_copy_t *c = malloc(sizeof(*c));
  if (!c) return 0;
  for (size_t i = 0; i < rs->count; i++) {
    tsr__held_t *h = &rs->held[i];
    if (!h->truth.sm_ppm) continue;
    bool read = tsr_regions_read(rs, h->id, c);
    /* what the driver says, where it can: a tenant's launch counters are its
     * own word, and counters it writes must not scale its neighbours down */
    int said = running ? running(ctx, h->id, h->truth.device) : -1;
    bool moved = read && (c->stats.launches != h->seen_launches || c->stats.gpu_ns != h->seen_gpu_ns);
    h->running = said >= 0 ? said > 0 : moved;
    if (read) {
      h->seen_launches = c->stats.launches;
      h->seen_gpu_ns = c->stats.gpu_ns;
    }
  }
  free(c);
  /* the leases with a share that ran, device by device (few leases: the
   * quadratic walk is cheaper than grouping) */
  uint32_t scaled = 0;
  uint64_t room = switch_cost_ppm < TSR_PPM_ONE ? TSR_PPM_ONE - switch_cost_ppm : 0;
  for (size_t i = 0; i < rs->count; i++) {
    tsr__held_t *h = &rs->held[i];
    if (!h->truth.sm_ppm) continue;
    uint64_t sum = 0;
    uint32_t n = 0;
    for (size_t j = 0; h->running && j < rs->count; j++) {
      const tsr__held_t *o = &rs->held[j];
      if (o->truth.device != h->truth.device || !o->truth.sm_ppm || !o->running) continue;
      sum += o->truth.sm_ppm;
      n++;
    }
    uint32_t now = 0; /* the lease's own share */
    if (n >= 2 && switch_cost_ppm && sum > room) {
      uint64_t v = (uint64_t)h->truth.sm_ppm * room / sum;
      now = v ? (uint32_t)v : 1;
      scaled++;
    }
    if (now != h->share_now) {
      h->share_now = now;
      tsr__warn("share not written", h->id, tsr_region_write_share_now(rs->dir_fd, h->id, now));
    }
  }
  return scaled;
}
