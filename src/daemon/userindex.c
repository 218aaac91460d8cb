/* userindex.c: the per-user lease index beside the regions.
 *
 * In the node-wide mode the shim is preloaded into every process
 * (/etc/ld.so.preload) and a process started without TESSERA_LEASE takes
 * its own user's lease on the device it uses. It must find that lease
 * without a daemon round trip, so the daemon keeps, for every user with
 * active leases, <region_dir>/user-<uid>.leases:
 *
 *   tessera-leases 1
 *   12 0 GPU-5c3e...
 *   15 1 -
 *
 * one line per active lease, oldest first: lease id, device index, device
 * UUID ("-" when unknown); single spaces, '\n' after every line, at most
 * TSR_USER_INDEX_MAX lease lines. The file is the daemon's, not the user's:
 * a file its user owned, the user could chmod and rewrite (naming any lease,
 * in any setuid program she runs). Only that user may read it, through a
 * POSIX ACL entry (user:<uid>:r--, mode 0440 with the mask), so another
 * user cannot read whose leases are where; where the file system has no
 * ACLs, the file's group is the user's primary group instead (said once in
 * the log: members of that group could read it). The shim believes an index
 * only when it belongs to the region directory's owner. It is written as a
 * region is: under a temporary name made with O_EXCL|O_NOFOLLOW, its
 * access set through the descriptor, then renamed into place, so a reader
 * sees the old file or the new, never a half-written one.
 *
 * Beside them, <region_dir>/node.policy ("pass" or "deny", the daemon's,
 * 0644) tells the shim the node's policy for users without a lease. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <pwd.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "base/fs.h"
#include "base/log.h"
#include "daemon/userindex.h"

#define TSR__INDEX_BYTES (32 + TSR_USER_INDEX_MAX * (24 + 12 + TSR_DEVICE_UUID_MAX))

static void tsr__index_name(uint32_t uid, char *buf, size_t cap) { snprintf(buf, cap, "user-%" PRIu32 ".leases", uid); }

/* The index text of `uid`; its length (0: the user holds no lease). */
static size_t tsr__index_text(const tsr_lease_table_t *t, uint32_t uid, char *buf, size_t cap) {
  size_t len = (size_t)snprintf(buf, cap, "tessera-leases 1\n");
  size_t lines = 0, skipped = 0;
  for (size_t i = 0; i < tsr_lease_table_count(t); i++) { /* id order: oldest first */
    const tsr_lease_t *l = tsr_lease_table_at(t, i);
    if (l->owner_uid != uid) continue;
    if (lines == TSR_USER_INDEX_MAX) {
      skipped++;
      continue;
    }
    const tsr_device_t *dev = tsr_lease_table_device(t, l->device);
    const char *uuid = dev && dev->uuid[0] && !strpbrk(dev->uuid, " \n") ? dev->uuid : "-";
    int n = snprintf(buf + len, cap - len, "%" PRIu64 " %" PRIu32 " %s\n", l->id, l->device, uuid);
    if (n < 0 || (size_t)n >= cap - len) break; /* cannot happen: sized for the maximum */
    len += (size_t)n;
    lines++;
  }
  if (skipped)
    tsr_log_warn("uid %" PRIu32 " holds more than %d leases: the lease index lists the oldest %d", uid,
                 TSR_USER_INDEX_MAX, TSR_USER_INDEX_MAX);
  return lines ? len : 0;
}

/* Lets `uid` (and only it, besides the daemon's user) read the file open
 * as `fd`, mode 0400 so far: a POSIX ACL entry user:<uid>:r--, else the
 * user's primary group. */
TSR_MUST_USE static tsr_status_t tsr__let_read(int fd, const char *name, uint32_t uid) {
  if (uid == geteuid()) return NULL; /* the owner reads it already */
  /* the kernel's posix_acl_xattr format (little-endian): a version, then
   * (tag, perm, id) entries sorted by tag: USER_OBJ r, USER uid r,
   * GROUP_OBJ -, MASK r, OTHER - */
  unsigned char acl[4 + 5 * 8];
  static const struct { uint16_t tag, perm; } e[5] = {{0x01, 4}, {0x02, 4}, {0x04, 0}, {0x10, 4}, {0x20, 0}};
  acl[0] = 2, acl[1] = acl[2] = acl[3] = 0;
  for (int i = 0; i < 5; i++) {
    unsigned char *p = acl + 4 + 8 * i;
    uint32_t id = e[i].tag == 0x02 ? uid : UINT32_MAX;
    p[0] = (unsigned char)e[i].tag, p[1] = (unsigned char)(e[i].tag >> 8);
    p[2] = (unsigned char)e[i].perm, p[3] = 0;
    for (int b = 0; b < 4; b++) p[4 + b] = (unsigned char)(id >> (8 * b));
  }
  if (fsetxattr(fd, "system.posix_acl_access", acl, sizeof(acl), 0) == 0) return NULL;
  if (errno != EOPNOTSUPP && errno != ENOTSUP)
    return tsr_status_from_errno(errno, "let uid %" PRIu32 " read %s", uid, name);
  static bool warned;
  if (!warned)
    tsr_log_warn(
        "the region directory's file system has no POSIX ACLs: each lease index is "
        "readable by its user's primary group");
  warned = true;
  struct passwd pw, *pwp = NULL;
  char buf[4096];
  if (getpwuid_r((uid_t)uid, &pw, buf, sizeof(buf), &pwp) != 0 || !pwp)
    return tsr_status_make(TSR_NOT_FOUND, "uid %" PRIu32 " has no passwd entry: %s not readable", uid, name);
  if (fchown(fd, (uid_t)-1, pwp->pw_gid) != 0 || fchmod(fd, 0440) != 0)
    return tsr_status_from_errno(errno, "let uid %" PRIu32 "'s group read %s", uid, name);
  return NULL;
}

/* Publishes `text` as `name` in the directory: written under a temporary
 * name created with O_EXCL|O_NOFOLLOW, the daemon's, with `mode` and (for a
 * user's index, `reader` not UINT32_MAX) readable by `reader`, then renamed
 * into place. */
TSR_MUST_USE static tsr_status_t tsr__publish(int dir_fd, const char *name, const char *text, size_t len,
                                              uint32_t reader, mode_t mode) {
  char tmp[96];
  snprintf(tmp, sizeof(tmp), ".tmp-%s", name);
  unlinkat(dir_fd, tmp, 0); /* a leftover of a crash (the directory is the daemon's) */
  int fd;
  TSR_RETURN_IF_ERROR(tsr_fs_open_regular(dir_fd, tmp, O_WRONLY | O_CREAT | O_EXCL, 0400, &fd));
  tsr_status_t st = NULL;
  size_t off = 0;
  while (!st && off < len) {
    ssize_t w = write(fd, text + off, len - off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0)
      st = tsr_status_from_errno(w < 0 ? errno : EIO, "write %s", name);
    else
      off += (size_t)w;
  }
  if (!st && fchmod(fd, mode) != 0) st = tsr_status_from_errno(errno, "chmod %s", name);
  if (!st && reader != UINT32_MAX) st = tsr__let_read(fd, name, reader);
  close(fd);
  if (!st && renameat(dir_fd, tmp, dir_fd, name) != 0) st = tsr_status_from_errno(errno, "publish %s", name);
  if (st) unlinkat(dir_fd, tmp, 0);
  return st;
}

tsr_status_t tsr_user_index_update(int dir_fd, const tsr_lease_table_t *t, uint32_t uid) {
  char name[64], text[TSR__INDEX_BYTES];
  tsr__index_name(uid, name, sizeof(name));
  size_t len = tsr__index_text(t, uid, text, sizeof(text));
  if (len == 0) {
    if (unlinkat(dir_fd, name, 0) != 0 && errno != ENOENT)
      return tsr_status_from_errno(errno, "remove lease index %s", name);
    return NULL;
  }
  return tsr__publish(dir_fd, name, text, len, uid, 0400);
}

tsr_status_t tsr_node_policy_write(int dir_fd, bool deny) {
  const char *text = deny ? "deny\n" : "pass\n";
  return tsr__publish(dir_fd, "node.policy", text, strlen(text), UINT32_MAX, 0644);
}

void tsr_user_index_rebuild(int dir_fd, const tsr_lease_table_t *t) {
  int fd = dup(dir_fd);
  DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
  if (!d) {
    if (fd >= 0) close(fd);
    tsr_log_warn("cannot list the region directory to rebuild the lease indexes: %s", strerror(errno));
  } else {
    rewinddir(d);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
      const char *n = e->d_name;
      size_t len = strlen(n);
      bool index = strncmp(n, "user-", 5) == 0 && len > 12 && strcmp(n + len - 7, ".leases") == 0;
      bool tmp = strncmp(n, ".tmp-user-", 10) == 0;
      if (index || tmp) unlinkat(dir_fd, n, 0);
    }
    closedir(d);
  }
  /* one write per owner: at its first lease in id order */
  for (size_t i = 0; i < tsr_lease_table_count(t); i++) {
    uint32_t uid = tsr_lease_table_at(t, i)->owner_uid;
    bool first = true;
    for (size_t j = 0; j < i && first; j++) first = tsr_lease_table_at(t, j)->owner_uid != uid;
    if (!first) continue;
    tsr_status_t st = tsr_user_index_update(dir_fd, t, uid);
    if (st) {
      tsr_log_error("lease index of uid %" PRIu32 ": %s", uid, tsr_status_message(st));
      tsr_status_free(st);
    }
  }
}
