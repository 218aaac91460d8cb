/* region.c: creating, mapping and charging a lease's shared region (see
 * region/region.h and layout.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/fs.h"
#include "base/log.h"
#include "region/bucket.h"
#include "region/layout.h"

struct tsr_region_s {
  tsr__region_file_t *f;
  size_t bytes;
  tsr_region_compute_t compute; /* read once when mapped (the share is read again
                                   at each use: a resize moves it) */
  _Atomic bool warned;          /* corruption is logged once per mapping */
  _Atomic uint64_t reaped_ns;   /* when a refused charge last looked for gone holders */
};

/* A refused charge looks through /proc for gone holders at most this often
 * per mapping: a process refused in a loop (a caller that allocates until
 * refused, 16 processes at the limit) does not read /proc for every slot on
 * every refusal, and a killed predecessor's bytes still come back within
 * about this long of a refusal. */
#define TSR__REAP_EVERY_NS 1000000ull

/* Whether this mapping's refused charge may look for gone holders now. */
static bool tsr__reap_due(tsr_region_t *r) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  uint64_t now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec + TSR__REAP_EVERY_NS;
  uint64_t last = atomic_load_explicit(&r->reaped_ns, memory_order_relaxed);
  return now - last >= TSR__REAP_EVERY_NS &&
         atomic_compare_exchange_strong_explicit(&r->reaped_ns, &last, now, memory_order_relaxed, memory_order_relaxed);
}

#define TSR__PEAK_TRIES 64 /* a peak update that loses this often is left to the next charge */

void tsr_region_file_name(uint64_t lease_id, char *buf, size_t cap) {
  snprintf(buf, cap, "lease-%" PRIu64 ".region", lease_id);
}

size_t tsr_region_file_size(void) { return TSR_REGION_FILE_BYTES; }

static void tsr__corrupt(tsr_region_t *r, const char *what) {
  bool expected = false;
  if (atomic_compare_exchange_strong(&r->warned, &expected, true))
    tsr_log_error("lease %" PRIu64 " region: %s (corrupt region; refusing what depends on it)", r->f->header.lease_id,
                  what);
}

/* The settings as written, checked: whatever a tenant writes there, the
 * bucket's arithmetic stays in range. */
static void tsr__compute_read(tsr_region_t *r) {
  tsr__region_file_t *f = r->f;
  tsr_region_compute_t *c = &r->compute;
  uint32_t sm = tsr_atomic_load32_relaxed(&f->sm_ppm);
  c->sm_ppm = sm <= TSR_BUCKET_PPM ? sm : 0;
  c->stream_ppm = f->stream_ppm && f->stream_ppm <= TSR_BUCKET_PPM ? f->stream_ppm : TSR_BUCKET_PPM;
  c->burst_ns = f->burst_ns ? f->burst_ns : TSR_REGION_BURST_DEFAULT_NS;
  if (c->burst_ns > TSR_BUCKET_BURST_MAX) c->burst_ns = TSR_BUCKET_BURST_MAX;
}

/* ---- the daemon: a copy, never a mapping ----------------------------------- */

/* The daemon's own words of a region file (header, compute settings, the
 * device's names), as `truth` and `state` say, written into `f`. */
static void tsr__image(tsr__region_file_t *f, const tsr_region_params_t *p, tsr_region_state_t state,
                       uint32_t share_now_ppm) {
  tsr__region_header_t *h = &f->header;
  memset(h, 0, sizeof(*h));
  h->magic = TSR_REGION_MAGIC;
  h->version = TSR_REGION_VERSION;
  h->header_bytes = (uint32_t)offsetof(tsr__region_file_t, slots);
  h->generation = p->generation;
  h->lease_id = p->lease_id;
  h->device = p->device;
  h->slot_count = TSR_REGION_SLOTS;
  h->limit_bytes = p->limit_bytes;
  h->deadline_wall_ns = p->deadline_wall_ns;
  tsr_atomic_store32_relaxed(&h->state, (uint32_t)state);
  h->owner_uid = p->owner_uid;
  tsr_atomic_store32_relaxed(&f->sm_ppm, p->sm_ppm);
  f->stream_ppm = p->stream_ppm;
  f->burst_ns = p->burst_ns;
  tsr_atomic_store32_relaxed(&f->sm_now_ppm, share_now_ppm);
  memset(f->device_pci, 0, sizeof(f->device_pci));
  memset(f->device_opencl, 0, sizeof(f->device_opencl));
  memset(f->device_uuid, 0, sizeof(f->device_uuid));
  if (p->device_uuid) snprintf(f->device_uuid, sizeof(f->device_uuid), "%s", p->device_uuid);
  if (p->device_pci) snprintf(f->device_pci, sizeof(f->device_pci), "%s", p->device_pci);
  if (p->device_opencl) snprintf(f->device_opencl, sizeof(f->device_opencl), "%s", p->device_opencl);
}

/* The byte ranges of the file that are the daemon's: written at creation,
 * compared at every read, written back by a repair. */
#define TSR__HEADER_AT 0
#define TSR__HEADER_LEN sizeof(tsr__region_header_t)
#define TSR__COMPUTE_AT offsetof(tsr__region_file_t, sm_ppm)
#define TSR__COMPUTE_LEN (offsetof(tsr__region_file_t, sm_now_ppm) + 4 - TSR__COMPUTE_AT)
#define TSR__NAMES_AT offsetof(tsr__region_file_t, device_pci)
#define TSR__NAMES_LEN (offsetof(tsr__region_file_t, slots) - TSR__NAMES_AT)
#define TSR__STATE_AT (offsetof(tsr__region_header_t, state))

TSR_MUST_USE static tsr_status_t tsr__params_check(const tsr_region_params_t *p) {
  if (p->lease_id == 0) return tsr_status_make(TSR_INVALID_ARGUMENT, "a region needs a lease id");
  if (p->device_uuid && strlen(p->device_uuid) >= TSR_REGION_LINE)
    return tsr_status_make(TSR_INVALID_ARGUMENT, "device uuid too long");
  if (p->device_pci && strlen(p->device_pci) >= sizeof(((tsr__region_file_t *)0)->device_pci))
    return tsr_status_make(TSR_INVALID_ARGUMENT, "device PCI bus id too long");
  if (p->device_opencl && strlen(p->device_opencl) >= sizeof(((tsr__region_file_t *)0)->device_opencl))
    return tsr_status_make(TSR_INVALID_ARGUMENT, "OpenCL device name too long");
  if (p->sm_ppm > TSR_BUCKET_PPM || p->stream_ppm > TSR_BUCKET_PPM || p->burst_ns > TSR_BUCKET_BURST_MAX)
    return tsr_status_make(TSR_INVALID_ARGUMENT, "compute settings out of range");
  return NULL;
}

/* Writes all of `len` bytes at `off`; a short write is an error. */
TSR_MUST_USE static tsr_status_t tsr__pwrite(int fd, const void *buf, size_t len, size_t off, const char *what) {
  const char *b = buf;
  size_t done = 0;
  while (done < len) {
    ssize_t n = pwrite(fd, b + done, len - done, (off_t)(off + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return tsr_status_from_errno(n < 0 ? errno : EIO, "write %s", what);
    done += (size_t)n;
  }
  return NULL;
}

tsr_status_t tsr_region_create(int dir_fd, const tsr_region_params_t *p) {
  TSR_RETURN_IF_ERROR(tsr__params_check(p));
  char name[64], tmp[80];
  tsr_region_file_name(p->lease_id, name, sizeof(name));
  snprintf(tmp, sizeof(tmp), ".tmp-%s", name);
  unlinkat(dir_fd, tmp, 0); /* a leftover of a crash (the directory is the daemon's) */
  tsr__region_file_t *f = calloc(1, TSR_REGION_FILE_BYTES);
  if (!f) return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory");
  tsr__image(f, p, TSR_REGION_ACTIVE, 0);
  int fd;
  tsr_status_t st = tsr_fs_open_regular(dir_fd, tmp, O_RDWR | O_CREAT | O_EXCL, 0600, &fd);
  if (st) {
    free(f);
    return st;
  }
  if (fchown(fd, (uid_t)p->owner_uid, (gid_t)-1) != 0 && p->owner_uid != geteuid())
    st = tsr_status_from_errno(errno, "give region %s to uid %u", name, p->owner_uid);
  if (!st && fchmod(fd, 0600) != 0) st = tsr_status_from_errno(errno, "chmod region %s", name);
  /* the whole file in one write: a tenant never maps a part of it */
  if (!st) st = tsr__pwrite(fd, f, TSR_REGION_FILE_BYTES, 0, name);
  close(fd);
  free(f);
  /* the complete file takes the name in one step */
  if (!st && renameat(dir_fd, tmp, dir_fd, name) != 0) st = tsr_status_from_errno(errno, "publish region %s", name);
  if (st) unlinkat(dir_fd, tmp, 0);
  return st;
}

tsr_status_t tsr_region_remove(int dir_fd, uint64_t lease_id) {
  char name[64];
  tsr_region_file_name(lease_id, name, sizeof(name));
  if (unlinkat(dir_fd, name, 0) != 0 && errno != ENOENT) return tsr_status_from_errno(errno, "remove region %s", name);
  return NULL;
}

/* Opens lease `id`'s region for the daemon: a regular file, not a link. */
TSR_MUST_USE static tsr_status_t tsr__open_for_daemon(int dir_fd, uint64_t id, int flags, int *out_fd,
                                                      struct stat *out_st) {
  char name[64];
  tsr_region_file_name(id, name, sizeof(name));
  tsr_status_t st = tsr_fs_open_regular_stat(dir_fd, name, flags, 0, out_fd, out_st);
  if (st && tsr_status_code(st) == TSR_NOT_FOUND) return st;
  return st ? tsr_status_annotate(st, "region of lease %" PRIu64, id) : NULL;
}

/* A slot's holder (pid, start time, PID namespace). */
static void tsr__slot_proc(tsr__region_slot_t *s, uint32_t pid, tsr_region_proc_t *out) {
  out->pid = (int32_t)pid;
  out->start_ticks = tsr_atomic_load_relaxed(&s->start_ticks);
  out->pidns = tsr_atomic_load_relaxed(&s->pidns);
}

/* Whether slot `s` (held by `pid`) carries the daemon's mark for its holder. */
static bool tsr__marked_dead(tsr__region_slot_t *s, uint32_t pid) {
  uint64_t ticks = tsr_atomic_load_relaxed(&s->dead_ticks);
  return ticks != 0 && tsr_atomic_load32_relaxed(&s->dead_pid) == pid &&
         tsr_atomic_load_relaxed(&s->start_ticks) == ticks;
}

tsr_status_t tsr_region_read(int dir_fd, const tsr_region_params_t *truth, tsr_region_state_t state,
                             tsr_region_copy_t *out) {
  memset(out, 0, sizeof(*out));
  int fd;
  struct stat sb;
  TSR_RETURN_IF_ERROR(tsr__open_for_daemon(dir_fd, truth->lease_id, O_RDONLY, &fd, &sb));
  tsr__region_file_t *f = calloc(1, TSR_REGION_FILE_BYTES);
  if (!f) {
    close(fd);
    return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory");
  }
  /* a shrunk file is a short read here, where a mapping would have faulted */
  size_t got = 0;
  tsr_status_t st = NULL;
  while (got < TSR_REGION_FILE_BYTES) {
    ssize_t n = pread(fd, (char *)f + got, TSR_REGION_FILE_BYTES - got, (off_t)got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) st = tsr_status_from_errno(errno, "read the region of lease %" PRIu64, truth->lease_id);
    if (n <= 0) break;
    got += (size_t)n;
  }
  close(fd);
  if (st) {
    free(f);
    return st;
  }
  if ((uint64_t)sb.st_size != TSR_REGION_FILE_BYTES || got != TSR_REGION_FILE_BYTES)
    out->damage |= TSR_REGION_DAMAGE_SIZE;
  if ((sb.st_mode & 07777) != 0600 || sb.st_uid != truth->owner_uid) out->damage |= TSR_REGION_DAMAGE_HEADER;
  /* the daemon's words, against what it would write */
  tsr__region_file_t want;
  tsr__image(&want, truth, state, 0);
  out->generation = f->header.generation;
  if (!truth->generation) want.header.generation = f->header.generation;
  uint32_t found_state = tsr_atomic_load32_relaxed(&f->header.state);
  tsr_atomic_store32_relaxed(&want.header.state, found_state); /* compared on its own */
  if (memcmp((char *)f + TSR__HEADER_AT, (char *)&want + TSR__HEADER_AT, TSR__HEADER_LEN) != 0 ||
      memcmp((char *)f + TSR__NAMES_AT, (char *)&want + TSR__NAMES_AT, TSR__NAMES_LEN) != 0)
    out->damage |= TSR_REGION_DAMAGE_HEADER;
  if (found_state != (uint32_t)state) out->damage |= TSR_REGION_DAMAGE_STATE;
  /* the share in force is the daemon's too, but it moves: only the settings */
  if (memcmp((char *)f + TSR__COMPUTE_AT, (char *)&want + TSR__COMPUTE_AT,
             offsetof(tsr__region_file_t, sm_now_ppm) - TSR__COMPUTE_AT) != 0 ||
      tsr_atomic_load32_relaxed(&f->sm_now_ppm) > TSR_BUCKET_PPM)
    out->damage |= TSR_REGION_DAMAGE_COMPUTE;
  /* the tenants' report, read as a tenant would read its mapping; the
   * shares are the lease table's, and a slot the daemon marked dead is no
   * process of the lease */
  tsr_region_t view = {.f = f, .bytes = TSR_REGION_FILE_BYTES};
  tsr_region_stats_t *s = &out->stats;
  tsr_region_stats(&view, s);
  s->sm_ppm = truth->sm_ppm;
  uint32_t now = tsr_atomic_load32_relaxed(&f->sm_now_ppm);
  s->sm_now_ppm = now && now < truth->sm_ppm ? now : truth->sm_ppm;
  out->nslots = tsr_region_slots(&view, out->slots, TSR_REGION_SLOTS);
  /* counters past the largest limit the lease has had: a shrink leaves what
   * was admitted before it (and the peak) above the new limit */
  uint64_t bound = truth->high_limit_bytes > truth->limit_bytes ? truth->high_limit_bytes : truth->limit_bytes;
  bool slot_over = false;
  for (uint32_t i = 0; i < out->nslots; i++) {
    const tsr_region_slot_info_t *o = &out->slots[i];
    slot_over |= o->used_bytes > bound;
    if (!o->dead) continue;
    s->processes--;
    out->dead_bytes = o->used_bytes > UINT64_MAX - out->dead_bytes ? UINT64_MAX : out->dead_bytes + o->used_bytes;
  }
  if (s->used_bytes > bound || s->peak_bytes > bound || slot_over) out->damage |= TSR_REGION_DAMAGE_COUNTERS;
  s->corrupt = out->damage != 0;
  free(f);
  return NULL;
}

tsr_status_t tsr_region_repair(int dir_fd, const tsr_region_params_t *truth, tsr_region_state_t state,
                               uint32_t share_now_ppm, uint32_t damage) {
  TSR_RETURN_IF_ERROR(tsr__params_check(truth));
  int fd;
  struct stat sb;
  TSR_RETURN_IF_ERROR(tsr__open_for_daemon(dir_fd, truth->lease_id, O_RDWR, &fd, &sb));
  tsr_status_t st = NULL;
  char name[64];
  tsr_region_file_name(truth->lease_id, name, sizeof(name));
  if ((damage & TSR_REGION_DAMAGE_SIZE) && (uint64_t)sb.st_size != TSR_REGION_FILE_BYTES) {
    /* shrunk: what was cut off reads as zeros again (slots free, nothing
     * charged); grown: the rest goes */
    if (ftruncate(fd, (off_t)TSR_REGION_FILE_BYTES) != 0) st = tsr_status_from_errno(errno, "resize region %s", name);
    damage |= TSR_REGION_DAMAGE_HEADER | TSR_REGION_DAMAGE_STATE | TSR_REGION_DAMAGE_COMPUTE;
  }
  if (!st && sb.st_uid != truth->owner_uid && fchown(fd, (uid_t)truth->owner_uid, (gid_t)-1) != 0)
    st = tsr_status_from_errno(errno, "give region %s back to uid %u", name, truth->owner_uid);
  if (!st && (sb.st_mode & 07777) != 0600 && fchmod(fd, 0600) != 0)
    st = tsr_status_from_errno(errno, "chmod region %s", name);
  tsr__region_file_t want;
  tsr__image(&want, truth, state, share_now_ppm);
  if (!st && (damage & (TSR_REGION_DAMAGE_HEADER | TSR_REGION_DAMAGE_STATE))) {
    st = tsr__pwrite(fd, (char *)&want + TSR__HEADER_AT, TSR__HEADER_LEN, TSR__HEADER_AT, name);
    if (!st) st = tsr__pwrite(fd, (char *)&want + TSR__NAMES_AT, TSR__NAMES_LEN, TSR__NAMES_AT, name);
  }
  if (!st && (damage & TSR_REGION_DAMAGE_COMPUTE))
    st = tsr__pwrite(fd, (char *)&want + TSR__COMPUTE_AT, TSR__COMPUTE_LEN, TSR__COMPUTE_AT, name);
  close(fd);
  return st;
}

/* pwrite of n (`len` bytes at `off`) pieces of lease `id`'s region, through
 * one descriptor, in order. */
typedef struct {
  const void *buf;
  size_t len, off;
} tsr__words_t;

TSR_MUST_USE static tsr_status_t tsr__write_words(int dir_fd, uint64_t id, const tsr__words_t *w, size_t n) {
  int fd;
  struct stat sb;
  TSR_RETURN_IF_ERROR(tsr__open_for_daemon(dir_fd, id, O_WRONLY, &fd, &sb));
  char name[64];
  tsr_region_file_name(id, name, sizeof(name));
  tsr_status_t st = NULL;
  for (size_t i = 0; i < n && !st; i++) st = tsr__pwrite(fd, w[i].buf, w[i].len, w[i].off, name);
  close(fd);
  return st;
}

tsr_status_t tsr_region_write_state(int dir_fd, uint64_t lease_id, tsr_region_state_t state) {
  /* a 4-byte write: the states differ in their low byte alone, so a reader
   * that catches the write half done still reads one state or the other */
  uint32_t v = (uint32_t)state;
  return tsr__write_words(dir_fd, lease_id, &(tsr__words_t){&v, sizeof(v), TSR__STATE_AT}, 1);
}

tsr_status_t tsr_region_write_share_now(int dir_fd, uint64_t lease_id, uint32_t ppm) {
  if (ppm > TSR_BUCKET_PPM) return tsr_status_make(TSR_INVALID_ARGUMENT, "share out of range");
  return tsr__write_words(dir_fd, lease_id,
                          &(tsr__words_t){&ppm, sizeof(ppm), offsetof(tsr__region_file_t, sm_now_ppm)}, 1);
}

tsr_status_t tsr_region_mark_dead(int dir_fd, uint64_t lease_id, uint32_t slot, const tsr_region_proc_t *proc) {
  if (slot >= TSR_REGION_SLOTS || proc->pid <= 0 || proc->start_ticks == 0)
    return tsr_status_make(TSR_INVALID_ARGUMENT, "no slot holder to mark");
  size_t at = offsetof(tsr__region_file_t, slots) + (size_t)slot * sizeof(tsr__region_slot_t);
  /* a reclaimer needs both halves to match the holder, so the order does
   * not matter and a half-written mark marks nothing */
  uint64_t ticks = proc->start_ticks;
  uint32_t pid = (uint32_t)proc->pid;
  const tsr__words_t mark[] = {{&ticks, sizeof(ticks), at + offsetof(tsr__region_slot_t, dead_ticks)},
                               {&pid, sizeof(pid), at + offsetof(tsr__region_slot_t, dead_pid)}};
  return tsr__write_words(dir_fd, lease_id, mark, 2);
}

/* ---- every process ---------------------------------------------------------- */

/* Maps a region file read-write: what the lease's processes share. */
TSR_MUST_USE static tsr_status_t tsr__map(int fd, tsr_region_t **out) {
  void *p = mmap(NULL, TSR_REGION_FILE_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return tsr_status_from_errno(errno, "map a region");
  tsr_region_t *r = calloc(1, sizeof(*r));
  if (!r) {
    munmap(p, TSR_REGION_FILE_BYTES);
    return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory");
  }
  r->f = p;
  r->bytes = TSR_REGION_FILE_BYTES;
  tsr__compute_read(r);
  *out = r;
  return NULL;
}

tsr_status_t tsr_region_open(int dir_fd, const char *name, uint64_t lease_id, tsr_region_t **out) {
  *out = NULL;
  int fd;
  struct stat sb;
  TSR_RETURN_IF_ERROR(tsr_fs_open_regular_stat(dir_fd, name, O_RDWR, 0, &fd, &sb));
  if ((size_t)sb.st_size != TSR_REGION_FILE_BYTES) {
    close(fd);
    return tsr_status_make(TSR_DATA_LOSS, "%s is %lld bytes, a region is %zu: not a region of this version", name,
                           (long long)sb.st_size, (size_t)TSR_REGION_FILE_BYTES);
  }
  tsr_region_t *r = NULL;
  tsr_status_t st = tsr__map(fd, &r);
  close(fd);
  if (st) return st;
  const tsr__region_header_t *h = &r->f->header;
  uint32_t state = tsr_atomic_load32_acquire(&r->f->header.state);
  if (h->magic != TSR_REGION_MAGIC)
    st = tsr_status_make(TSR_DATA_LOSS, "%s is not a tessera region (bad magic)", name);
  else if (h->version != TSR_REGION_VERSION)
    st = tsr_status_make(TSR_FAILED_PRECONDITION, "%s is a region of version %u; this is version %d", name, h->version,
                         TSR_REGION_VERSION);
  else if (h->header_bytes != offsetof(tsr__region_file_t, slots) || h->slot_count != TSR_REGION_SLOTS)
    st = tsr_status_make(TSR_DATA_LOSS, "%s has a damaged header (sizes)", name);
  else if (state < TSR_REGION_ACTIVE || state > TSR_REGION_RELEASED)
    st = tsr_status_make(TSR_DATA_LOSS, "%s has a damaged header (state %u)", name, state);
  else if (h->lease_id == 0 || (lease_id && h->lease_id != lease_id))
    st = tsr_status_make(TSR_DATA_LOSS, "%s holds lease %" PRIu64 ", not %" PRIu64, name, h->lease_id, lease_id);
  if (st) {
    tsr_region_close(r);
    return st;
  }
  *out = r;
  return NULL;
}

void tsr_region_close(tsr_region_t *r) {
  if (!r) return;
  munmap(r->f, r->bytes);
  free(r);
}

tsr_status_t tsr_region_attach(tsr_region_t *r, const tsr_region_proc_t *proc, uint32_t *out_slot) {
  int32_t pid = proc->pid;
  if (pid <= 0) return tsr_status_make(TSR_INVALID_ARGUMENT, "bad pid %d", pid);
  uint32_t first = ((uint32_t)pid * 2654435761u) % TSR_REGION_SLOTS;
  for (uint32_t i = 0; i < TSR_REGION_SLOTS; i++) {
    uint32_t k = (first + i) % TSR_REGION_SLOTS;
    tsr__region_slot_t *s = &r->f->slots[k];
    uint32_t expected = TSR_SLOT_FREE;
    if (tsr_atomic_load32_relaxed(&s->pid) != TSR_SLOT_FREE) continue;
    if (!tsr_atomic_cas32_strong_acq_rel(&s->pid, &expected, TSR_SLOT_BUSY)) continue;
    /* ours: fill it in, then name the holder (release: the fields first) */
    tsr_atomic_store_relaxed(&s->start_ticks, proc->start_ticks);
    tsr_atomic_store_relaxed(&s->pidns, proc->pidns);
    tsr_atomic_store_relaxed(&s->used, 0);
    tsr_atomic_store_relaxed(&s->charges, 0);
    tsr_atomic_store_relaxed(&s->dead_ticks, 0); /* a mark of the last holder */
    tsr_atomic_store32_relaxed(&s->dead_pid, 0);
    tsr_atomic_store_relaxed(&r->f->heartbeat[k], 0);
    tsr_atomic_store32_release(&s->pid, (uint32_t)pid);
    *out_slot = k;
    return NULL;
  }
  return tsr_status_make(TSR_RESOURCE_EXHAUSTED, "lease %" PRIu64 " has all %d process slots taken",
                         r->f->header.lease_id, TSR_REGION_SLOTS);
}

/* Credits what slot `s` holds and frees it; the caller holds it BUSY or
 * owns it. */
static uint64_t tsr__slot_release(tsr_region_t *r, tsr__region_slot_t *s) {
  uint64_t held = tsr_atomic_load_acquire(&s->used);
  if (held) {
    uint64_t used = tsr_atomic_load_relaxed(&r->f->used);
    if (held > used) {
      tsr__corrupt(r, "a slot holds more than the lease's total");
      held = used;
    }
    tsr_atomic_sub_acq_rel(&r->f->used, held);
    tsr_atomic_sub_acq_rel(&r->f->reserved, held);
  }
  tsr_atomic_store_relaxed(&s->used, 0);
  tsr_atomic_store_relaxed(&s->start_ticks, 0);
  tsr_atomic_store_relaxed(&s->pidns, 0);
  tsr_atomic_store_relaxed(&s->dead_ticks, 0);
  tsr_atomic_store32_relaxed(&s->dead_pid, 0);
  tsr_atomic_store32_release(&s->pid, TSR_SLOT_FREE);
  return held;
}

/* Whether the slot held by pid is to be freed (the holder is gone). */
typedef bool (*tsr__slot_gone_fn)(tsr__region_slot_t *s, uint32_t pid, void *ctx);

/* Frees every slot whose holder `gone` says has gone: takes it BUSY, asks
 * again (it may have changed hands between the look and the CAS: freed and
 * claimed by a new process with the same pid), and frees it or gives it
 * back. The slots freed; their bytes in *out_bytes. */
static uint32_t tsr__free_gone(tsr_region_t *r, tsr__slot_gone_fn gone, void *ctx, uint64_t *out_bytes) {
  uint32_t freed = 0;
  uint64_t bytes = 0;
  for (uint32_t i = 0; i < TSR_REGION_SLOTS; i++) {
    tsr__region_slot_t *s = &r->f->slots[i];
    uint32_t pid = tsr_atomic_load32_acquire(&s->pid);
    if (pid == TSR_SLOT_FREE || pid == TSR_SLOT_BUSY || !gone(s, pid, ctx)) continue;
    uint32_t expected = pid;
    if (!tsr_atomic_cas32_strong_acq_rel(&s->pid, &expected, TSR_SLOT_BUSY)) continue;
    if (!gone(s, pid, ctx)) {
      tsr_atomic_store32_release(&s->pid, pid);
      continue;
    }
    bytes += tsr__slot_release(r, s);
    freed++;
  }
  if (out_bytes) *out_bytes = bytes;
  return freed;
}

static bool tsr__gone_marked(tsr__region_slot_t *s, uint32_t pid, void *ctx) {
  (void)ctx;
  return tsr__marked_dead(s, pid);
}

uint32_t tsr_region_reclaim(tsr_region_t *r, uint64_t *out_bytes) {
  return tsr__free_gone(r, tsr__gone_marked, NULL, out_bytes);
}

void tsr_region_detach(tsr_region_t *r, uint32_t slot) {
  if (slot >= TSR_REGION_SLOTS) return;
  tsr__slot_release(r, &r->f->slots[slot]);
}

/* The seed's protocol: a relaxed pre-check keeps hopeless requests off the
 * shared line; fetch_add admits; the re-check rolls back an overshoot. */
static bool tsr__admit(tsr__region_file_t *f, uint64_t limit, uint64_t bytes) {
  if (bytes > limit || tsr_atomic_load_relaxed(&f->reserved) > limit - bytes) return false;
  uint64_t before = tsr_atomic_add_acq_rel(&f->reserved, bytes);
  if (before > limit - bytes) {
    tsr_atomic_sub_acq_rel(&f->reserved, bytes);
    return false;
  }
  return true;
}

bool tsr_region_charge(tsr_region_t *r, uint32_t slot, uint64_t bytes) {
  tsr__region_file_t *f = r->f;
  if (bytes == 0) return true;
  if (slot >= TSR_REGION_SLOTS || tsr_atomic_load32_acquire(&f->header.state) != TSR_REGION_ACTIVE) {
    tsr_atomic_add_relaxed(&f->denied, 1);
    return false;
  }
  uint64_t limit = f->header.limit_bytes;
  /* a charge that does not fit first frees what gone processes held (off
   * the path of a charge that fits): the slots the daemon marked, and those
   * whose holder this process can see is gone (its own PID namespace:
   * /proc shows no such process, another under its pid, or one whose every
   * thread is exiting or exited: killed, it takes nothing more; at most once a
   * millisecond per mapping, tsr__reap_due). A process started right after
   * its predecessor was killed so starts without waiting for the daemon's
   * next tick. */
  if (!tsr__admit(f, limit, bytes) &&
      (bytes > limit ||
       tsr_region_reclaim(r, NULL) + (tsr__reap_due(r) ? tsr_region_reap(r, NULL, NULL, NULL) : 0) == 0 ||
       !tsr__admit(f, limit, bytes))) {
    tsr_atomic_add_relaxed(&f->denied, 1);
    return false;
  }
  /* admitted: now it counts as used (used never passes the limit) */
  uint64_t now = tsr_atomic_add_acq_rel(&f->used, bytes) + bytes;
  tsr__region_slot_t *s = &f->slots[slot];
  tsr_atomic_add_relaxed(&s->used, bytes);
  tsr_atomic_add_relaxed(&s->charges, 1);
  uint64_t peak = tsr_atomic_load_relaxed(&f->peak);
  for (int i = 0; i < TSR__PEAK_TRIES && now > peak; i++)
    if (tsr_atomic_cas_weak_relaxed(&f->peak, &peak, now)) break;
  return true;
}

void tsr_region_credit(tsr_region_t *r, uint32_t slot, uint64_t bytes) {
  if (bytes == 0 || slot >= TSR_REGION_SLOTS) return;
  tsr__region_file_t *f = r->f;
  tsr__region_slot_t *s = &f->slots[slot];
  uint64_t held = tsr_atomic_load_relaxed(&s->used);
  if (bytes > held) { /* only this process writes its slot: this is corruption */
    tsr__corrupt(r, "a free of more than the process was charged");
    bytes = held;
    if (!bytes) return;
  }
  tsr_atomic_sub_relaxed(&s->used, bytes);
  /* used first, then the reservation: used never passes what is reserved */
  tsr_atomic_sub_acq_rel(&f->used, bytes);
  tsr_atomic_sub_acq_rel(&f->reserved, bytes);
}

void tsr_region_heartbeat(tsr_region_t *r, uint32_t slot, uint64_t now_mono_ns) {
  if (slot < TSR_REGION_SLOTS) tsr_atomic_store_relaxed(&r->f->heartbeat[slot], now_mono_ns);
}

void tsr_region_compute(tsr_region_t *r, tsr_region_compute_t *out) { *out = r->compute; }

/* The lease's share as the daemon last wrote it (a resize moves it); a value
 * no writer of ours produces is not taken: the share when mapped is. */
static uint32_t tsr__share(tsr_region_t *r) {
  uint32_t share = tsr_atomic_load32_relaxed(&r->f->sm_ppm);
  return share <= TSR_BUCKET_PPM ? share : r->compute.sm_ppm;
}

uint32_t tsr_region_share_now(tsr_region_t *r) {
  uint32_t share = tsr__share(r);
  uint32_t now = tsr_atomic_load32_relaxed(&r->f->sm_now_ppm);
  return now && now < share ? now : share;
}

uint64_t tsr_region_take(tsr_region_t *r, uint64_t now_ns, uint64_t span_ns) {
  return tsr_bucket_take(&r->f->tat, now_ns, span_ns, r->compute.burst_ns);
}

void tsr_region_adjust(tsr_region_t *r, uint64_t now_ns, int64_t delta_ns) {
  tsr_bucket_adjust(&r->f->tat, now_ns, delta_ns);
}

/* fetch_add that stops at UINT64_MAX instead of wrapping */
static void tsr__add_sat(tsr_atomic_u64 *p, uint64_t v) {
  if (!v) return;
  uint64_t old = tsr_atomic_add_relaxed(p, v);
  if (old > UINT64_MAX - v) tsr_atomic_store_relaxed(p, UINT64_MAX);
}

void tsr_region_note_launches(tsr_region_t *r, uint64_t launches, uint64_t gpu_ns, uint64_t throttled_ns,
                              uint64_t bypassed) {
  tsr__region_file_t *f = r->f;
  tsr__add_sat(&f->bypassed, bypassed);
  tsr__add_sat(&f->launches, launches);
  tsr__add_sat(&f->gpu_ns, gpu_ns);
  tsr__add_sat(&f->throttled_ns, throttled_ns);
}

void tsr_region_stats(tsr_region_t *r, tsr_region_stats_t *out) {
  tsr__region_file_t *f = r->f;
  memset(out, 0, sizeof(*out));
  out->lease_id = f->header.lease_id;
  out->device = f->header.device;
  out->state = (tsr_region_state_t)tsr_atomic_load32_acquire(&f->header.state);
  out->limit_bytes = f->header.limit_bytes;
  out->used_bytes = tsr_atomic_load_acquire(&f->used);
  out->peak_bytes = tsr_atomic_load_relaxed(&f->peak);
  out->denied = tsr_atomic_load_relaxed(&f->denied);
  out->sm_ppm = tsr__share(r);
  out->sm_now_ppm = tsr_region_share_now(r);
  out->gpu_ns = tsr_atomic_load_relaxed(&f->gpu_ns);
  out->throttled_ns = tsr_atomic_load_relaxed(&f->throttled_ns);
  out->launches = tsr_atomic_load_relaxed(&f->launches);
  out->bypassed = tsr_atomic_load_relaxed(&f->bypassed);
  for (uint32_t i = 0; i < TSR_REGION_SLOTS; i++)
    if (tsr_atomic_load32_relaxed(&f->slots[i].pid) != TSR_SLOT_FREE) out->processes++;
  /* used and peak may pass the limit: a shrink lowers it under what was
   * admitted before (tsr_region_read knows how far they may go) */
  out->corrupt =
      f->header.magic != TSR_REGION_MAGIC || out->state < TSR_REGION_ACTIVE || out->state > TSR_REGION_RELEASED;
}

/* A NUL-terminated copy of a fixed field that a tenant could have filled
 * with anything: never read past it. */
static void tsr__copy_field(const char *field, size_t size, char *buf, size_t cap) {
  if (!cap) return;
  size_t n = strnlen(field, size - 1);
  if (n >= cap) n = cap - 1;
  memcpy(buf, field, n);
  buf[n] = '\0';
}

void tsr_region_device_uuid(tsr_region_t *r, char *buf, size_t cap) {
  tsr__copy_field(r->f->device_uuid, sizeof(r->f->device_uuid), buf, cap);
}

void tsr_region_device_pci(tsr_region_t *r, char *buf, size_t cap) {
  tsr__copy_field(r->f->device_pci, sizeof(r->f->device_pci), buf, cap);
}

void tsr_region_device_opencl(tsr_region_t *r, char *buf, size_t cap) {
  tsr__copy_field(r->f->device_opencl, sizeof(r->f->device_opencl), buf, cap);
}

bool tsr_region_proc_stat_parse(const char *line, int32_t *out_ppid, uint64_t *out_start) {
  /* "pid (comm) state ppid ...": comm may hold spaces and ')', so the
   * fields count from the last ')'; ppid is field 4, starttime field 22 */
  const char *p = strrchr(line, ')');
  if (!p) return false;
  p++;
  for (int field = 3; field <= 22; field++) {
    while (*p == ' ') p++;
    if (!*p) return false;
    if (field == 4 || field == 22) {
      char *end = NULL;
      unsigned long long v = strtoull(p, &end, 10);
      if (end == p) return false;
      if (field == 4 && out_ppid) *out_ppid = v > INT32_MAX ? 0 : (int32_t)v;
      if (field == 22) *out_start = v;
    }
    while (*p && *p != ' ') p++;
  }
  return true;
}

/* Reads /proc/PID/stat into buf (NUL-terminated). */
static bool tsr__proc_stat(int32_t pid, char *buf, size_t cap) {
  if (pid <= 0) return false;
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/stat", pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  ssize_t n = read(fd, buf, cap - 1);
  close(fd);
  if (n <= 0) return false;
  buf[n] = '\0';
  return true;
}

bool tsr_region_proc_start(int32_t pid, uint64_t *out_ticks) {
  char buf[1024];
  return tsr__proc_stat(pid, buf, sizeof(buf)) && tsr_region_proc_stat_parse(buf, NULL, out_ticks);
}

/* Whether a /proc stat line's task is on its way out: exited (Z, X) or
 * exiting (PF_EXITING in its flags, field 9: set as a killed thread begins
 * to exit, before the driver's files close, which can take tens of ms). */
#define TSR__PF_EXITING 0x4u
static bool tsr__stat_leaving(const char *line) {
  const char *p = strrchr(line, ')');
  if (!p || p[1] != ' ') return false;
  char state = p[2];
  if (state == 'Z' || state == 'X' || state == 'x') return true;
  p += 2;
  for (int field = 3; field < 9; field++) { /* to flags, field 9 */
    while (*p && *p != ' ') p++;
    while (*p == ' ') p++;
  }
  char *end = NULL;
  unsigned long flags = strtoul(p, &end, 10);
  return end != p && (flags & TSR__PF_EXITING);
}

/* Whether every thread of process `pid` is on its way out (a process whose
 * main thread exited while others run is not: one of them still lives). */
static bool tsr__threads_leaving(int32_t pid) {
  char path[64], buf[1024];
  snprintf(path, sizeof(path), "/proc/%d/task", pid);
  DIR *d = opendir(path);
  if (!d) return true; /* gone since */
  bool leaving = true;
  struct dirent *e;
  while (leaving && (e = readdir(d))) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    snprintf(path, sizeof(path), "/proc/%d/task/%.16s/stat", pid, e->d_name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue; /* released since */
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0) continue;
    buf[n] = '\0';
    leaving = tsr__stat_leaving(buf);
  }
  closedir(d);
  return leaving;
}

bool tsr_region_proc_pidns(int32_t pid, uint64_t *out_inode) {
  char path[64];
  if (pid == 0)
    snprintf(path, sizeof(path), "/proc/self/ns/pid");
  else
    snprintf(path, sizeof(path), "/proc/%d/ns/pid", pid);
  struct stat st;
  if (pid < 0 || stat(path, &st) != 0) return false;
  *out_inode = (uint64_t)st.st_ino;
  return true;
}

void tsr_region_proc_self(tsr_region_proc_t *out) {
  memset(out, 0, sizeof(*out));
  out->pid = (int32_t)getpid();
  if (!tsr_region_proc_start(out->pid, &out->start_ticks)) out->start_ticks = 0;
  if (!tsr_region_proc_pidns(0, &out->pidns)) out->pidns = 0;
}

bool tsr_region_proc_alive(const tsr_region_proc_t *proc) {
  uint64_t mine = 0, ticks = 0;
  if (proc->pidns && tsr_region_proc_pidns(0, &mine) && mine != proc->pidns)
    return true; /* another namespace: its pids are not ours to look up */
  char buf[1024];
  if (!tsr__proc_stat(proc->pid, buf, sizeof(buf)) || !tsr_region_proc_stat_parse(buf, NULL, &ticks) ||
      ticks != proc->start_ticks)
    return false;
  /* a process on its way out (killed, exiting) holds nothing it can use:
   * every thread exiting or exited; the main thread's own line first, the
   * common answer for a live process */
  return !tsr__stat_leaving(buf) || !tsr__threads_leaving(proc->pid);
}

static bool tsr__default_alive(void *ctx, const tsr_region_proc_t *proc) {
  (void)ctx;
  return tsr_region_proc_alive(proc);
}

uint32_t tsr_region_slots(tsr_region_t *r, tsr_region_slot_info_t *out, uint32_t cap) {
  uint32_t n = 0;
  for (uint32_t i = 0; i < TSR_REGION_SLOTS && n < cap; i++) {
    tsr__region_slot_t *s = &r->f->slots[i];
    uint32_t pid = tsr_atomic_load32_acquire(&s->pid);
    if (pid == TSR_SLOT_FREE || pid == TSR_SLOT_BUSY || pid > INT32_MAX) continue;
    tsr_region_slot_info_t *o = &out[n++];
    o->slot = i;
    tsr__slot_proc(s, pid, &o->proc);
    o->used_bytes = tsr_atomic_load_relaxed(&s->used);
    o->heartbeat_ns = tsr_atomic_load_relaxed(&r->f->heartbeat[i]);
    o->dead = tsr__marked_dead(s, pid);
  }
  return n;
}

struct tsr__reap_ctx {
  tsr_region_alive_fn alive;
  void *ctx;
};

/* gone, or its pid now names another process */
static bool tsr__gone_dead(tsr__region_slot_t *s, uint32_t pid, void *ctx) {
  const struct tsr__reap_ctx *c = ctx;
  tsr_region_proc_t proc;
  tsr__slot_proc(s, pid, &proc);
  return pid > INT32_MAX || !c->alive(c->ctx, &proc);
}

uint32_t tsr_region_reap(tsr_region_t *r, tsr_region_alive_fn alive, void *ctx, uint64_t *out_bytes) {
  struct tsr__reap_ctx c = {alive ? alive : tsr__default_alive, ctx};
  return tsr__free_gone(r, tsr__gone_dead, &c, out_bytes);
}
