/* pools.c: streams, memory pools and stream-ordered allocation.
 *
 * The pool model, as the H100 behaved:
 *   - a pool's "reserved" bytes are charged to the device; "used" of them
 *     are handed out. An allocation takes unused reserved bytes first and
 *     charges only the rest (out of memory if that does not fit);
 *   - a free (cuMemFreeAsync, cuMemFree of a pool pointer, the context's
 *     end) returns bytes to the pool, not to the device;
 *   - a synchronize (stream or context) shrinks each pool of the device to
 *     its release threshold (default 0: everything unused goes back; with
 *     UINT64_MAX the pool keeps it: 64 MiB stayed taken on the H100);
 *   - cuMemPoolTrimTo(pool, n) gives back unused bytes down to n;
 *   - USED_MEM_CURRENT is lowered by cuMemFreeAsync only: a pool pointer
 *     freed by cuMemFree stays counted, so it can pass RESERVED (the H100,
 *     driver 580: 42 GB "used" of 0 reserved after 157 such frees);
 *   - a pool destroyed with allocations alive goes on until they are freed,
 *     and gives back each one at once (the H100).
 * Memory is taken and given back when the call is made, not when the
 * stream reaches it: "stream order" is program order for memory. Kernels do
 * take time on the stream (timeline.c): a synchronize sleeps until the
 * stream's work ends, cuStreamQuery answers CUDA_ERROR_NOT_READY before.
 * On a capturing stream (capture.c) an allocation or free becomes a graph
 * node and takes nothing until the graph is launched. */
#include <stdlib.h>

#include "base/array.h"
#include "internal.h"

/* ---- streams ------------------------------------------------------------------ */

CUresult fc_stream_ctx(CUstream h, fc_ctx_t **out_ctx) {
  /* the legacy and the per-thread default streams of the current context */
  if (!h || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD) return fc_current(out_ctx);
  fc_stream_t *s = fc_obj_find(FC_K_STREAM, h);
  *out_ctx = NULL;
  if (!s) return CUDA_ERROR_INVALID_HANDLE;
  if (!s->ctx->alive) return CUDA_ERROR_CONTEXT_IS_DESTROYED;
  *out_ctx = s->ctx;
  return CUDA_SUCCESS;
}

/* The calling thread's per-thread default stream in context `c`. */
static fc_stream_t *fc_stream_per_thread(fc_ctx_t *c) {
  uint64_t me = fc_thread_id();
  for (size_t i = 0; i < g_fc.nptstreams; i++)
    if (g_fc.ptstreams[i]->ctx == c && g_fc.ptstreams[i]->thread == me) return g_fc.ptstreams[i];
  fc_stream_t **grown =
      tsr_array_grow(g_fc.ptstreams, &g_fc.capptstreams, g_fc.nptstreams + 1, sizeof *g_fc.ptstreams, 8);
  if (!grown) return NULL;
  g_fc.ptstreams = grown;
  fc_stream_t *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  s->hdr.kind = FC_K_STREAM;
  s->ctx = c;
  s->skind = FC_S_PER_THREAD;
  s->thread = me;
  g_fc.ptstreams[g_fc.nptstreams++] = s;
  return s;
}

CUresult fc_stream_get(CUstream h, fc_stream_t **out_stream) {
  *out_stream = NULL;
  fc_ctx_t *c;
  CUresult rc = fc_stream_ctx(h, &c);
  if (rc != CUDA_SUCCESS) return rc;
  if (!h || h == CU_STREAM_LEGACY) {
    *out_stream = &c->legacy;
  } else if (h == CU_STREAM_PER_THREAD) {
    *out_stream = fc_stream_per_thread(c);
    if (!*out_stream) return CUDA_ERROR_OUT_OF_MEMORY;
  } else {
    *out_stream = fc_obj_find(FC_K_STREAM, h);
  }
  return CUDA_SUCCESS;
}

static CUresult fc_stream_create(CUstream *phStream, unsigned int Flags) {
  fc_ctx_t *c;
  CUresult rc = fc_current(&c);
  if (rc != CUDA_SUCCESS) return rc;
  if (!phStream || (Flags & ~(unsigned)CU_STREAM_NON_BLOCKING)) return CUDA_ERROR_INVALID_VALUE;
  fc_stream_t *s = fc_obj_new(FC_K_STREAM, sizeof *s);
  if (!s) return CUDA_ERROR_OUT_OF_MEMORY;
  s->ctx = c;
  s->skind = FC_S_CREATED;
  s->flags = Flags;
  *phStream = (CUstream)s;
  return CUDA_SUCCESS;
}
FC_EXPORT CUresult cuStreamCreate(CUstream *phStream, unsigned int Flags) {
  FC_LOCKED(fc_stream_create(phStream, Flags));
}

static void fc_stream_free(fc_stream_t *s) {
  fc_capture_release(s);
  free(s);
}

/* Work still queued goes on (its end stays on the device's timeline), as
 * on the real driver; a capture in progress is dropped with its graph. */
static CUresult fc_stream_destroy(CUstream h) {
  fc_stream_t *s = fc_obj_find(FC_K_STREAM, h);
  if (!s) return CUDA_ERROR_INVALID_HANDLE; /* NULL too (the H100) */
  if (!(s->flags & CU_STREAM_NON_BLOCKING) && s->end_ns > s->ctx->gone_end_ns)
    s->ctx->gone_end_ns = s->end_ns; /* the legacy stream still waits for it */
  fc_obj_remove(FC_K_STREAM, s);
  fc_stream_free(s);
  return CUDA_SUCCESS;
}
FC_EXPORT CUresult cuStreamDestroy_v2(CUstream hStream) { FC_LOCKED(fc_stream_destroy(hStream)); }
FC_EXPORT CUresult cuStreamDestroy(CUstream hStream) { FC_LOCKED(fc_stream_destroy(hStream)); }

/* Sleeps, the lock released, until the stream's work ends; then what a
 * synchronize does to the pools. A capturing stream cannot be synchronized
 * (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, and the capture is invalidated,
 * as on the real driver). */
static CUresult fc_stream_sync(CUstream h) {
  fc_stream_t *s;
  CUresult rc = fc_stream_get(h, &s);
  if (rc != CUDA_SUCCESS) return rc;
  if ((rc = fc_capture_sync_check(s)) != CUDA_SUCCESS) return rc;
  int dev = s->ctx->dev;
  fc_sleep_until(fc_stream_position(s));
  fc_pools_sync(dev);
  return CUDA_SUCCESS;
}
FC_EXPORT CUresult cuStreamSynchronize(CUstream hStream) { FC_LOCKED(fc_stream_sync(hStream)); }
FC_EXPORT CUresult cuStreamSynchronize_ptsz(CUstream hStream) { FC_LOCKED(fc_stream_sync(fc_ptsz(hStream))); }

/* CUDA_SUCCESS once the stream's work has ended, CUDA_ERROR_NOT_READY
 * before; on a capturing stream as cuStreamSynchronize. */
static CUresult fc_stream_query(CUstream h) {
  fc_stream_t *s;
  CUresult rc = fc_stream_get(h, &s);
  if (rc != CUDA_SUCCESS) return rc;
  if ((rc = fc_capture_sync_check(s)) != CUDA_SUCCESS) return rc;
  return fc_now_ns() >= fc_stream_position(s) ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}
FC_EXPORT CUresult cuStreamQuery(CUstream hStream) { FC_LOCKED(fc_stream_query(hStream)); }
FC_EXPORT CUresult cuStreamQuery_ptsz(CUstream hStream) { FC_LOCKED(fc_stream_query(fc_ptsz(hStream))); }

void fc_streams_release(fc_ctx_t *ctx) {
  for (size_t i = g_fc.nobjs[FC_K_STREAM]; i-- > 0;) {
    fc_stream_t *s = g_fc.objs[FC_K_STREAM][i];
    if (s->ctx != ctx) continue;
    fc_obj_remove(FC_K_STREAM, s);
    fc_stream_free(s);
  }
  for (size_t i = g_fc.nptstreams; i-- > 0;) {
    fc_stream_t *s = g_fc.ptstreams[i];
    if (s->ctx != ctx) continue;
    g_fc.ptstreams[i] = g_fc.ptstreams[--g_fc.nptstreams];
    fc_stream_free(s);
  }
  fc_capture_release(&ctx->legacy);
}

/* ---- pools -------------------------------------------------------------------- */

static fc_pool_t *fc_pool_new(int dev, bool is_default) {
  fc_pool_t *p = fc_obj_new(FC_K_POOL, sizeof *p);
  if (!p) return NULL;
  p->dev = dev;
  p->is_default = is_default;
  p->reuse[0] = p->reuse[1] = p->reuse[2] = 1; /* the REUSE_* policies start enabled */
  return p;
}

fc_pool_t *fc_default_pool(int dev) {
  if (!g_fc.default_pool[dev]) g_fc.default_pool[dev] = fc_pool_new(dev, true);
  return g_fc.default_pool[dev];
}

/* Gives back reserved bytes so that the pool keeps at most `keep` (never
 * below what is handed out). */
static void fc_pool_shrink(fc_pool_t *p, uint64_t keep) {
  uint64_t target = keep < p->reserved ? keep : p->reserved;
  if (target < p->used) target = p->used;
  if (p->reserved > target) {
    fc_uncharge(p->dev, p->reserved - target);
    p->reserved = target;
  }
}

static void fc_pool_free(fc_pool_t *p) {
  fc_pool_shrink(p, 0);
  fc_obj_remove(FC_K_POOL, p);
  free(p);
}

void fc_pool_give_back(fc_pool_t *p, uint64_t bytes) {
  p->used -= bytes < p->used ? bytes : p->used;
  p->live--;
  if (p->destroyed) {
    fc_pool_shrink(p, 0);
    if (p->live == 0) {
      fc_obj_remove(FC_K_POOL, p);
      free(p);
    }
  }
}

void fc_pools_sync(int dev) {
  for (size_t i = 0; i < g_fc.nobjs[FC_K_POOL]; i++) {
    fc_pool_t *p = g_fc.objs[FC_K_POOL][i];
    if (p->dev == dev && p->reserved > p->threshold) fc_pool_shrink(p, p->threshold);
  }
}

/* A pool handle the caller may use: known and not destroyed. */
static fc_pool_t *fc_pool_find(CUmemoryPool h) {
  fc_pool_t *p = fc_obj_find(FC_K_POOL, h);
  return p && !p->destroyed ? p : NULL;
}

/* Hands out `bytes` of pool `p` for context `c`. Zero bytes give the
 * pointer 0 and success (the H100). */
static CUresult fc_pool_alloc(fc_pool_t *p, fc_ctx_t *c, size_t bytes, CUdeviceptr *dptr) {
  if (bytes == 0) {
    *dptr = 0;
    return CUDA_SUCCESS;
  }
  uint64_t charge = fc_granule(bytes);
  uint64_t avail = p->reserved - p->used, need = charge > avail ? charge - avail : 0;
  if (charge > fake_cuda_state_total(g_fc.state, p->dev)) return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult rc = fc_charge(p->dev, need);
  if (rc != CUDA_SUCCESS) return rc;
  fc_alloc_t *a = fc_alloc_new(FC_A_POOL, bytes, true);
  if (!a) {
    fc_uncharge(p->dev, need);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  p->reserved += need;
  p->used += charge;
  p->used_attr += charge;
  p->live++;
  if (p->reserved > p->reserved_high) p->reserved_high = p->reserved;
  if (p->used > p->used_high) p->used_high = p->used;
  a->pool = p;
  a->charged = charge;
  a->dev = p->dev;
  a->ctx = c;
  *dptr = (CUdeviceptr)a->base;
  return CUDA_SUCCESS;
}

static CUresult fc_mem_alloc_async(CUdeviceptr *dptr, size_t bytesize, CUstream h) {
  fc_stream_t *s;
  CUresult rc = fc_stream_get(h, &s);
  if (rc != CUDA_SUCCESS) return rc;
  if (!dptr) return CUDA_ERROR_INVALID_VALUE;
  struct fc_capture *cap;
  if ((rc = fc_capture_submit(s, &cap)) != CUDA_SUCCESS) return rc;
  if (cap) return fc_capture_alloc(cap, s->ctx->dev, bytesize, dptr);
  fc_pool_t *p = fc_default_pool(s->ctx->dev);
  if (!p) return CUDA_ERROR_OUT_OF_MEMORY;
  return fc_pool_alloc(p, s->ctx, bytesize, dptr);
}
FC_EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream) {
  FC_LOCKED(fc_mem_alloc_async(dptr, bytesize, hStream));
}
FC_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream) {
  FC_LOCKED(fc_mem_alloc_async(dptr, bytesize, fc_ptsz(hStream)));
}

static CUresult fc_mem_alloc_from_pool(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream h) {
  fc_stream_t *s;
  CUresult rc = fc_stream_get(h, &s);
  if (rc != CUDA_SUCCESS) return rc;
  fc_pool_t *p = fc_pool_find(pool);
  if (!dptr || !p) return CUDA_ERROR_INVALID_VALUE;
  struct fc_capture *cap;
  if ((rc = fc_capture_submit(s, &cap)) != CUDA_SUCCESS) return rc;
  if (cap) return fc_capture_alloc(cap, p->dev, bytesize, dptr);
  return fc_pool_alloc(p, s->ctx, bytesize, dptr);
}
FC_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream) {
  FC_LOCKED(fc_mem_alloc_from_pool(dptr, bytesize, pool, hStream));
}
FC_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                                CUstream hStream) {
  FC_LOCKED(fc_mem_alloc_from_pool(dptr, bytesize, pool, fc_ptsz(hStream)));
}

/* Frees any freeable pointer: one from a pool, one from cuMemAlloc ("the
 * real driver allows it": the H100 returned all 64 MiB after the
 * synchronize), one from a graph's allocation node. 0 is accepted. */
static CUresult fc_mem_free_async(CUdeviceptr dptr, CUstream h) {
  fc_stream_t *s;
  CUresult rc = fc_stream_get(h, &s);
  if (rc != CUDA_SUCCESS) return rc;
  if (dptr == 0) return CUDA_SUCCESS;
  struct fc_capture *cap;
  if ((rc = fc_capture_submit(s, &cap)) != CUDA_SUCCESS) return rc;
  if (cap) return fc_capture_free(cap, dptr);
  fc_alloc_t *a = fc_alloc_at((uintptr_t)dptr);
  if (!a || a->kind == FC_A_HOST || a->kind == FC_A_VMM) return CUDA_ERROR_INVALID_VALUE;
  if (a->kind == FC_A_POOL) a->pool->used_attr -= a->charged < a->pool->used_attr ? a->charged : a->pool->used_attr;
  return fc_alloc_free(a);
}
FC_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream) { FC_LOCKED(fc_mem_free_async(dptr, hStream)); }
FC_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream) {
  FC_LOCKED(fc_mem_free_async(dptr, fc_ptsz(hStream)));
}

/* Device-level: no current context needed (the H100). */
static CUresult fc_default_mem_pool(CUmemoryPool *pool_out, CUdevice dev) {
  if (!pool_out) return CUDA_ERROR_INVALID_VALUE;
  int phys = fc_dev_phys(dev);
  if (phys < 0) return CUDA_ERROR_INVALID_DEVICE;
  fc_pool_t *p = fc_default_pool(phys);
  if (!p) return CUDA_ERROR_OUT_OF_MEMORY;
  *pool_out = (CUmemoryPool)p;
  return CUDA_SUCCESS;
}
FC_EXPORT CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool_out, CUdevice dev) {
  FC_LOCKED(fc_default_mem_pool(pool_out, dev));
}

/* The device's current pool: the fake has no cuDeviceSetMemPool, so it is
 * always the default one. */
FC_EXPORT CUresult cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev) { FC_LOCKED(fc_default_mem_pool(pool, dev)); }

static CUresult fc_pool_create(CUmemoryPool *pool, const CUmemPoolProps *props) {
  if (!pool || !props) return CUDA_ERROR_INVALID_VALUE;
  /* "allocType: currently must be CU_MEM_ALLOCATION_TYPE_PINNED"; only
   * device-located pools are modelled; a bad ordinal is INVALID_VALUE here
   * (the H100), not INVALID_DEVICE; location.id is a CUDA ordinal */
  int phys = fc_dev_phys(props->location.id);
  if (props->allocType != CU_MEM_ALLOCATION_TYPE_PINNED || props->location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
      phys < 0)
    return CUDA_ERROR_INVALID_VALUE;
  fc_pool_t *p = fc_pool_new(phys, false);
  if (!p) return CUDA_ERROR_OUT_OF_MEMORY;
  *pool = (CUmemoryPool)p;
  return CUDA_SUCCESS;
}
FC_EXPORT CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *poolProps) {
  FC_LOCKED(fc_pool_create(pool, poolProps));
}

static CUresult fc_pool_destroy(CUmemoryPool pool) {
  fc_pool_t *p = fc_pool_find(pool);
  /* a device's default pool cannot be destroyed (the H100: INVALID_VALUE) */
  if (!p || p->is_default) return CUDA_ERROR_INVALID_VALUE;
  if (p->live == 0) {
    fc_pool_free(p);
  } else {
    p->destroyed = true; /* gone for callers; lives until its last free */
    fc_pool_shrink(p, 0);
  }
  return CUDA_SUCCESS;
}
FC_EXPORT CUresult cuMemPoolDestroy(CUmemoryPool pool) { FC_LOCKED(fc_pool_destroy(pool)); }

static CUresult fc_pool_trim(CUmemoryPool pool, size_t minBytesToKeep) {
  fc_pool_t *p = fc_pool_find(pool);
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  fc_pool_shrink(p, minBytesToKeep);
  return CUDA_SUCCESS;
}
FC_EXPORT CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep) {
  FC_LOCKED(fc_pool_trim(pool, minBytesToKeep));
}

static CUresult fc_pool_set(CUmemoryPool pool, CUmemPool_attribute attr, void *value) {
  fc_pool_t *p = fc_pool_find(pool);
  if (!p || !value) return CUDA_ERROR_INVALID_VALUE;
  switch (attr) {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
      p->reuse[attr - CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES] = *(int *)value != 0;
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: p->threshold = *(cuuint64_t *)value; return CUDA_SUCCESS;
    /* "High watermark can only be reset to zero" */
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
      if (*(cuuint64_t *)value != 0) return CUDA_ERROR_INVALID_VALUE;
      p->reserved_high = p->reserved;
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
      if (*(cuuint64_t *)value != 0) return CUDA_ERROR_INVALID_VALUE;
      p->used_high = p->used;
      return CUDA_SUCCESS;
    default: return CUDA_ERROR_INVALID_VALUE; /* the current amounts are read-only (the H100) */
  }
}
FC_EXPORT CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value) {
  FC_LOCKED(fc_pool_set(pool, attr, value));
}

static CUresult fc_pool_get(CUmemoryPool pool, CUmemPool_attribute attr, void *value) {
  fc_pool_t *p = fc_pool_find(pool);
  if (!p || !value) return CUDA_ERROR_INVALID_VALUE;
  switch (attr) {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
      *(int *)value = p->reuse[attr - CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES];
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: *(cuuint64_t *)value = p->threshold; return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT: *(cuuint64_t *)value = p->reserved; return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH: *(cuuint64_t *)value = p->reserved_high; return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_USED_MEM_CURRENT: *(cuuint64_t *)value = p->used_attr; return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH: *(cuuint64_t *)value = p->used_high; return CUDA_SUCCESS;
    default: return CUDA_ERROR_INVALID_VALUE;
  }
}
FC_EXPORT CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value) {
  FC_LOCKED(fc_pool_get(pool, attr, value));
}
