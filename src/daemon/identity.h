/* daemon/identity.h: who is on the other end of a connection (identity.c):
 * the peer's credentials as the kernel gives them, users looked up by name
 * or uid, and whose processes are exempt from the deny rule and from every
 * signal. */
#ifndef TESSERA_DAEMON_IDENTITY_H
#define TESSERA_DAEMON_IDENTITY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lease/lease.h"
#include "tessera/status.h"

typedef struct tsr_identity_s {
  uint32_t uid;
  uint32_t gid;
  int32_t pid;
  char user[TSR_LEASE_NAME_MAX];
  bool admin;
} tsr_identity_t;

/* Reads the peer's credentials from connected socket `fd` and resolves its
 * user name and admin right (uid 0, the daemon's own uid, or a member of
 * `admin_group`). */
TSR_MUST_USE tsr_status_t tsr_identity_from_socket(int fd, const char *admin_group, tsr_identity_t *out);

/* Resolves a user given by name (or by decimal uid) for "create for another
 * user". TSR_NOT_FOUND if there is no such user. */
TSR_MUST_USE tsr_status_t tsr_identity_lookup_user(const char *name_or_uid, uint32_t *out_uid, char *out_name,
                                                   size_t cap);

/* Whether uid is exempt from the deny rule and from every signal: 0, the
 * daemon's own, or an admin. */
bool tsr_identity_uid_exempt(uint32_t uid, const char *admin_group);
/* Whether uid is exempt (above), or a member of `group` (NULL or empty:
 * none): one look into the user database for both. */
bool tsr_identity_uid_exempt_or_in(uint32_t uid, const char *admin_group, const char *group);
/* The same as a tsr_actions_exempt_fn; ctx is the admin group (a string). */
bool tsr_identity_exempt_fn(void *admin_group, uint32_t uid);

#endif
