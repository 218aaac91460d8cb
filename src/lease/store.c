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
 * lease; the next start adopts spares again.
 *
 * The daemon runs as root and nobody else can write the directory
 * (tsr_lease_store_open refuses one they could), but what is in it may still
 * have been put there by hand or damaged, so nothing in it is trusted: every
 * file is opened with tsr_fs_open_regular (never through a symlink, never
 * blocking on a FIFO), temporary files are created with O_EXCL, a spare is
 * reused only if it is a plain file of ours with one link, and quarantine/
 * is used only if it is our own directory. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
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
#include "lease/lease.h"

#define TSR__ID_BLOCK 1024
#define TSR__ID_FILE "next_id"
#define TSR__QUARANTINE "quarantine"
#define TSR__SPARE ".spare-"
#define TSR__TMP ".tmp-"
#define TSR__SPARES_MAX 1024   /* files kept for reuse; beyond this, ended leases' files are unlinked */
#define TSR__LOCKFILE_MAX 4096 /* tsr_lease_lockfile_parse refuses anything longer */

struct tsr_lease_store_s {
  char *dir;
  int dir_fd;
  uid_t euid; /* the only owner whose files (spares, quarantine/) are trusted */
  tsr_lease_sync_t sync;
  bool deferred; /* group commit: sync in tsr_lease_store_sync */
  int *pending;  /* written, renamed, not yet fdatasync'ed (deferred mode) */
  size_t npending, cap_pending;
  bool dir_dirty;                   /* the directory changed since its last fsync (deferred mode) */
  uint64_t next_id;                 /* next id to hand out; at most TSR_LEASE_ID_MAX + 1 */
  uint64_t reserved_until;          /* the value on disk: ids < this may be handed out */
  uint64_t spares[TSR__SPARES_MAX]; /* numbers n of the .spare-<n> files kept for reuse */
  size_t nspares;
  uint64_t next_spare; /* the number the next spare file gets */
  int quarantine_fd;   /* quarantine/ while a load runs; -1 not opened yet, -2 refused */
};

/* ---- errors ------------------------------------------------------------------ */

/* A failed write of the state is an I/O error whatever errno says:
 * tsr_status_from_errno makes ENOSPC and EDQUOT resource_exhausted, which
 * the daemon would pass on as "no capacity" (CLI exit 1) when the truth is
 * a full disk (io_error, exit 4). */
TSR_MUST_USE static tsr_status_t tsr__io_error(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
TSR_MUST_USE static tsr_status_t tsr__io_error(int err, const char *fmt, ...) {
  char what[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof(what), fmt, ap);
  va_end(ap);
  return tsr_status_make(TSR_IO_ERROR, "%s: %s", what, strerror(err));
}

/* The same for a status from elsewhere (base/fs): keeps the message. */
TSR_MUST_USE static tsr_status_t tsr__as_io_error(tsr_status_t st) {
  tsr_status_code_t c = tsr_status_code(st);
  if (!st || c == TSR_IO_ERROR || c == TSR_OUT_OF_MEMORY) return st;
  tsr_status_t out = tsr_status_make(TSR_IO_ERROR, "%s", tsr_status_message(st));
  tsr_status_free(st);
  return out;
}

/* ---- writing ------------------------------------------------------------------ */

static void tsr__spare_name(uint64_t n, char *buf, size_t cap) {
  snprintf(buf, cap, TSR__SPARE "%llu", (unsigned long long)n);
}

/* Opens a kept spare for writing, into `name`, if one is fit: a regular file
 * of this uid with no other link (through a second link, a write would also
 * change another file). One that is not is removed and never written; -1
 * when no spare is left. */
static int tsr__take_spare(tsr_lease_store_t *s, char *name, size_t cap) {
  while (s->nspares) {
    tsr__spare_name(s->spares[--s->nspares], name, cap);
    int fd = -1;
    struct stat sb;
    tsr_status_t st = tsr_fs_open_regular_stat(s->dir_fd, name, O_WRONLY, 0, &fd, &sb);
    const char *why = NULL;
    if (st)
      why = tsr_status_message(st);
    else if (sb.st_nlink != 1)
      why = "it has other hard links";
    else if (sb.st_uid != s->euid)
      why = "it belongs to another user";
    if (!why) return fd;
    if (tsr_status_code(st) != TSR_NOT_FOUND)
      tsr_log_warn("not reusing %s/%s (%s); removing the name", s->dir, name, why);
    tsr_status_free(st);
    if (fd >= 0) close(fd);
    unlinkat(s->dir_fd, name, 0); /* the name only: a link's target is untouched */
  }
  return -1;
}

/* Creates `tmp` afresh for writing. A leftover or planted entry of that name
 * is unlinked first; if the name is taken again before O_EXCL creates it,
 * the write fails rather than going through someone else's file. */
TSR_MUST_USE static tsr_status_t tsr__create_tmp(tsr_lease_store_t *s, const char *tmp, int *out_fd) {
  unlinkat(s->dir_fd, tmp, 0);
  tsr_status_t st = tsr_fs_open_regular(s->dir_fd, tmp, O_WRONLY | O_CREAT | O_EXCL, 0644, out_fd);
  if (tsr_status_code(st) == TSR_ALREADY_EXISTS) {
    tsr_status_free(st);
    return tsr_status_make(TSR_IO_ERROR,
                           "create %s/%s: the name is taken (again after removing it); not "
                           "writing through a file the store did not make",
                           s->dir, tmp);
  }
  return tsr__as_io_error(tsr_status_annotate(st, "state directory %s", s->dir));
}

/* Writes `len` bytes to `name` in the state directory, atomically. A
 * `lease_file` (not the id counter) is written into a spare if there is one,
 * and with the store in deferred mode its sync is left to
 * tsr_lease_store_sync. Every failure is TSR_IO_ERROR and leaves no file. */
TSR_MUST_USE static tsr_status_t tsr__write_atomic(tsr_lease_store_t *s, const char *name, const char *data, size_t len,
                                                   bool lease_file) {
  bool defer = lease_file && s->deferred && s->sync == TSR_LEASE_SYNC_FULL;
  char tmp[300];
  int fd = lease_file ? tsr__take_spare(s, tmp, sizeof(tmp)) : -1;
  bool spare = fd >= 0;
  if (!spare) {
    snprintf(tmp, sizeof(tmp), TSR__TMP "%s", name);
    TSR_RETURN_IF_ERROR(tsr__create_tmp(s, tmp, &fd));
  }
  size_t off = 0;
  while (off < len) {
    ssize_t w = pwrite(fd, data + off, len - off, (off_t)off);
    if (w < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      close(fd);
      unlinkat(s->dir_fd, tmp, 0);
      return tsr__io_error(err, "write %s/%s", s->dir, tmp);
    }
    off += (size_t)w;
  }
  if (spare && ftruncate(fd, (off_t)len) != 0) { /* the spare held a longer file */
    int err = errno;
    close(fd);
    unlinkat(s->dir_fd, tmp, 0);
    return tsr__io_error(err, "truncate %s/%s", s->dir, tmp);
  }
  if (!defer && s->sync == TSR_LEASE_SYNC_FULL && fdatasync(fd) != 0) {
    int err = errno;
    close(fd);
    unlinkat(s->dir_fd, tmp, 0);
    return tsr__io_error(err, "sync %s/%s", s->dir, tmp);
  }
  if (defer) {
    int *p = tsr_array_grow(s->pending, &s->cap_pending, s->npending + 1, sizeof(*p), 64);
    if (!p) {
      close(fd);
      unlinkat(s->dir_fd, tmp, 0);
      return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory");
    }
    s->pending = p;
  }
  if (!defer && close(fd) != 0) {
    int err = errno;
    unlinkat(s->dir_fd, tmp, 0);
    return tsr__io_error(err, "close %s/%s", s->dir, tmp);
  }
  if (renameat(s->dir_fd, tmp, s->dir_fd, name) != 0) {
    int err = errno;
    if (defer) close(fd);
    unlinkat(s->dir_fd, tmp, 0);
    return tsr__io_error(err, "rename %s/%s", s->dir, name);
  }
  if (defer) {
    s->pending[s->npending++] = fd;
    s->dir_dirty = true;
    return NULL;
  }
  if (s->sync == TSR_LEASE_SYNC_FULL && fsync(s->dir_fd) != 0) return tsr__io_error(errno, "sync directory %s", s->dir);
  return NULL;
}

/* ---- the id counter -------------------------------------------------------------- */

TSR_MUST_USE static tsr_status_t tsr__write_counter(tsr_lease_store_t *s, uint64_t value) {
  char buf[64];
  int n = snprintf(buf, sizeof(buf), "next_id: %llu\n", (unsigned long long)value);
  TSR_RETURN_IF_ERROR(tsr__write_atomic(s, TSR__ID_FILE, buf, (size_t)n, false));
  s->reserved_until = value;
  return NULL;
}

TSR_MUST_USE static tsr_status_t tsr__counter_corrupt(const tsr_lease_store_t *s, const char *why) {
  return tsr_status_make(TSR_DATA_LOSS,
                         "%s/%s is corrupt (%s); lease ids must never repeat, so fix it by hand "
                         "('next_id: N', N above every id in audit.log and at most %llu) or "
                         "remove it",
                         s->dir, TSR__ID_FILE, why, (unsigned long long)TSR_LEASE_ID_MAX + 1);
}

TSR_MUST_USE static tsr_status_t tsr__read_counter(tsr_lease_store_t *s) {
  char *text = NULL;
  size_t len = 0;
  tsr_status_t st = tsr_fs_read_file(s->dir_fd, TSR__ID_FILE, 127, &text, &len);
  if (tsr_status_code(st) == TSR_NOT_FOUND) {
    tsr_status_free(st);
    s->next_id = s->reserved_until = 1;
    return NULL;
  }
  if (tsr_status_code(st) == TSR_FAILED_PRECONDITION || tsr_status_code(st) == TSR_DATA_LOSS) {
    tsr_status_t bad = tsr__counter_corrupt(s, tsr_status_message(st)); /* a FIFO, a symlink */
    tsr_status_free(st);
    return bad;
  }
  TSR_RETURN_IF_ERROR(tsr_status_annotate(st, "state directory %s", s->dir));
  if (len < 11 || strncmp(text, "next_id: ", 9) != 0 || text[len - 1] != '\n') {
    free(text);
    return tsr__counter_corrupt(s, "expected 'next_id: N'");
  }
  text[len - 1] = '\0';
  uint64_t v = 0;
  st = tsr_parse_u64(text + 9, &v);
  /* Above the largest id + 1, the counter would hand out ids past the limit,
   * and at 2^64 wrap around to ids already used. */
  if (st || v == 0 || v > TSR_LEASE_ID_MAX + 1) {
    char why[160];
    snprintf(why, sizeof(why), "'%.100s' is not a number in [1, %llu]", text + 9,
             (unsigned long long)TSR_LEASE_ID_MAX + 1);
    tsr_status_free(st);
    free(text);
    return tsr__counter_corrupt(s, why);
  }
  free(text);
  s->next_id = s->reserved_until = v;
  return NULL;
}

/* ---- public ------------------------------------------------------------------------ */

tsr_status_t tsr_lease_store_open(const char *dir, tsr_lease_sync_t sync, tsr_lease_store_t **out_store) {
  *out_store = NULL;
  if (!dir || !*dir) return tsr_status_make(TSR_INVALID_ARGUMENT, "empty state directory");
  /* Whoever else could write here could plant links and FIFOs under the
   * names the daemon opens as root: refuse such a directory outright. */
  TSR_RETURN_IF_ERROR(tsr_fs_make_private_dir(dir, 0755, "state directory"));
  tsr_lease_store_t *s = calloc(1, sizeof(*s));
  if (!s) return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory");
  s->dir = strdup(dir);
  s->sync = sync;
  s->euid = geteuid();
  s->quarantine_fd = -1;
  s->dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (!s->dir || s->dir_fd < 0) {
    tsr_status_t st = tsr_status_from_errno(s->dir ? errno : ENOMEM, "open state directory %s", dir);
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
  if (s->quarantine_fd >= 0) close(s->quarantine_fd);
  if (s->dir_fd >= 0) close(s->dir_fd);
  free(s->dir);
  free(s);
}

const char *tsr_lease_store_dir(const tsr_lease_store_t *s) { return s->dir; }

tsr_status_t tsr_lease_store_next_id(tsr_lease_store_t *s, uint64_t *out_id) {
  if (s->next_id > TSR_LEASE_ID_MAX)
    return tsr_status_make(TSR_RESOURCE_EXHAUSTED, "lease ids are exhausted (the last is %llu)",
                           (unsigned long long)TSR_LEASE_ID_MAX);
  if (s->next_id >= s->reserved_until) {
    uint64_t until =
        s->next_id <= TSR_LEASE_ID_MAX + 1 - TSR__ID_BLOCK ? s->next_id + TSR__ID_BLOCK : TSR_LEASE_ID_MAX + 1;
    TSR_RETURN_IF_ERROR(tsr__write_counter(s, until));
  }
  *out_id = s->next_id++;
  return NULL;
}

tsr_status_t tsr_lease_store_put(tsr_lease_store_t *s, const tsr_lease_t *lease) {
  char name[128], body[2048];
  tsr_lease_lockfile_name(lease, name, sizeof(name));
  size_t len = tsr_lease_lockfile_format(lease, body, sizeof(body));
  if (len == 0) return tsr_status_make(TSR_INTERNAL, "lease %llu does not format", (unsigned long long)lease->id);
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
    return tsr__io_error(errno, "remove %s/%s", s->dir, name);
  if (s->sync != TSR_LEASE_SYNC_FULL) return NULL;
  if (s->deferred) {
    s->dir_dirty = true;
    return NULL;
  }
  if (fsync(s->dir_fd) != 0) return tsr__io_error(errno, "sync directory %s", s->dir);
  return NULL;
}

void tsr_lease_store_defer_sync(tsr_lease_store_t *s, bool deferred) { s->deferred = deferred; }

tsr_status_t tsr_lease_store_sync(tsr_lease_store_t *s) {
  tsr_status_t st = NULL;
  for (size_t i = 0; i < s->npending; i++) {
    if (fdatasync(s->pending[i]) != 0 && !st) st = tsr__io_error(errno, "sync a lock file in %s", s->dir);
    close(s->pending[i]);
  }
  s->npending = 0;
  if (s->dir_dirty) {
    s->dir_dirty = false;
    if (fsync(s->dir_fd) != 0 && !st) st = tsr__io_error(errno, "sync directory %s", s->dir);
  }
  return st;
}

/* ---- loading ------------------------------------------------------------------ */

/* quarantine/, made 0700 if missing, opened once per load: used only if it
 * is a directory of this uid that nobody else can write (a symlink planted
 * there would take the files elsewhere). -1 if refused; the error is logged
 * once. */
static int tsr__quarantine_dir(tsr_lease_store_t *s) {
  if (s->quarantine_fd != -1) return s->quarantine_fd < 0 ? -1 : s->quarantine_fd;
  s->quarantine_fd = -2;
  if (mkdirat(s->dir_fd, TSR__QUARANTINE, 0700) != 0 && errno != EEXIST) {
    tsr_log_error("cannot create %s/%s: %s; files that cannot be restored stay where they are", s->dir, TSR__QUARANTINE,
                  strerror(errno));
    return -1;
  }
  int fd = openat(s->dir_fd, TSR__QUARANTINE, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  const char *why = NULL;
  struct stat st;
  if (fd < 0)
    why = errno == ELOOP || errno == ENOTDIR ? "is a symbolic link or not a directory" : strerror(errno);
  else if (fstat(fd, &st) != 0)
    why = strerror(errno);
  else if (!S_ISDIR(st.st_mode))
    why = "is not a directory";
  else if (st.st_uid != s->euid)
    why = "is owned by another user";
  else if (st.st_mode & (S_IWGRP | S_IWOTH))
    why = "is writable by group or others";
  if (why) {
    tsr_log_error(
        "%s/%s %s; refusing to move files into it, so files that cannot be restored "
        "stay where they are (fix or remove it)",
        s->dir, TSR__QUARANTINE, why);
    if (fd >= 0) close(fd);
    return -1;
  }
  s->quarantine_fd = fd;
  return fd;
}

/* Moves `name` into quarantine/ (suffixed with the time, so nothing is
 * overwritten) and logs why. A link or FIFO is moved as it is, never opened.
 * If quarantine/ is unusable the file stays where it is; either way the
 * caller does not restore it. */
static void tsr__quarantine(tsr_lease_store_t *s, const char *name, const char *why) {
  int qfd = tsr__quarantine_dir(s);
  if (qfd < 0) {
    tsr_log_error("not restoring %s/%s (%s); left in place", s->dir, name, why);
    return;
  }
  char dst[400];
  snprintf(dst, sizeof(dst), "%s.%llu", name, (unsigned long long)tsr_time_wall_ns());
  if (renameat(s->dir_fd, name, qfd, dst) != 0) {
    tsr_log_error("cannot quarantine %s/%s (%s): %s; not restoring it", s->dir, name, why, strerror(errno));
    return;
  }
  tsr_log_warn("quarantined %s/%s to %s/%s: %s", s->dir, name, TSR__QUARANTINE, dst, why);
}

/* The type of a directory entry, not following links: d_type where the file
 * system gives it, else fstatat. DT_UNKNOWN if neither tells. */
static unsigned char tsr__entry_type(const tsr_lease_store_t *s, const struct dirent *e) {
  if (e->d_type != DT_UNKNOWN) return e->d_type;
  struct stat st;
  if (fstatat(s->dir_fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) return DT_UNKNOWN;
  return (unsigned char)IFTODT(st.st_mode);
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

/* Reads and checks one lock file; the error is the quarantine reason. */
TSR_MUST_USE static tsr_status_t tsr__read_lease(const tsr_lease_store_t *s, const char *name, unsigned char type,
                                                 tsr_lease_t *out_lease) {
  /* d_type first: a FIFO or a link is never opened at all */
  if (type == DT_LNK) return tsr_status_make(TSR_DATA_LOSS, "symbolic link");
  if (type != DT_REG && type != DT_UNKNOWN) return tsr_status_make(TSR_DATA_LOSS, "not a regular file");
  char *text = NULL;
  size_t len = 0;
  TSR_RETURN_IF_ERROR(tsr_fs_read_file(s->dir_fd, name, TSR__LOCKFILE_MAX, &text, &len));
  tsr_status_t st = tsr_lease_lockfile_parse(text, len, out_lease);
  free(text);
  if (st) return st;
  char want[128];
  tsr_lease_lockfile_name(out_lease, want, sizeof(want));
  if (strcmp(want, name) != 0) return tsr_status_make(TSR_DATA_LOSS, "contents belong in %s", want);
  return NULL;
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
    if (strncmp(name, TSR__TMP, strlen(TSR__TMP)) == 0) {
      /* a write interrupted by a crash: it never became visible, drop it
       * (the name only, whatever it is) */
      if (unlinkat(s->dir_fd, name, 0) == 0) tsr_log_info("removed %s/%s left by an interrupted write", s->dir, name);
      continue;
    }
    if (strncmp(name, TSR__SPARE, strlen(TSR__SPARE)) == 0) {
      /* an ended lease's file kept for reuse: adopt it, or drop it if it is
       * not one of ours or there are enough (reuse checks it again) */
      uint64_t n = 0;
      tsr_status_t pst = tsr_parse_u64(name + strlen(TSR__SPARE), &n);
      if (!pst && tsr__entry_type(s, e) == DT_REG && s->nspares < TSR__SPARES_MAX && n < UINT64_MAX) {
        s->spares[s->nspares++] = n;
        if (n >= s->next_spare) s->next_spare = n + 1;
      } else if (unlinkat(s->dir_fd, name, 0) != 0) {
        tsr_log_warn("cannot remove %s/%s: %s", s->dir, name, strerror(errno));
      }
      tsr_status_free(pst);
      continue;
    }
    /* lease lock files only: gpu_<dev>_<key>_<id>.lock */
    if (strncmp(name, "gpu_", 4) != 0 || !tsr__ends_with(name, ".lock") || strlen(name) >= sizeof(items[0].name))
      continue;
    tsr_lease_t lease;
    tsr_status_t fst = tsr__read_lease(s, name, tsr__entry_type(s, e), &lease);
    if (fst) {
      tsr__quarantine(s, name, tsr_status_message(fst));
      tsr_status_free(fst);
      quarantined++;
      continue;
    }
    tsr__loaded_t *grown = tsr_array_grow(items, &cap, count + 1, sizeof(*items), 64);
    if (!grown) {
      st = tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory reading leases");
      goto done;
    }
    items = grown;
    items[count].lease = lease;
    memcpy(items[count].name, name, strlen(name) + 1); /* length checked above */
    count++;
  }
  if (count) qsort(items, count, sizeof(*items), tsr__by_id);
  for (size_t i = 0; i < count; i++) {
    /* ids are at most TSR_LEASE_ID_MAX (the parser's rule): no wrap */
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
  if (s->quarantine_fd >= 0) close(s->quarantine_fd);
  s->quarantine_fd = -1;
  if (out_quarantined) *out_quarantined = quarantined;
  return st;
}
