/* pools.c: stream-ordered allocation (cuMemAllocAsync, cuMemAllocFromPoolAsync)
 * and the pools behind it.
 *
 * A pool keeps freed memory for reuse (up to its release threshold, until a
 * synchronize or a trim), so charging per allocation would let a tenant
 * hold far more than it is charged: allocate, free, allocate from another
 * pool. Instead each pool is charged what the driver says it reserves on
 * the device (CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT). Before an allocation
 * the shim charges what the pool would have to grow by (used + size -
 * reserved), refusing with out-of-memory if the lease cannot take it; after
 * the driver answers, the account is set to what the pool then reserves.
 * Frees and synchronizes shrink a pool on the driver's schedule: a trim,
 * a destroy, a refusal anywhere (account.c) and the memory queries bring
 * the accounts down again. An allocation made while its stream is being
 * captured takes no memory (the graph's launch does, graphs.c): it is only
 * checked against what the lease has left.
 *
 * Each block is also recorded (account.c), with its pool's id and its
 * context, its bytes being its pool's account's. A pool destroyed while
 * blocks are alive goes on in the driver until the last of them is freed
 * (the CUDA documentation of cuMemPoolDestroy; on the H100 a destroy with a
 * live 64 MiB block gave back nothing, its free gave back the 64 MiB), and
 * so does its account: it keeps all it was charged, gives back each block's
 * bytes as the block is freed (or its context ends), and the rest with the
 * last one. The driver cannot be asked what a destroyed pool reserves, so
 * the account holds what it reserved at the destroy, no less.
 *
 * The accounts sit in a small table under one mutex: these calls are not
 * the plain-allocation hot path, and the settling must see a pool's
 * numbers and its account together. */
#include <pthread.h>
#include <string.h>

#include "shim/shim.h"

#define TSR_EXPORT __attribute__((visibility("default")))
#define TSR__POOLS_MAX 256

typedef struct {
  CUmemoryPool pool;
  uint32_t id;      /* what its blocks' records name (never 0, never reused) */
  int lease;        /* index into the attached leases */
  uint64_t charged; /* what the pool's account holds in the region */
  uint64_t blocks;  /* its recorded blocks not yet freed */
  bool destroyed;   /* destroyed with blocks alive: the driver cannot be
                       asked about it, and its handle names no pool */
} tsr__pool_t;

static pthread_mutex_t tsr__mu = PTHREAD_MUTEX_INITIALIZER;
static tsr__pool_t tsr__pools[TSR__POOLS_MAX];
static size_t tsr__npools;
static uint32_t tsr__last_id;

static void tsr__pools_after_fork(void) {
  pthread_mutex_init(&tsr__mu, NULL);
  tsr__npools = 0;
}

/* The account of a pool the caller may use (not destroyed). */
static tsr__pool_t *tsr__find(CUmemoryPool pool) {
  for (size_t i = 0; i < tsr__npools; i++)
    if (tsr__pools[i].pool == pool && !tsr__pools[i].destroyed) return &tsr__pools[i];
  return NULL;
}

static tsr__pool_t *tsr__find_id(uint32_t id) {
  for (size_t i = 0; i < tsr__npools; i++)
    if (tsr__pools[i].id == id) return &tsr__pools[i];
  return NULL;
}

static tsr__pool_t *tsr__add(CUmemoryPool pool, int lease) {
  tsr__pool_t *e = tsr__find(pool);
  if (e) return e;
  if (tsr__npools == TSR__POOLS_MAX) return NULL;
  e = &tsr__pools[tsr__npools++];
  memset(e, 0, sizeof(*e));
  e->pool = pool;
  if (++tsr__last_id == 0) tsr__last_id = 1; /* 0 means "no pool" */
  e->id = tsr__last_id;
  e->lease = lease;
  return e;
}

/* Gives back all `e` holds and forgets it. */
static void tsr__drop(tsr__pool_t *e) {
  tsr_shim_credit_exact(e->lease, e->charged);
  *e = tsr__pools[--tsr__npools];
}

static uint64_t tsr__attr(CUmemoryPool pool, int attr) {
  cuuint64_t v = 0;
  if (!tsr_real.cuMemPoolGetAttribute || tsr_real.cuMemPoolGetAttribute(pool, attr, &v) != CUDA_SUCCESS) return 0;
  return v;
}

/* Sets the account to what the pool reserves, and returns that. Charging
 * more can fail (the driver took more than predicted while the lease was
 * nearly full): that is left uncharged, said once, and the daemon's
 * backstop sees it. */
static uint64_t tsr__settle(tsr__pool_t *e) {
  uint64_t r = tsr__attr(e->pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT);
  if (r > e->charged) {
    if (tsr_shim_charge_exact(e->lease, r - e->charged))
      e->charged = r;
    else
      tsr_shim_warn_once(TSR_WARN_POOL_OVER, "a memory pool reserved more than the lease has left");
  } else if (r < e->charged) {
    tsr_shim_credit_exact(e->lease, e->charged - r);
    e->charged = r;
  }
  return r;
}

static void tsr__pools_reconcile(void) {
  pthread_mutex_lock(&tsr__mu);
  for (size_t i = 0; i < tsr__npools; i++)
    if (!tsr__pools[i].destroyed) tsr__settle(&tsr__pools[i]);
  pthread_mutex_unlock(&tsr__mu);
}

void tsr_shim_pool_block_end(const tsr_shim_ptrmap_val_t *held) {
  pthread_mutex_lock(&tsr__mu);
  tsr__pool_t *e = tsr__find_id(held->pool);
  if (e && e->blocks) e->blocks--;
  if (e && e->destroyed) { /* a live pool's account follows what it reserves */
    if (e->blocks == 0) {
      tsr__drop(e);
    } else {
      uint64_t back = held->bytes < e->charged ? held->bytes : e->charged;
      tsr_shim_credit_exact(e->lease, back);
      e->charged -= back;
    }
  }
  pthread_mutex_unlock(&tsr__mu);
}

static bool tsr__capturing(CUstream stream, bool ptsz) {
  CUresult (*is)(CUstream, int *) =
      ptsz && tsr_real.cuStreamIsCapturing_ptsz ? tsr_real.cuStreamIsCapturing_ptsz : tsr_real.cuStreamIsCapturing;
  int status = CU_STREAM_CAPTURE_STATUS_NONE;
  return is && is(stream, &status) == CUDA_SUCCESS && status != CU_STREAM_CAPTURE_STATUS_NONE;
}

/* One stream-ordered allocation from `pool` (NULL: the current device's
 * current pool) through `real_async` or `real_pool`. */
static CUresult tsr__alloc(CUresult (*real_async)(CUdeviceptr *, size_t, CUstream),
                           CUresult (*real_pool)(CUdeviceptr *, size_t, CUmemoryPool, CUstream), CUdeviceptr *dptr,
                           size_t bytesize, CUmemoryPool pool, CUstream stream, bool ptsz) {
#define TSR__CALL() (real_pool ? real_pool(dptr, bytesize, pool, stream) : real_async(dptr, bytesize, stream))
  if (!real_async && !real_pool) return CUDA_ERROR_NOT_INITIALIZED;
  if (!dptr || bytesize == 0) return TSR__CALL(); /* the driver's own error */
  int lease = tsr_shim_current_lease();
  if (lease == TSR_TENANT_UNGOVERNED) return TSR__CALL();
  if (lease == TSR_TENANT_NO_LEASE) return tsr_shim.tenant.deny ? CUDA_ERROR_OUT_OF_MEMORY : TSR__CALL();
  uint64_t want = tsr_shim_round(bytesize);
  if (want == UINT64_MAX) return CUDA_ERROR_OUT_OF_MEMORY;
  if (tsr__capturing(stream, ptsz)) { /* a graph node: its launch is charged */
    if (want > tsr_shim_left(lease)) tsr_shim_reconcile();
    return want > tsr_shim_left(lease) ? CUDA_ERROR_OUT_OF_MEMORY : TSR__CALL();
  }
  if (!pool) {
    CUdevice dev = 0;
    if (tsr_real.cuCtxGetDevice(&dev) != CUDA_SUCCESS) return TSR__CALL();
    CUresult (*get)(CUmemoryPool *, CUdevice) =
        tsr_real.cuDeviceGetMemPool ? tsr_real.cuDeviceGetMemPool : tsr_real.cuDeviceGetDefaultMemPool;
    if (!get || get(&pool, dev) != CUDA_SUCCESS) return TSR__CALL();
  }
  /* the block's record: its context asked before tsr__mu (context.c's lock
   * comes first) */
  tsr_shim_ptrmap_val_t held = {want, 0, tsr_shim_context_current(), 0};
  CUresult rc = CUDA_ERROR_OUT_OF_MEMORY;
  for (int attempt = 0; attempt < 2; attempt++) {
    if (attempt) tsr_shim_reconcile(); /* other accounts may have shrunk */
    pthread_mutex_lock(&tsr__mu);
    tsr__pool_t *e = tsr__add(pool, lease);
    if (!e) {
      pthread_mutex_unlock(&tsr__mu);
      tsr_shim_warn_once(TSR_WARN_TOO_MANY_POOLS, "too many memory pools to account for; refusing their allocations");
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
    uint64_t reserved = tsr__settle(e);
    uint64_t used = tsr__attr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT);
    /* The H100 (driver 580) never takes a pool pointer freed by cuMemFree
     * off "used": it only grows, and can pass "reserved". Stale, it can
     * only make the predicted growth larger (safe); past "reserved" it says
     * nothing: then the whole allocation is taken to be growth. */
    if (used > reserved) used = reserved;
    uint64_t grow = used > UINT64_MAX - want ? UINT64_MAX : used + want;
    grow = grow > reserved ? grow - reserved : 0;
    if (grow && !tsr_shim_charge_exact(e->lease, grow)) {
      pthread_mutex_unlock(&tsr__mu);
      continue;
    }
    e->charged += grow;
    rc = TSR__CALL();
    tsr__settle(e);
    if (rc == CUDA_SUCCESS) {
      e->blocks++;
      held.tag = (uint32_t)e->lease;
      held.pool = e->id;
    }
    pthread_mutex_unlock(&tsr__mu);
    /* the pointer is not the caller's yet: no free can come before this */
    if (rc != CUDA_SUCCESS || tsr_shim_ptrmap_put(&tsr_shim.map, *dptr, &held)) return rc;
    tsr_shim_warn_once(TSR_WARN_TOO_MANY_ALLOCATIONS, "too many live allocations to account for; refusing more");
    tsr_real.cuMemFree_v2(*dptr);
    tsr_shim_pool_block_end(&held);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  return rc;
#undef TSR__CALL
}

TSR_EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream stream) {
  tsr_shim_ready();
  return tsr__alloc(tsr_real.cuMemAllocAsync, NULL, dptr, bytesize, NULL, stream, false);
}

TSR_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream stream) {
  tsr_shim_ready();
  return tsr__alloc(tsr_real.cuMemAllocAsync_ptsz, NULL, dptr, bytesize, NULL, stream, true);
}

TSR_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream stream) {
  tsr_shim_ready();
  if (!pool)
    return tsr_real.cuMemAllocFromPoolAsync ? tsr_real.cuMemAllocFromPoolAsync(dptr, bytesize, pool, stream)
                                            : CUDA_ERROR_NOT_INITIALIZED;
  return tsr__alloc(NULL, tsr_real.cuMemAllocFromPoolAsync, dptr, bytesize, pool, stream, false);
}

TSR_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                                 CUstream stream) {
  tsr_shim_ready();
  if (!pool)
    return tsr_real.cuMemAllocFromPoolAsync_ptsz ? tsr_real.cuMemAllocFromPoolAsync_ptsz(dptr, bytesize, pool, stream)
                                                 : CUDA_ERROR_NOT_INITIALIZED;
  return tsr__alloc(NULL, tsr_real.cuMemAllocFromPoolAsync_ptsz, dptr, bytesize, pool, stream, true);
}

TSR_EXPORT CUresult cuMemPoolCreate(CUmemoryPool *pool, const void *props) {
  tsr_shim_ready();
  if (!tsr_real.cuMemPoolCreate) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult rc = tsr_real.cuMemPoolCreate(pool, props);
  if (rc != CUDA_SUCCESS || !tsr_shim.tenant.governed) return rc;
  const CUmemAllocationProp_prefix *p = props; /* CUmemPoolProps starts the same way */
  int lease = p->location.type == CU_MEM_LOCATION_TYPE_DEVICE ? tsr_shim_lease_of_device(p->location.id)
                                                              : tsr_shim_current_lease();
  if (lease < 0) return rc;
  pthread_mutex_lock(&tsr__mu);
  tsr__pool_t *e = tsr__add(*pool, lease);
  pthread_mutex_unlock(&tsr__mu);
  if (!e) {
    tsr_shim_warn_once(TSR_WARN_TOO_MANY_POOLS, "too many memory pools to account for; refusing their allocations");
    tsr_real.cuMemPoolDestroy(*pool);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  return rc;
}

TSR_EXPORT CUresult cuMemPoolDestroy(CUmemoryPool pool) {
  tsr_shim_ready();
  if (!tsr_real.cuMemPoolDestroy) return CUDA_ERROR_NOT_INITIALIZED;
  pthread_mutex_lock(&tsr__mu);
  tsr__pool_t *e = tsr__find(pool);
  if (e) tsr__settle(e);
  CUresult rc = tsr_real.cuMemPoolDestroy(pool);
  if (rc == CUDA_SUCCESS && e) {
    /* with blocks alive the pool lives on until they are freed: so does
     * its account, with all it holds (tsr_shim_pool_block_end) */
    if (e->blocks == 0)
      tsr__drop(e);
    else
      e->destroyed = true;
  }
  pthread_mutex_unlock(&tsr__mu);
  return rc;
}

TSR_EXPORT CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t keep) {
  tsr_shim_ready();
  if (!tsr_real.cuMemPoolTrimTo) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult rc = tsr_real.cuMemPoolTrimTo(pool, keep);
  pthread_mutex_lock(&tsr__mu);
  tsr__pool_t *e = tsr__find(pool);
  if (e) tsr__settle(e);
  pthread_mutex_unlock(&tsr__mu);
  return rc;
}

const tsr_shim_family_t tsr_shim_family_pools = {.after_fork = tsr__pools_after_fork,
                                                 .reconcile = tsr__pools_reconcile};
