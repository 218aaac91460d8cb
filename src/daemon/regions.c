/* regions.c: the shared region of every active lease (seed 002).
 *
 * The daemon keeps one mapping per active lease, in id order (ids only
 * grow, so a new lease is an append), in a directory only it can write.
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
#include "daemon/daemon.h"

typedef struct {
  uint64_t id;
  tsr_region_t *region;
  uint64_t seen_launches, seen_gpu_ns; /* the counters at the last share tick */
  uint32_t device, sm_ppm;
  bool running; /* launched between the last two share ticks */
} tsr__held_t;

struct tsr_regions_s {
  char dir[256];
  int dir_fd;
  tsr__held_t *held; /* sorted by id */
  uint32_t stream_ppm;
  uint64_t burst_ns;
  size_t count, cap;
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
  for (size_t i = 0; i < rs->count; i++) tsr_region_close(rs->held[i].region);
  free(rs->held);
  close(rs->dir_fd);
  free(rs);
}

const char *tsr_regions_dir(const tsr_regions_t *rs) { return rs->dir; }

static ptrdiff_t tsr__find(const tsr_regions_t *rs, uint64_t id) {
  size_t lo = 0, hi = rs->count;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (rs->held[mid].id < id) lo = mid + 1;
    else hi = mid;
  }
  return lo < rs->count && rs->held[lo].id == id ? (ptrdiff_t)lo : -1;
}

tsr_region_t *tsr_regions_find(const tsr_regions_t *rs, uint64_t id) {
  ptrdiff_t i = rs ? tsr__find(rs, id) : -1;
  return i < 0 ? NULL : rs->held[i].region;
}

/* An intact region of this very lease, as a restarted daemon finds it. */
static tsr_region_t *tsr__adopt(tsr_regions_t *rs, const tsr_lease_t *l) {
  char name[64];
  tsr_region_file_name(l->id, name, sizeof(name));
  struct stat sb;
  if (fstatat(rs->dir_fd, name, &sb, AT_SYMLINK_NOFOLLOW) != 0) return NULL;
  tsr_region_t *r = NULL;
  tsr_status_t st = tsr_region_open(rs->dir_fd, name, l->id, &r);
  if (st) {
    tsr_log_warn("region of lease %" PRIu64 " is made anew: %s", l->id, tsr_status_message(st));
    tsr_status_free(st);
    return NULL;
  }
  tsr_region_stats_t s;
  tsr_region_stats(r, &s);
  /* EXPIRED while the lease is active: the backstop revoked it; that stays */
  if (s.limit_bytes != l->bytes || s.device != l->device || s.state == TSR_REGION_RELEASED ||
      s.corrupt || sb.st_uid != l->owner_uid) {
    tsr_log_warn("region of lease %" PRIu64 " does not match the lease; made anew", l->id);
    tsr_region_close(r);
    return NULL;
  }
  return r;
}

void tsr_regions_set_compute(tsr_regions_t *rs, uint32_t stream_ppm, uint64_t burst_ns) {
  rs->stream_ppm = stream_ppm;
  rs->burst_ns = burst_ns;
}

tsr_status_t tsr_regions_add(tsr_regions_t *rs, const tsr_lease_t *l, const tsr_device_t *dev) {
  if (tsr__find(rs, l->id) >= 0) return NULL;
  tsr__held_t *h = tsr_array_grow(rs->held, &rs->cap, rs->count + 1, sizeof(*h), 16);
  if (!h) return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory");
  rs->held = h;
  tsr_region_t *r = tsr__adopt(rs, l);
  if (!r) {
    tsr_region_params_t p = {.lease_id = l->id, .device = l->device,
                             .device_uuid = dev ? dev->uuid : "",
                             .device_pci = dev ? dev->pci : "",
                             .device_opencl = dev ? dev->opencl : "", .limit_bytes = l->bytes,
                             .deadline_wall_ns = l->deadline_wall_ns, .owner_uid = l->owner_uid,
                             .generation = tsr_time_wall_ns(), .sm_ppm = l->sm_ppm,
                             .stream_ppm = rs->stream_ppm, .burst_ns = rs->burst_ns};
    TSR_RETURN_IF_ERROR(tsr_status_annotate(tsr_region_create(rs->dir_fd, &p, &r),
                                            "region of lease %" PRIu64 " in %s", l->id, rs->dir));
  }
  /* ids only grow, except at start-up, which adds in id order too */
  size_t pos = rs->count;
  while (pos > 0 && rs->held[pos - 1].id > l->id) pos--;
  memmove(&rs->held[pos + 1], &rs->held[pos], (rs->count - pos) * sizeof(*h));
  tsr_region_stats_t st;
  tsr_region_stats(r, &st);
  rs->held[pos] = (tsr__held_t){.id = l->id, .region = r, .seen_launches = st.launches,
                                .seen_gpu_ns = st.gpu_ns, .device = st.device, .sm_ppm = st.sm_ppm};
  rs->count++;
  return NULL;
}

void tsr_regions_end(tsr_regions_t *rs, uint64_t id, tsr_region_state_t state) {
  if (!rs) return;
  ptrdiff_t i = tsr__find(rs, id);
  if (i >= 0) {
    /* tenants see the end at once: their next charge fails */
    tsr_region_set_state(rs->held[i].region, state);
    tsr_region_close(rs->held[i].region);
    memmove(&rs->held[i], &rs->held[i + 1], (rs->count - (size_t)i - 1) * sizeof(*rs->held));
    rs->count--;
  }
  tsr_status_t st = tsr_region_remove(rs->dir_fd, id);
  if (st) {
    tsr_log_warn("%s", tsr_status_message(st));
    tsr_status_free(st);
  }
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

uint32_t tsr_regions_reap(tsr_regions_t *rs, uint64_t *out_bytes) {
  return tsr_regions_reap_with(rs, NULL, NULL, out_bytes);
}

int tsr_regions_dir_fd(const tsr_regions_t *rs) { return rs->dir_fd; }

uint32_t tsr_regions_reap_with(tsr_regions_t *rs, tsr_region_alive_fn alive, void *ctx,
                               uint64_t *out_bytes) {
  uint32_t freed = 0;
  uint64_t total = 0;
  for (size_t i = 0; rs && i < rs->count; i++) {
    uint64_t bytes = 0;
    uint32_t n = tsr_region_reap(rs->held[i].region, alive, ctx, &bytes);
    if (n)
      tsr_log_info("lease %" PRIu64 ": %u process slot(s) of exited processes freed, %" PRIu64
                   " bytes back",
                   rs->held[i].id, n, bytes);
    freed += n;
    total += bytes;
  }
  if (out_bytes) *out_bytes = total;
  return freed;
}

uint32_t tsr_regions_share_tick(tsr_regions_t *rs, uint32_t switch_cost_ppm) {
  if (!rs) return 0;
  for (size_t i = 0; i < rs->count; i++) {
    tsr__held_t *h = &rs->held[i];
    tsr_region_stats_t st;
    tsr_region_stats(h->region, &st);
    h->running = st.launches != h->seen_launches || st.gpu_ns != h->seen_gpu_ns;
    h->seen_launches = st.launches;
    h->seen_gpu_ns = st.gpu_ns;
  }
  /* the leases with a share that ran, device by device (few leases: the
   * quadratic walk is cheaper than grouping) */
  uint32_t scaled = 0;
  uint64_t room = switch_cost_ppm < TSR_PPM_ONE ? TSR_PPM_ONE - switch_cost_ppm : 0;
  for (size_t i = 0; i < rs->count; i++) {
    tsr__held_t *h = &rs->held[i];
    if (!h->sm_ppm) continue;
    uint64_t sum = 0;
    uint32_t running = 0;
    for (size_t j = 0; h->running && j < rs->count; j++) {
      const tsr__held_t *o = &rs->held[j];
      if (o->device != h->device || !o->sm_ppm || !o->running) continue;
      sum += o->sm_ppm;
      running++;
    }
    uint32_t now = 0; /* the lease's own share */
    if (running >= 2 && switch_cost_ppm && sum > room) {
      uint64_t v = (uint64_t)h->sm_ppm * room / sum;
      now = v ? (uint32_t)v : 1;
      scaled++;
    }
    tsr_region_set_share_now(h->region, now);
  }
  return scaled;
}
