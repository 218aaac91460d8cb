/* ctl.h: the page a test orchestrator (check.c) shares with its tenants
 * (tenant.c). It is a file that both map MAP_SHARED; the orchestrator
 * creates it zeroed, the tenants only add to counters and write their own
 * row. Barriers that must release every tenant at once are pipes (a closed
 * write end wakes every reader together); this page carries the phases that
 * tenants poll and the results they report. */
#ifndef TSR_TEST_SHIM_CTL_H
#define TSR_TEST_SHIM_CTL_H

#include <stdatomic.h>
#include <stdint.h>

#define TSR_CTL_TENANTS 64

/* The allocation paths of the stress mix. */
enum {
  TSR_P_PLAIN,        /* cuMemAlloc_v2 */
  TSR_P_PITCH,        /* cuMemAllocPitch_v2 */
  TSR_P_MANAGED,      /* cuMemAllocManaged */
  TSR_P_ASYNC,        /* cuMemAllocAsync (the device's current pool) */
  TSR_P_POOL_DEFAULT, /* cuMemAllocFromPoolAsync, the default pool */
  TSR_P_POOL_CREATED, /* cuMemAllocFromPoolAsync, a pool from cuMemPoolCreate */
  TSR_P_VMM,          /* cuMemCreate / cuMemRelease */
  TSR_P_ARRAY,        /* cuArrayCreate_v2 */
  TSR_P_ARRAY3D,      /* cuArray3DCreate_v2 */
  TSR_P_MIPMAP,       /* cuMipmappedArrayCreate */
  TSR_P_GRAPH,        /* cuGraphAddMemAllocNode, charged at launch */
  TSR_P_COUNT
};

/* Frees through another path than the allocation's. */
enum {
  TSR_X_ASYNC_OF_SYNC, /* cuMemFreeAsync of a cuMemAlloc/pitch/managed pointer */
  TSR_X_SYNC_OF_ASYNC, /* cuMemFree of a stream-ordered pointer */
  TSR_X_COUNT
};

typedef struct {
  _Atomic uint32_t ready;   /* tenants set up and waiting for the go pipe */
  _Atomic uint32_t done;    /* start-up: tenants that attached and allocated */
  _Atomic uint32_t freed;   /* stress: tenants that freed everything */
  _Atomic uint32_t failed;  /* tenants whose own checks failed */
  _Atomic uint32_t stop;    /* orchestrator: stop allocating, free everything */
  _Atomic uint32_t release; /* orchestrator: exit now */
  _Atomic uint64_t ok[TSR_P_COUNT];
  _Atomic uint64_t oom[TSR_P_COUNT];
  _Atomic uint64_t cross[TSR_X_COUNT];
  _Atomic uint64_t ops;
  /* one row per tenant */
  _Atomic int32_t pid[TSR_CTL_TENANTS];
  _Atomic int32_t slot[TSR_CTL_TENANTS];     /* region slot, -1 not found */
  _Atomic uint64_t woke_ns[TSR_CTL_TENANTS]; /* CLOCK_MONOTONIC at the go */
  _Atomic uint64_t done_ns[TSR_CTL_TENANTS]; /* CLOCK_MONOTONIC after its allocation */
} tsr_ctl_t;

static inline const char *tsr_ctl_path_name(int p) {
  static const char *const names[TSR_P_COUNT] = {"cuMemAlloc_v2",
                                                 "cuMemAllocPitch_v2",
                                                 "cuMemAllocManaged",
                                                 "cuMemAllocAsync",
                                                 "cuMemAllocFromPoolAsync(default)",
                                                 "cuMemAllocFromPoolAsync(created)",
                                                 "cuMemCreate",
                                                 "cuArrayCreate_v2",
                                                 "cuArray3DCreate_v2",
                                                 "cuMipmappedArrayCreate",
                                                 "cuGraphAddMemAllocNode"};
  return p >= 0 && p < TSR_P_COUNT ? names[p] : "?";
}

#endif
