/* roots.c: processes registered for a lease (lease.attach).
 *
 * `tessera run` registers itself before it starts its command, so that
 * every process of the command's tree belongs to the lease whether or not it
 * loads the shim: the backstop attributes a GPU process to a lease when it
 * descends from one of the lease's roots, and a `signal` action reaches the
 * whole tree. A root is a pid with its start time (a reused pid is another
 * process); it is forgotten when its process is gone or its lease ends. */
#include <stdlib.h>
#include <string.h>

#include "base/array.h"
#include "daemon/procs.h"
#include "daemon/roots.h"

tsr_status_t tsr_roots_add(tsr_roots_t *r, uint64_t lease, int32_t pid, uint64_t start_ticks) {
  size_t of_lease = 0;
  for (size_t i = 0; i < r->count; i++) {
    if (r->v[i].lease != lease) continue;
    if (r->v[i].pid == pid && r->v[i].start_ticks == start_ticks) return NULL;
    of_lease++;
  }
  if (of_lease >= TSR_ROOTS_PER_LEASE)
    return tsr_status_make(TSR_RESOURCE_EXHAUSTED, "lease %llu has %d processes attached already, the most it may",
                           (unsigned long long)lease, TSR_ROOTS_PER_LEASE);
  tsr_root_t *v = tsr_array_grow(r->v, &r->cap, r->count + 1, sizeof(*v), 16);
  if (!v) return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory");
  r->v = v;
  r->v[r->count++] = (tsr_root_t){lease, pid, start_ticks};
  return NULL;
}

/* Keeps the roots `keep` says yes to, in order. */
static void tsr__filter(tsr_roots_t *r, bool (*keep)(const tsr_root_t *, const void *), const void *ctx) {
  size_t n = 0;
  for (size_t i = 0; i < r->count; i++)
    if (keep(&r->v[i], ctx)) r->v[n++] = r->v[i];
  r->count = n;
}

static bool tsr__not_of_lease(const tsr_root_t *root, const void *ctx) { return root->lease != *(const uint64_t *)ctx; }

static bool tsr__in_snapshot(const tsr_root_t *root, const void *ctx) {
  const tsr_proc_t *p = tsr_procs_find(ctx, root->pid);
  return p && p->start_ticks == root->start_ticks;
}

void tsr_roots_forget_lease(tsr_roots_t *r, uint64_t lease) { tsr__filter(r, tsr__not_of_lease, &lease); }

void tsr_roots_prune(tsr_roots_t *r, const tsr_procs_t *procs) {
  if (procs->truncated || procs->count == 0) return; /* a partial snapshot cannot say who is gone */
  tsr__filter(r, tsr__in_snapshot, procs);
}

void tsr_roots_free(tsr_roots_t *r) {
  free(r->v);
  memset(r, 0, sizeof(*r));
}
