/* daemon/userindex.h: the files beside the regions that the shim reads in
 * its node-wide mode (userindex.c): each user's lease index, and the
 * node's policy. */
#ifndef TESSERA_DAEMON_USERINDEX_H
#define TESSERA_DAEMON_USERINDEX_H

#include <stdbool.h>
#include <stdint.h>

#include "lease/lease.h"
#include "tessera/status.h"

#define TSR_USER_INDEX_MAX 64 /* lease lines in one index */

/* Writes <region_dir>/user-<uid>.leases for `uid` from the active leases of
 * `table` (removes it when the user holds none). The file is the daemon's
 * (the user cannot rewrite it), readable by `uid` alone (a POSIX ACL entry,
 * else the user's primary group), written under a temporary name created
 * with O_EXCL|O_NOFOLLOW and renamed into place. Format (the shim parses it):
 *   tessera-leases 1
 *   <lease id> <device index> <device uuid or ->     one per lease, oldest first */
TSR_MUST_USE tsr_status_t tsr_user_index_update(int dir_fd, const tsr_lease_table_t *table, uint32_t uid);
/* At start: removes every index file, then writes one per user with leases. */
void tsr_user_index_rebuild(int dir_fd, const tsr_lease_table_t *table);
/* Writes <region_dir>/node.policy: "deny" or "pass" and a newline, the
 * daemon's own, mode 0644 (the shim reads it in the node-wide mode). */
TSR_MUST_USE tsr_status_t tsr_node_policy_write(int dir_fd, bool deny);

#endif
