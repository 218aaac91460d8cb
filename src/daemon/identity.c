/* identity.c: who is on the other end of a connection.
 *
 * The kernel tells us the peer's uid, gid and pid (SO_PEERCRED); the user
 * name and group membership come from the system's user database. Nothing a
 * client writes is trusted for identity. */
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/units.h"
#include "daemon/identity.h"

static bool tsr__in_group(const char *user, gid_t primary, const char *group) {
  if (!group || !*group) return false;
  struct group grp, *gr = NULL;
  char buf[16384];
  if (getgrnam_r(group, &grp, buf, sizeof(buf), &gr) != 0 || !gr) return false;
  if (gr->gr_gid == primary) return true;
  int n = 64;
  gid_t groups[64];
  if (getgrouplist(user, primary, groups, &n) < 0) {
    /* more than 64 groups: fall back to the group's member list */
    for (char **m = gr->gr_mem; m && *m; m++)
      if (strcmp(*m, user) == 0) return true;
    return false;
  }
  for (int i = 0; i < n; i++)
    if (groups[i] == gr->gr_gid) return true;
  return false;
}

tsr_status_t tsr_identity_from_socket(int fd, const char *admin_group, tsr_identity_t *out) {
  struct ucred cred;
  socklen_t len = sizeof(cred);
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return tsr_status_from_errno(errno, "SO_PEERCRED");
  memset(out, 0, sizeof(*out));
  out->uid = cred.uid;
  out->gid = cred.gid;
  out->pid = cred.pid;
  struct passwd pw, *pwp = NULL;
  char buf[16384];
  if (getpwuid_r(cred.uid, &pw, buf, sizeof(buf), &pwp) == 0 && pwp && strlen(pwp->pw_name) < sizeof(out->user)) {
    snprintf(out->user, sizeof(out->user), "%s", pwp->pw_name);
    out->admin = tsr__in_group(out->user, pwp->pw_gid, admin_group);
  } else {
    snprintf(out->user, sizeof(out->user), "uid%u", cred.uid); /* no passwd entry */
  }
  if (cred.uid == 0 || cred.uid == geteuid()) out->admin = true;
  return NULL;
}

tsr_status_t tsr_identity_lookup_user(const char *name, uint32_t *out_uid, char *out_name, size_t cap) {
  struct passwd pw, *pwp = NULL;
  char buf[16384];
  if (!name || !*name) return tsr_status_make(TSR_INVALID_ARGUMENT, "empty user name");
  if (getpwnam_r(name, &pw, buf, sizeof(buf), &pwp) != 0 || !pwp) {
    uint64_t uid;
    tsr_status_t st = tsr_parse_u64(name, &uid);
    if (st || uid > UINT32_MAX - 1) {
      tsr_status_free(st);
      return tsr_status_make(TSR_NOT_FOUND, "no user '%s' on this node", name);
    }
    if (getpwuid_r((uid_t)uid, &pw, buf, sizeof(buf), &pwp) != 0 || !pwp)
      return tsr_status_make(TSR_NOT_FOUND, "no user with uid %s on this node", name);
  }
  if (strlen(pwp->pw_name) >= cap)
    return tsr_status_make(TSR_INVALID_ARGUMENT, "user name '%s' is too long", pwp->pw_name);
  *out_uid = pwp->pw_uid;
  snprintf(out_name, cap, "%s", pwp->pw_name);
  return NULL;
}

bool tsr_identity_uid_exempt_or_in(uint32_t uid, const char *admin_group, const char *group) {
  if (uid == 0 || uid == geteuid()) return true;
  struct passwd pw, *pwp = NULL;
  char buf[16384];
  if (getpwuid_r((uid_t)uid, &pw, buf, sizeof(buf), &pwp) != 0 || !pwp) return false;
  return tsr__in_group(pwp->pw_name, pwp->pw_gid, admin_group) || tsr__in_group(pwp->pw_name, pwp->pw_gid, group);
}

bool tsr_identity_uid_exempt(uint32_t uid, const char *admin_group) {
  return tsr_identity_uid_exempt_or_in(uid, admin_group, NULL);
}

bool tsr_identity_exempt_fn(void *admin_group, uint32_t uid) { return tsr_identity_uid_exempt(uid, admin_group); }
