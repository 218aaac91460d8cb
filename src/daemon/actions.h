/* daemon/actions.h: signals with a grace (actions.c): SIGTERM, then SIGKILL
 * after the grace, never to a reused pid nor to a process that is not the
 * owner's to end. */
#ifndef TESSERA_DAEMON_ACTIONS_H
#define TESSERA_DAEMON_ACTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tessera/status.h"

typedef struct tsr_actions_s tsr_actions_t;

/* One process to signal: its pid in the daemon's namespace and start time. */
typedef struct tsr_target_s {
  int32_t pid;
  uint64_t start_ticks;
} tsr_target_t;

/* Whether processes of `uid` may never be signalled: root, the daemon's
 * user and admins (tsr_identity_uid_exempt with the admin group). */
typedef bool (*tsr_actions_exempt_fn)(void *ctx, uint32_t uid);

/* `exempt` (with `ctx`) is asked about every uid of every target. */
TSR_MUST_USE tsr_status_t tsr_actions_create(uint64_t grace_ns, tsr_actions_exempt_fn exempt, void *ctx,
                                             tsr_actions_t **out_actions);
void tsr_actions_free(tsr_actions_t *actions);
/* SIGTERM to each target not already being signalled, and SIGKILL to those
 * still alive `grace_ns` later (tsr_actions_tick). Whatever named them (a
 * region slot a tenant wrote, a process tree, NVML), a target is signalled
 * only if it is still the same process (its start time) and its real uid is
 * `owner_uid`, and none of its real, effective and saved uids is exempt:
 * no process of another user, of root, of the daemon's user or of an admin
 * is ever signalled. `lease` groups them (0: the deny rule, whose owner is
 * the process's own user). Returns how many got SIGTERM now. */
size_t tsr_actions_signal(tsr_actions_t *actions, uint64_t lease, uint32_t owner_uid, const tsr_target_t *targets,
                          size_t count, uint64_t now_mono_ns);
/* Targets refused since the actions were made: not the owner's, or exempt. */
uint64_t tsr_actions_refused(const tsr_actions_t *actions);
/* True while a grace period runs for lease `lease` (or, with lease 0, for
 * process `pid`). */
bool tsr_actions_pending(const tsr_actions_t *actions, uint64_t lease, int32_t pid);
/* Sends the SIGKILLs that are due, forgets targets that are gone. */
void tsr_actions_tick(tsr_actions_t *actions, uint64_t now_mono_ns);

#endif
