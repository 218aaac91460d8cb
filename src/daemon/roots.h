/* daemon/roots.h: processes registered for a lease (roots.c; lease.attach,
 * `tessera run`), whose descendants are the lease's. */
#ifndef TESSERA_DAEMON_ROOTS_H
#define TESSERA_DAEMON_ROOTS_H

#include <stddef.h>
#include <stdint.h>

#include "daemon/procs.h"
#include "tessera/status.h"

#define TSR_ROOTS_PER_LEASE 64

typedef struct tsr_root_s {
  uint64_t lease;
  int32_t pid; /* the daemon's namespace (SO_PEERCRED gives it so) */
  uint64_t start_ticks;
} tsr_root_t;

typedef struct tsr_roots_s {
  tsr_root_t *v;
  size_t count, cap;
} tsr_roots_t;

/* Registers process (pid, start) for `lease`; a second registration of the
 * same process is a no-op. TSR_RESOURCE_EXHAUSTED past TSR_ROOTS_PER_LEASE. */
TSR_MUST_USE tsr_status_t tsr_roots_add(tsr_roots_t *roots, uint64_t lease, int32_t pid, uint64_t start_ticks);
/* Forgets every root of `lease`. */
void tsr_roots_forget_lease(tsr_roots_t *roots, uint64_t lease);
/* Forgets roots whose process is not in the snapshot. */
void tsr_roots_prune(tsr_roots_t *roots, const tsr_procs_t *procs);
void tsr_roots_free(tsr_roots_t *roots);

#endif
