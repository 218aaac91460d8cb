/* store.c: the durable side of leases, one lock file per lease.
 *
 * Layout of the state directory:
 *   gpu_<dev>_<key>_<id>.lock   one per active lease (lockfile.c)
 *   next_id                     "next_id: N": every id below N may have been used
 *   quarantine/                 files that could not be read back, kept for people
 *   .tmp-*                      a write in progress (removed at the next start)
 *   .spare-<n>                  the file of an ended lease, kept to be reused
 *
 * Writes go to a temporary file that is renamed over the final name, so a
 * crash at any instant leaves the old state or the new, never half a file.
 * With TSR_LEASE_SYNC_FULL the file is fdatasync'ed before the rename and the
 * directory fsync'ed after it, so the change also survives a power cut.
 *
 * Group commit (tsr_lease_store_defer_sync): the daemon answers a batch of
 * requests at once, so it can make the whole batch durable with one pass
 * before any answer leaves: files are renamed into place unsynced, and
 * tsr_lease_store_sync then fdatasyncs each and fsyncs the directory once. A
 * power cut before that pass can leave an empty or partial lock file, which
 * the next start quarantines; its client had no answer yet, so nothing that
 * was acknowledged is lost.
 *
 * Recycled files: a released or expired lease's file is renamed to
 * .spare-<n> instead of unlinked, and the next lease is written into a spare
 * and renamed into place, so that a steady stream of leases reuses the same
 * inodes. Creating and deleting files at a high rate is slow on ext4: it will
 * not reuse an inode freed in the last few seconds, and searches past every
 * one (recently_deleted() in the kernel), so each creation costs more the
 * more have just been deleted; on the build VM open(O_CREAT) grew from 10 us
 * to over 600 us under lease churn (bench/results/lease-*.md). A spare is not
 * a lock file, so a crash that leaves one, in whatever state, changes no
 * lease; the next start adopts spares again. */
#include <dirent.h>
#include <stdbool.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/log.h"
#include "base/time.h"
#include "base/units.h"
#include "tessera/lease.h"

#define TSR__ID_BLOCK 1024
#define TSR__ID_FILE "next_id"
#define TSR__QUARANTINE "quarantine"
#define TSR__SPARE ".spare-"
#define TSR__SPARES_MAX 1024 /* files kept for reuse; beyond this, ended leases' files are unlinked */

struct tsr_lease_store_s {
  char *dir;
  int dir_fd;
  tsr_lease_sync_t sync;
  bool deferred;     /* group commit: sync in tsr_lease_store_sync */
  int *pending;      /* written, renamed, not yet fdatasync'ed (deferred mode) */
  size_t npending, cap_pending;
  bool dir_dirty;    /* the directory changed since its last fsync (deferred mode) */
  uint64_t next_id;        /* next id to hand out */
  uint64_t reserved_until; /* the value on disk: ids < this may be handed out */
  uint64_t spares[TSR__SPARES_MAX]; /* numbers n of the .spare-<n> files kept for reuse */
  size_t nspares;
  uint64_t next_spare; /* the number the next spare file gets */
};

static void tsr__spare_name(uint64_t n, char *buf, size_t cap) {
  snprintf(buf, cap, TSR__SPARE "%llu", (unsigned long long)n);
}

/* Writes `len` bytes to `name` in the state directory, atomically. A
 * `lease_file` (not the id counter) is written into a spare if there is one,
 * and with the store in deferred mode its sync is left to
 * tsr_lease_store_sync. */
static tsr_status_t tsr__write_atomic(tsr_lease_store_t *s, const char *name, const char *data,
                                      size_t len, bool lease_file) {
  bool defer = lease_file && s->deferred && s->sync == TSR_LEASE_SYNC_FULL;
  char tmp[300];
  int fd = -1;
  bool spare = false;
  while (lease_file && fd < 0 && s->nspares) {
    tsr__spare_name(s->spares[--s->nspares], tmp, sizeof(tmp));
    fd = openat(s->dir_fd, tmp, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
    spare = fd >= 0;
  }
  if (fd < 0) {
    snprintf(tmp, sizeof(tmp), ".tmp-%s", name);
    fd = openat(s->dir_fd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  }
  if (fd < 0) return tsr_status_from_errno(errno, "create %s/%s", s->dir, tmp);
  size_t off = 0;
  while (off < len) {
    ssize_t w = pwrite(fd, data + off, len - off, (off_t)off);
    if (w < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      close(fd);
      unlinkat(s->dir_fd, tmp, 0);
      return tsr_status_from_errno(err, "write %s/%s", s->dir, tmp);
    }
    off += (size_t)w;
  }
  if (spare && ftruncate(fd, (off_t)len) != 0) { /* the spare held a longer file */
    int err = errno;
    close(fd);
    unlinkat(s->dir_fd, tmp, 0);
    return tsr_status_from_errno(err, "truncate %s/%s", s->dir, tmp);
  }
  if (!defer && s->sync == TSR_LEASE_SYNC_FULL && fdatasync(fd) != 0) {
    int err = errno;
    close(fd);
    unlinkat(s->dir_fd, tmp, 0);
    return tsr_status_from_errno(err, "sync %s/%s", s->dir, tmp);
  }
  if (defer && s->npending == s->cap_pending) {
    size_t cap = s->cap_pending ? s->cap_pending * 2 : 64;
    int *p = realloc(s->pending, cap * sizeof(*p));
    if (!p) {
      close(fd);
      unlinkat(s->dir_fd, tmp, 0);
      return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory");
    }
    s->pending = p;
    s->cap_pending = cap;
  }
  if (!defer && close(fd) != 0) {
    int err = errno;
    unlinkat(s->dir_fd, tmp, 0);
    return tsr_status_from_errno(err, "close %s/%s", s->dir, tmp);
  }
  if (renameat(s->dir_fd, tmp, s->dir_fd, name) != 0) {
    int err = errno;
    if (defer) close(fd);
    unlinkat(s->dir_fd, tmp, 0);
    return tsr_status_from_errno(err, "rename %s/%s", s->dir, name);
  }
  if (defer) {
    s->pending[s->npending++] = fd;
    s->dir_dirty = true;
    return NULL;
  }
  if (s->sync == TSR_LEASE_SYNC_FULL && fsync(s->dir_fd) != 0)
    return tsr_status_from_errno(errno, "sync directory %s", s->dir);
  return NULL;
}

/* Reads a small file in the state directory into buf (NUL-terminated).
 * Fails with DATA_LOSS if it is larger than cap - 1. */
static tsr_status_t tsr__read_small(const tsr_lease_store_t *s, const char *name, char *buf,
                                    size_t cap, size_t *out_len) {
  int fd = openat(s->dir_fd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return tsr_status_from_errno(errno, "open %s/%s", s->dir, name);
  size_t len = 0;
  for (;;) {
    ssize_t r = read(fd, buf + len, cap - 1 - len);
    if (r < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      close(fd);
      return tsr_status_from_errno(err, "read %s/%s", s->dir, name);
    }
    if (r == 0) break;
    len += (size_t)r;
    if (len == cap - 1) {
      char extra;
      if (read(fd, &extra, 1) > 0) {
        close(fd);
        return tsr_status_make(TSR_DATA_LOSS, "%s/%s is larger than %zu bytes", s->dir, name,
                               cap - 1);
      }
      break;
    }
  }
  close(fd);
  buf[len] = '\0';
  *out_len = len;
  return NULL;
}

static tsr_status_t tsr__write_counter(tsr_lease_store_t *s, uint64_t value) {
  char buf[64];
  int n = snprintf(buf, sizeof(buf), "next_id: %llu\n", (unsigned long long)value);
  TSR_RETURN_IF_ERROR(tsr__write_atomic(s, TSR__ID_FILE, buf, (size_t)n, false));
  s->reserved_until = value;
  return NULL;
}

static tsr_status_t tsr__read_counter(tsr_lease_store_t *s) {
  char buf[128];
  size_t len = 0;
  tsr_status_t st = tsr__read_small(s, TSR__ID_FILE, buf, sizeof(buf), &len);
  if (st && tsr_status_code(st) == TSR_NOT_FOUND) {
    tsr_status_free(st);
    s->next_id = s->reserved_until = 1;
    return NULL;
  }
  TSR_RETURN_IF_ERROR(st);
  uint64_t v = 0;
  if (len < 11 || strncmp(buf, "next_id: ", 9) != 0 || buf[len - 1] != '\n')
    return tsr_status_make(TSR_DATA_LOSS,
                           "%s/%s is corrupt (expected 'next_id: N'); lease ids must never "
                           "repeat, so fix it by hand (N above every id in audit.log) or remove it",
                           s->dir, TSR__ID_FILE);
  buf[len - 1] = '\0';
  st = tsr_parse_u64(buf + 9, &v);
  if (st || v == 0) {
    tsr_status_free(st);
    return tsr_status_make(TSR_DATA_LOSS, "%s/%s is corrupt: '%s'", s->dir, TSR__ID_FILE, buf);
  }
  s->next_id = s->reserved_until = v;
  return NULL;
}

tsr_status_t tsr_lease_store_open(const char *dir, tsr_lease_sync_t sync,
                                  tsr_lease_store_t **out_store) {
  *out_store = NULL;
  if (!dir || !*dir) return tsr_status_make(TSR_INVALID_ARGUMENT, "empty state directory");
  if (mkdir(dir, 0755) != 0 && errno != EEXIST)
    return tsr_status_from_errno(errno, "create state directory %s", dir);
  tsr_lease_store_t *s = calloc(1, sizeof(*s));
  if (!s) return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory");
  s->dir = strdup(dir);
  s->sync = sync;
  s->dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (!s->dir || s->dir_fd < 0) {
    tsr_status_t st = tsr_status_from_errno(errno, "open state directory %s", dir);
    tsr_lease_store_close(s);
    return st;
  }
  tsr_status_t st = tsr__read_counter(s);
  if (st) {
    tsr_lease_store_close(s);
    return st;
  }
  *out_store = s;
  return NULL;
}

void tsr_lease_store_close(tsr_lease_store_t *s) {
  if (!s) return;
  tsr_status_free(tsr_lease_store_sync(s));
  free(s->pending);
  if (s->dir_fd >= 0) close(s->dir_fd);
  free(s->dir);
  free(s);
}

const char *tsr_lease_store_dir(const tsr_lease_store_t *s) { return s->dir; }

tsr_status_t tsr_lease_store_next_id(tsr_lease_store_t *s, uint64_t *out_id) {
  if (s->next_id >= s->reserved_until) {
    if (s->next_id > UINT64_MAX - TSR__ID_BLOCK)
      return tsr_status_make(TSR_RESOURCE_EXHAUSTED, "lease ids are exhausted");
    TSR_RETURN_IF_ERROR(tsr__write_counter(s, s->next_id + TSR__ID_BLOCK));
  }
  *out_id = s->next_id++;
  return NULL;
}

tsr_status_t tsr_lease_store_put(tsr_lease_store_t *s, const tsr_lease_t *lease) {
  char name[128], body[2048];
  tsr_lease_lockfile_name(lease, name, sizeof(name));
  size_t len = tsr_lease_lockfile_format(lease, body, sizeof(body));
  if (len == 0) return tsr_status_make(TSR_INTERNAL, "lease %llu does not format",
                                       (unsigned long long)lease->id);
  return tsr__write_atomic(s, name, body, len, true);
}

tsr_status_t tsr_lease_store_remove(tsr_lease_store_t *s, const tsr_lease_t *lease) {
  char name[128];
  tsr_lease_lockfile_name(lease, name, sizeof(name));
  bool kept = false;
  if (s->nspares < TSR__SPARES_MAX) { /* keep the file for the next lease */
    char spare[64];
    tsr__spare_name(s->next_spare, spare, sizeof(spare));
    if (renameat(s->dir_fd, name, s->dir_fd, spare) == 0) {
      s->spares[s->nspares++] = s->next_spare++;
      kept = true;
    } else if (errno == ENOENT) {
      return NULL;
    }
  }
  if (!kept && unlinkat(s->dir_fd, name, 0) != 0 && errno != ENOENT)
    return tsr_status_from_errno(errno, "remove %s/%s", s->dir, name);
  if (s->sync != TSR_LEASE_SYNC_FULL) return NULL;
  if (s->deferred) {
    s->dir_dirty = true;
    return NULL;
  }
  if (fsync(s->dir_fd) != 0) return tsr_status_from_errno(errno, "sync directory %s", s->dir);
  return NULL;
}

void tsr_lease_store_defer_sync(tsr_lease_store_t *s, bool deferred) { s->deferred = deferred; }

tsr_status_t tsr_lease_store_sync(tsr_lease_store_t *s) {
  tsr_status_t st = NULL;
  for (size_t i = 0; i < s->npending; i++) {
    if (fdatasync(s->pending[i]) != 0 && !st)
      st = tsr_status_from_errno(errno, "sync a lock file in %s", s->dir);
    close(s->pending[i]);
  }
  s->npending = 0;
  if (s->dir_dirty) {
    s->dir_dirty = false;
    if (fsync(s->dir_fd) != 0 && !st) st = tsr_status_from_errno(errno, "sync directory %s", s->dir);
  }
  return st;
}

/* Moves `name` into quarantine/ (suffixed with the time, so nothing is
 * overwritten) and logs why. */
static void tsr__quarantine(tsr_lease_store_t *s, const char *name, const char *why) {
  if (mkdirat(s->dir_fd, TSR__QUARANTINE, 0700) != 0 && errno != EEXIST) {
    tsr_log_error("cannot create %s/%s (%s); leaving %s in place", s->dir, TSR__QUARANTINE,
                  strerror(errno), name);
    return;
  }
  char dst[400];
  snprintf(dst, sizeof(dst), "%s/%s.%llu", TSR__QUARANTINE, name,
           (unsigned long long)tsr_time_wall_ns());
  if (renameat(s->dir_fd, name, s->dir_fd, dst) != 0) {
    tsr_log_error("cannot quarantine %s/%s: %s", s->dir, name, strerror(errno));
    return;
  }
  tsr_log_warn("quarantined %s/%s to %s: %s", s->dir, name, dst, why);
}

typedef struct {
  tsr_lease_t lease;
  char name[128];
} tsr__loaded_t;

static int tsr__by_id(const void *a, const void *b) {
  uint64_t x = ((const tsr__loaded_t *)a)->lease.id, y = ((const tsr__loaded_t *)b)->lease.id;
  return x < y ? -1 : x > y;
}

static bool tsr__ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && strcmp(s + n - m, suffix) == 0;
}

tsr_status_t tsr_lease_store_load(tsr_lease_store_t *s, tsr_lease_store_visit_fn visit, void *ctx,
                                  size_t *out_quarantined) {
  size_t quarantined = 0;
  if (out_quarantined) *out_quarantined = 0;
  int fd = dup(s->dir_fd);
  if (fd < 0) return tsr_status_from_errno(errno, "read state directory %s", s->dir);
  DIR *d = fdopendir(fd);
  if (!d) {
    close(fd);
    return tsr_status_from_errno(errno, "read state directory %s", s->dir);
  }
  rewinddir(d);
  tsr__loaded_t *items = NULL;
  size_t count = 0, cap = 0;
  tsr_status_t st = NULL;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    const char *name = e->d_name;
    if (strncmp(name, ".tmp-", 5) == 0) {
      /* a write interrupted by a crash: it never became visible, drop it */
      if (unlinkat(s->dir_fd, name, 0) == 0)
        tsr_log_info("removed %s/%s left by an interrupted write", s->dir, name);
      continue;
    }
    if (strncmp(name, TSR__SPARE, strlen(TSR__SPARE)) == 0) {
      /* an ended lease's file kept for reuse: adopt it, or drop it if it is
       * not one of ours or there are enough */
      uint64_t n = 0;
      tsr_status_t pst = tsr_parse_u64(name + strlen(TSR__SPARE), &n);
      if (!pst && (e->d_type == DT_REG || e->d_type == DT_UNKNOWN) && s->nspares < TSR__SPARES_MAX && n < UINT64_MAX) {
        s->spares[s->nspares++] = n;
        if (n >= s->next_spare) s->next_spare = n + 1;
      } else if (unlinkat(s->dir_fd, name, 0) != 0) {
        tsr_log_warn("cannot remove %s/%s: %s", s->dir, name, strerror(errno));
      }
      tsr_status_free(pst);
      continue;
    }
    /* lease lock files only: gpu_<dev>_<key>_<id>.lock */
    if (strncmp(name, "gpu_", 4) != 0 || !tsr__ends_with(name, ".lock") ||
        strlen(name) >= sizeof(items[0].name))
      continue;
    char buf[4100];
    size_t len = 0;
    tsr_lease_t lease;
    tsr_status_t fst = tsr__read_small(s, name, buf, sizeof(buf), &len);
    if (!fst) fst = tsr_lease_lockfile_parse(buf, len, &lease);
    if (!fst) {
      char want[128];
      tsr_lease_lockfile_name(&lease, want, sizeof(want));
      if (strcmp(want, name) != 0)
        fst = tsr_status_make(TSR_DATA_LOSS, "contents belong in %s", want);
    }
    if (fst) {
      tsr__quarantine(s, name, tsr_status_message(fst));
      tsr_status_free(fst);
      quarantined++;
      continue;
    }
    if (count == cap) {
      size_t ncap = cap ? cap * 2 : 64;
      tsr__loaded_t *n = realloc(items, ncap * sizeof(*n));
      if (!n) {
        st = tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory reading leases");
        goto done;
      }
      items = n;
      cap = ncap;
    }
    items[count].lease = lease;
    memcpy(items[count].name, name, strlen(name) + 1); /* length checked above */
    count++;
  }
  if (count) qsort(items, count, sizeof(*items), tsr__by_id);
  for (size_t i = 0; i < count; i++) {
    if (items[i].lease.id >= s->next_id) s->next_id = items[i].lease.id + 1;
    tsr_status_t vst = visit ? visit(ctx, &items[i].lease) : NULL;
    if (vst) {
      tsr__quarantine(s, items[i].name, tsr_status_message(vst));
      tsr_status_free(vst);
      quarantined++;
    }
  }
  /* Ids seen in files may lie past the counter if it was lost: persist. */
  if (s->next_id > s->reserved_until) st = tsr__write_counter(s, s->next_id);
done:
  free(items);
  closedir(d);
  if (out_quarantined) *out_quarantined = quarantined;
  return st;
}
