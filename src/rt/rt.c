/* rt.c: libtessera-rt's top level: options, create and destroy, the
 * tensor helpers, stats and memory. The host side's other jobs are in
 * names.c, validate.c, place.c, submit.c, ring.c, tickets.c and
 * jit_slots.c (rt/internal.h says how they meet). */
#include <stdlib.h>
#include <string.h>

#include "rt/internal.h"

size_t tsr_rt_descriptor_bytes(void) { return TSR_RT_DESC_BYTES; }

void tsr_rt_tensor_contiguous(tsr_rt_tensor_t *t, void *data, tsr_rt_dtype_t dtype, uint32_t ndim,
                              const int64_t *sizes) {
  memset(t, 0, sizeof(*t));
  t->data = data;
  t->dtype = dtype;
  t->ndim = ndim > TSR_RT_MAX_DIMS ? TSR_RT_MAX_DIMS : ndim;
  uint64_t s = 1; /* unsigned: huge sizes wrap (the runtime refuses them), never overflow */
  for (int d = (int)t->ndim - 1; d >= 0; d--) {
    t->sizes[d] = sizes[d];
    t->strides[d] = (int64_t)s;
    s *= sizes[d] > 0 ? (uint64_t)sizes[d] : 1;
  }
}

uint64_t tsr_rt_tensor_numel(const tsr_rt_tensor_t *t) {
  return tsr_rt_numel(t->sizes, t->ndim < TSR_RT_MAX_DIMS ? t->ndim : TSR_RT_MAX_DIMS);
}

/* ---- create and destroy -------------------------------------------------- */

tsr_status_t tsr_rt_create(const tsr_rt_options_t *options, tsr_rt_t **out) {
  *out = NULL;
  tsr_rt_options_t o = options ? *options : (tsr_rt_options_t){0};
  if (!o.backend) o.backend = TSR_RT_BACKEND_CUDA;
  if (o.backend != TSR_RT_BACKEND_CUDA && o.backend != TSR_RT_BACKEND_CPU)
    return tsr_status_make(TSR_INVALID_ARGUMENT, "unknown backend %d", (int)o.backend);
  if (!o.lane_slots) o.lane_slots = 256;
  if (o.lane_slots < 2 || o.lane_slots > 65536 || (o.lane_slots & (o.lane_slots - 1)))
    return tsr_status_make(TSR_INVALID_ARGUMENT, "lane_slots %u: a power of two from 2 to 65536", o.lane_slots);
  if (!o.threads) o.threads = 256;
  if (o.threads % 32 || o.threads > 1024)
    return tsr_status_make(TSR_INVALID_ARGUMENT, "threads %u: a multiple of 32 up to 1024", o.threads);
  if (o.lanes > 4096) return tsr_status_make(TSR_INVALID_ARGUMENT, "lanes %u: at most 4096", o.lanes);
  if (!o.idle_us) o.idle_us = 200;
  if (o.idle_us > 10000000)
    return tsr_status_make(TSR_INVALID_ARGUMENT, "idle_us %u: at most 10,000,000 (10 s)", o.idle_us);
  tsr_rt_t *rt = calloc(1, sizeof(*rt));
  if (!rt) return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory");
  rt->opt = o;
  rt->be = o.backend == TSR_RT_BACKEND_CPU ? &tsr_rt_cpu : &tsr_rt_cuda;
  /* the backend fixes the lanes (one per SM on a GPU) and allocates the rings */
  tsr_status_t st = rt->be->start(rt);
  if (st) {
    free(rt);
    return st;
  }
  uint32_t lanes = rt->opt.lanes;
  rt->tail = calloc(lanes, sizeof(*rt->tail));
  rt->seen = calloc(lanes, sizeof(*rt->seen));
  rt->seen_epoch = calloc(lanes, sizeof(*rt->seen_epoch));
  rt->posted_n = calloc(lanes, sizeof(*rt->posted_n));
  rt->run = calloc(lanes, sizeof(*rt->run));
  rt->tmap_size = (uint64_t)lanes * rt->opt.lane_slots * 2;
  rt->tmap = calloc(rt->tmap_size, sizeof(*rt->tmap));
  rt->shape = calloc(1, sizeof(*rt->shape));
  if (!rt->tail || !rt->tmap || !rt->seen || !rt->seen_epoch || !rt->posted_n || !rt->run || !rt->shape)
    st = tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory");
  if (!st) st = tsr_rt_deps_create(lanes * rt->opt.lane_slots * 6 + 1024, &rt->deps);
  if (st) {
    tsr_status_free(tsr_rt_destroy(rt));
    return st;
  }
  *out = rt;
  return NULL;
}

tsr_status_t tsr_rt_destroy(tsr_rt_t *rt) {
  if (!rt) return NULL;
  tsr_status_t first = NULL;
  if (rt->desc) {
    /* every task submitted runs to the end, then a STOP in every lane */
    if (rt->tail) first = tsr_rt_flush(rt);
    if (!first) {
      for (uint32_t lane = 0; lane < rt->opt.lanes; lane++) {
        uint64_t n = (rt->tail ? rt->tail[lane] : 0) + 1;
        tsr_rt_desc_t *d = &rt->desc[(size_t)lane * rt->opt.lane_slots + ((n - 1) & (rt->opt.lane_slots - 1))];
        memset(d, 0, sizeof(*d));
        d->seq = n;
        d->flags = TSR_RT_DESC_STOP;
        tsr__rt_post(rt, lane, n);
      }
      tsr_rt_ring(rt);
    }
  }
  tsr_status_t st = rt->be->stop(rt);
  if (!first)
    first = st;
  else
    tsr_status_free(st);
  for (uint32_t i = 0; i < TSR_RT_JIT_OPS; i++) {
    tsr_rt_expr_free(rt->slots[i].expr);
    free(rt->slots[i].retired_at);
  }
  tsr_rt_deps_free(rt->deps);
  free(rt->tail);
  free(rt->seen);
  free(rt->seen_epoch);
  free(rt->posted_n);
  free(rt->run);
  free(rt->shape);
  free(rt->tmap);
  free(rt);
  return first;
}

void tsr_rt_stats(tsr_rt_t *rt, tsr_rt_stats_t *out) {
  *out = rt->stats;
  out->lanes = rt->opt.lanes;
  out->lane_slots = rt->opt.lane_slots;
  out->threads = rt->opt.threads;
  uint64_t c = 0;
  for (uint32_t lane = 0; lane < rt->opt.lanes; lane++) c += tsr__rt_done(rt, lane);
  out->completed = c;
  if (rt->be->device_stats) rt->be->device_stats(rt, out);
}

tsr_status_t tsr_rt_alloc(tsr_rt_t *rt, size_t bytes, void **out_ptr) {
  *out_ptr = NULL;
  if (!bytes) return tsr_status_make(TSR_INVALID_ARGUMENT, "an allocation of 0 bytes");
  return rt->be->alloc(rt, bytes, out_ptr);
}
void tsr_rt_free(tsr_rt_t *rt, void *ptr) {
  if (ptr) rt->be->free(rt, ptr);
}
tsr_status_t tsr_rt_upload(tsr_rt_t *rt, void *dst, const void *src, size_t bytes) {
  return rt->be->copy(rt, dst, src, bytes, true);
}
tsr_status_t tsr_rt_download(tsr_rt_t *rt, void *dst, const void *src, size_t bytes) {
  return rt->be->copy(rt, dst, src, bytes, false);
}
