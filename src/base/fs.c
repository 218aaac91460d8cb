/* fs.c: safe directories and regular-file opens (see fs.h). */
#include "base/fs.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Why directory `path` (with stat `st`) is not safe, or NULL. `self` is the
 * directory itself (it must be ours and writable by nobody else). */
static const char *tsr__dir_problem(const struct stat *st, bool self, uid_t euid) {
  if (!S_ISDIR(st->st_mode)) return "is not a directory";
  if (self) {
    if (st->st_uid != euid) return "is owned by another user";
    if (st->st_mode & (S_IWGRP | S_IWOTH)) return "is writable by group or others";
    return NULL;
  }
  if (st->st_uid != 0 && st->st_uid != euid) return "is owned by another user";
  if ((st->st_mode & (S_IWGRP | S_IWOTH)) && !(st->st_mode & S_ISVTX))
    return "is writable by group or others (and not sticky)";
  return NULL;
}

/* Copies absolute `path` into buf (PATH_MAX bytes) without trailing
 * slashes. */
TSR_MUST_USE static tsr_status_t tsr__abs_copy(const char *path, const char *what, char *buf) {
  if (!path || path[0] != '/')
    return tsr_status_make(TSR_INVALID_ARGUMENT, "%s '%s' is not an absolute path", what, path ? path : "");
  size_t n = strlen(path);
  if (n >= PATH_MAX) return tsr_status_make(TSR_INVALID_ARGUMENT, "%s path is too long", what);
  memcpy(buf, path, n + 1);
  while (n > 1 && buf[n - 1] == '/') buf[--n] = '\0';
  return NULL;
}

tsr_status_t tsr_fs_check_private_dir(const char *path, const char *what) {
  char buf[PATH_MAX];
  TSR_RETURN_IF_ERROR(tsr__abs_copy(path, what, buf));
  uid_t euid = geteuid();
  struct stat st;
  /* the directory itself, not followed if it is a symlink */
  if (lstat(buf, &st) != 0) return tsr_status_from_errno(errno, "%s %s", what, buf);
  if (S_ISLNK(st.st_mode))
    return tsr_status_make(TSR_FAILED_PRECONDITION, "%s %s is a symbolic link; refusing it", what, buf);
  const char *why = tsr__dir_problem(&st, true, euid);
  if (why)
    return tsr_status_make(TSR_FAILED_PRECONDITION,
                           "%s %s %s; it must belong to uid %u with no group/other write "
                           "(chown/chmod it, or choose another)",
                           what, buf, why, (unsigned)euid);
  /* each ancestor: whoever can rename entries in it can swap our directory */
  for (;;) {
    char *slash = strrchr(buf, '/');
    if (!slash) break;
    if (slash == buf) {
      if (buf[1] == '\0') break;
      buf[1] = '\0';
    } else {
      *slash = '\0';
    }
    if (stat(buf, &st) != 0) return tsr_status_from_errno(errno, "%s parent %s", what, buf);
    why = tsr__dir_problem(&st, false, euid);
    if (why)
      return tsr_status_make(TSR_FAILED_PRECONDITION, "%s %s: its parent %s %s, so another user could replace it", what,
                             path, buf, why);
    if (buf[1] == '\0') break;
  }
  return NULL;
}

tsr_status_t tsr_fs_make_private_dir(const char *path, mode_t mode, const char *what) {
  char buf[PATH_MAX];
  TSR_RETURN_IF_ERROR(tsr__abs_copy(path, what, buf));
  uid_t euid = geteuid();
  /* Each parent is checked before anything is made in it: a directory that
   * another user could swap is refused before the daemon writes there. */
  for (char *p = buf + 1;; p++) {
    if (*p != '/' && *p != '\0') continue;
    char c = *p;
    *p = '\0';
    if (mkdir(buf, mode) != 0 && errno != EEXIST) return tsr_status_from_errno(errno, "create %s %s", what, buf);
    if (c == '\0') break;
    struct stat st;
    if (stat(buf, &st) != 0) return tsr_status_from_errno(errno, "%s parent %s", what, buf);
    const char *why = tsr__dir_problem(&st, false, euid);
    if (why)
      return tsr_status_make(TSR_FAILED_PRECONDITION, "%s %s: its parent %s %s, so another user could replace it", what,
                             path, buf, why);
    *p = c;
  }
  return tsr_fs_check_private_dir(path, what);
}

tsr_status_t tsr_fs_open_regular_stat(int dirfd, const char *name, int flags, mode_t mode, int *out_fd,
                                      struct stat *out_stat) {
  *out_fd = -1;
  int fd = openat(dirfd, name, flags | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, mode);
  if (fd < 0) {
    int err = errno;
    if (err == ELOOP) return tsr_status_make(TSR_FAILED_PRECONDITION, "%s is a symbolic link; not following it", name);
    if (err == ENXIO) /* a FIFO opened for writing with no reader, or a socket */
      return tsr_status_make(TSR_FAILED_PRECONDITION, "%s is not a regular file (a FIFO or socket)", name);
    return tsr_status_from_errno(err, "open %s", name);
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int err = errno;
    close(fd);
    return tsr_status_from_errno(err, "stat %s", name);
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    return tsr_status_make(TSR_FAILED_PRECONDITION, "%s is not a regular file (mode %06o)", name, (unsigned)st.st_mode);
  }
  if (out_stat) *out_stat = st;
  *out_fd = fd;
  return NULL;
}

tsr_status_t tsr_fs_open_regular(int dirfd, const char *name, int flags, mode_t mode, int *out_fd) {
  return tsr_fs_open_regular_stat(dirfd, name, flags, mode, out_fd, NULL);
}

tsr_status_t tsr_fs_read_fd(int fd, size_t max, char **out_text, size_t *out_len) {
  *out_text = NULL;
  *out_len = 0;
  struct stat st;
  if (fstat(fd, &st) != 0) return tsr_status_from_errno(errno, "stat");
  if (!S_ISREG(st.st_mode))
    return tsr_status_make(TSR_FAILED_PRECONDITION, "not a regular file (mode %06o)", (unsigned)st.st_mode);
  if (max > SIZE_MAX - 2) max = SIZE_MAX - 2; /* room for the probe byte and the NUL */
  /* The buffer holds at most max + 1 bytes: reading the last of them (the
   * probe byte) says the file is over the limit. It starts at the size
   * the file says, and one byte to see the end, or 4 KiB where it says 0. */
  size_t limit = max + 1;
  size_t cap = 4096;
  if (st.st_size > 0) cap = (uint64_t)st.st_size < limit ? (size_t)st.st_size + 1 : limit;
  if (cap > limit) cap = limit;
  char *buf = malloc(cap + 1);
  if (!buf) return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory reading %zu bytes", cap);
  size_t len = 0;
  for (;;) {
    if (len == cap) { /* full below the limit (at it, len > max ended the loop): grow */
      size_t want = cap <= limit / 2 ? cap * 2 : limit;
      char *grown = realloc(buf, want + 1);
      if (!grown) {
        free(buf);
        return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory reading %zu bytes", want);
      }
      buf = grown;
      cap = want;
    }
    ssize_t r = pread(fd, buf + len, cap - len, (off_t)len);
    if (r < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      free(buf);
      return tsr_status_from_errno(err, "read");
    }
    if (r == 0) break;
    len += (size_t)r;
    if (len > max) { /* the probe byte: one past the limit */
      free(buf);
      return tsr_status_make(TSR_DATA_LOSS, "larger than %zu bytes", max);
    }
  }
  buf[len] = '\0';
  *out_text = buf;
  *out_len = len;
  return NULL;
}

tsr_status_t tsr_fs_read_file(int dirfd, const char *name, size_t max, char **out_text, size_t *out_len) {
  *out_text = NULL;
  *out_len = 0;
  int fd;
  TSR_RETURN_IF_ERROR(tsr_fs_open_regular(dirfd, name, O_RDONLY, 0, &fd));
  tsr_status_t st = tsr_fs_read_fd(fd, max, out_text, out_len);
  close(fd);
  return tsr_status_annotate(st, "%s", name);
}
