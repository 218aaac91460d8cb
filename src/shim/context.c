/* context.c: contexts and the memory their limits reserve.
 *
 * A CUDA context takes device memory before any allocation: 523 MiB on the
 * H100 with driver 580 (its default per-thread stack, malloc heap and
 * printf FIFO included), and a process may create many. Each context is
 * charged TSR_SHIM_CONTEXT_BYTES when it is created (cuCtxCreate, or the
 * first retain of a device's primary context, which the CUDA runtime
 * uses) and credited when it is destroyed (cuCtxDestroy, the last release
 * or a reset of the primary context). A context the lease cannot take is
 * refused with out-of-memory.
 *
 * Limits reserve memory beyond the defaults the context charge includes:
 *   CU_LIMIT_STACK_SIZE        per thread, for every thread the device can
 *                              hold at once: (size - 1024) x SMs x threads
 *                              per SM (64 KiB took 16.5 GiB on the H100);
 *   CU_LIMIT_MALLOC_HEAP_SIZE  size - 8 MiB;
 *   CU_LIMIT_PRINTF_FIFO_SIZE  size - 8.25 MiB.
 * cuCtxSetLimit charges the growth before the driver is asked (out of
 * memory if the lease cannot take it), settles on the value the driver
 * then reports (it rounds), and credits a shrink. The driver can also grow
 * the stack by itself when a kernel needs more; the daemon's backstop sees
 * that. */
#include <pthread.h>
#include <string.h>

#include "shim/shim.h"

#define TSR_EXPORT __attribute__((visibility("default")))
#define TSR__CONTEXTS 256
#define TSR__LIMITS 3 /* stack, printf FIFO, malloc heap: CU_LIMIT_ 0..2 */

typedef struct {
  CUcontext ctx;
  CUdevice dev;
  int lease;
  bool primary;
  int refs;                       /* primary: retains not yet released */
  uint64_t excess[TSR__LIMITS];   /* charged for each limit beyond its default */
} tsr__ctx_t;

static pthread_mutex_t tsr__mu = PTHREAD_MUTEX_INITIALIZER;
static tsr__ctx_t tsr__ctxs[TSR__CONTEXTS];
static size_t tsr__nctxs;

void tsr_shim_contexts_reset(void) {
  pthread_mutex_init(&tsr__mu, NULL);
  tsr__nctxs = 0;
}

static tsr__ctx_t *tsr__find(CUcontext ctx) {
  for (size_t i = 0; i < tsr__nctxs; i++)
    if (tsr__ctxs[i].ctx == ctx) return &tsr__ctxs[i];
  return NULL;
}

static tsr__ctx_t *tsr__primary(CUdevice dev) {
  for (size_t i = 0; i < tsr__nctxs; i++)
    if (tsr__ctxs[i].primary && tsr__ctxs[i].dev == dev) return &tsr__ctxs[i];
  return NULL;
}

static tsr__ctx_t *tsr__add(CUcontext ctx, CUdevice dev, int lease, bool primary) {
  if (tsr__nctxs == TSR__CONTEXTS) return NULL;
  tsr__ctx_t *c = &tsr__ctxs[tsr__nctxs++];
  memset(c, 0, sizeof(*c));
  c->ctx = ctx;
  c->dev = dev;
  c->lease = lease;
  c->primary = primary;
  c->refs = 1;
  return c;
}

/* Credits everything `c` holds and forgets it. */
static void tsr__remove(tsr__ctx_t *c) {
  uint64_t held = TSR_SHIM_CONTEXT_BYTES;
  for (int i = 0; i < TSR__LIMITS; i++) held += c->excess[i];
  tsr_shim_credit_exact(c->lease, held);
  *c = tsr__ctxs[--tsr__nctxs];
}

/* Charges a new context on `dev`; *out_lease is the lease charged (-1:
 * none). False: refuse with out-of-memory. */
static bool tsr__charge_context(CUdevice dev, int *out_lease) {
  int lease = tsr_shim_lease_of_device(dev);
  if (lease == -1 && tsr__shim.tenant.deny) return false;
  if (lease < 0) {
    *out_lease = -1;
    return true;
  }
  if (!tsr_shim_charge_exact(lease, TSR_SHIM_CONTEXT_BYTES)) {
    tsr_shim_reconcile();
    if (!tsr_shim_charge_exact(lease, TSR_SHIM_CONTEXT_BYTES)) return false;
  }
  *out_lease = lease;
  return true;
}

/* After a context was made: remember it (or, with no room, undo it). */
static CUresult tsr__created(CUresult rc, CUcontext *pctx, CUdevice dev, int lease) {
  if (rc != CUDA_SUCCESS) {
    tsr_shim_credit_exact(lease, TSR_SHIM_CONTEXT_BYTES);
    return rc;
  }
  if (lease < 0) return rc;
  pthread_mutex_lock(&tsr__mu);
  tsr__ctx_t *c = tsr__add(*pctx, dev, lease, false);
  pthread_mutex_unlock(&tsr__mu);
  if (c) return rc;
  tsr_shim_warn_once(24, "too many contexts to account for; refusing more");
  tsr__real.cuCtxDestroy_v2(*pctx);
  tsr_shim_credit_exact(lease, TSR_SHIM_CONTEXT_BYTES);
  return CUDA_ERROR_OUT_OF_MEMORY;
}

#define TSR__CREATE(real, call)                                              \
  do {                                                                       \
    tsr_shim_ready();                                                        \
    if (!tsr__real.real) return CUDA_ERROR_NOT_INITIALIZED;                  \
    if (!pctx || !tsr__shim.tenant.governed) return call;                           \
    int lease_;                                                              \
    if (!tsr__charge_context(dev, &lease_)) return CUDA_ERROR_OUT_OF_MEMORY; \
    return tsr__created(call, pctx, dev, lease_);                            \
  } while (0)

TSR_EXPORT CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev) {
  TSR__CREATE(cuCtxCreate_v2, tsr__real.cuCtxCreate_v2(pctx, flags, dev));
}

TSR_EXPORT CUresult cuCtxCreate_v3(CUcontext *pctx, void *affinity, int naffinity, unsigned int flags,
                                   CUdevice dev) {
  TSR__CREATE(cuCtxCreate_v3, tsr__real.cuCtxCreate_v3(pctx, affinity, naffinity, flags, dev));
}

TSR_EXPORT CUresult cuCtxCreate_v4(CUcontext *pctx, void *params, unsigned int flags, CUdevice dev) {
  TSR__CREATE(cuCtxCreate_v4, tsr__real.cuCtxCreate_v4(pctx, params, flags, dev));
}

TSR_EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx) {
  tsr_shim_ready();
  if (!tsr__real.cuCtxDestroy_v2) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult rc = tsr__real.cuCtxDestroy_v2(ctx);
  if (rc != CUDA_SUCCESS || !tsr__shim.tenant.governed) return rc;
  pthread_mutex_lock(&tsr__mu);
  tsr__ctx_t *c = tsr__find(ctx);
  if (c && !c->primary) tsr__remove(c);
  pthread_mutex_unlock(&tsr__mu);
  return rc;
}

TSR_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev) {
  tsr_shim_ready();
  if (!tsr__real.cuDevicePrimaryCtxRetain) return CUDA_ERROR_NOT_INITIALIZED;
  if (!pctx || !tsr__shim.tenant.governed) return tsr__real.cuDevicePrimaryCtxRetain(pctx, dev);
  pthread_mutex_lock(&tsr__mu);
  CUresult rc;
  tsr__ctx_t *c = tsr__primary(dev);
  if (c) { /* already charged: one more reference */
    rc = tsr__real.cuDevicePrimaryCtxRetain(pctx, dev);
    if (rc == CUDA_SUCCESS) c->refs++;
  } else {
    int lease;
    if (!tsr__charge_context(dev, &lease)) {
      rc = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
      rc = tsr__real.cuDevicePrimaryCtxRetain(pctx, dev);
      if (rc != CUDA_SUCCESS) {
        tsr_shim_credit_exact(lease, TSR_SHIM_CONTEXT_BYTES);
      } else if (lease >= 0 && !tsr__add(*pctx, dev, lease, true)) {
        tsr_shim_warn_once(24, "too many contexts to account for; refusing more");
        tsr__real.cuDevicePrimaryCtxRelease_v2(dev);
        tsr_shim_credit_exact(lease, TSR_SHIM_CONTEXT_BYTES);
        rc = CUDA_ERROR_OUT_OF_MEMORY;
      }
    }
  }
  pthread_mutex_unlock(&tsr__mu);
  return rc;
}

TSR_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  tsr_shim_ready();
  if (!tsr__real.cuDevicePrimaryCtxRelease_v2) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult rc = tsr__real.cuDevicePrimaryCtxRelease_v2(dev);
  if (rc != CUDA_SUCCESS || !tsr__shim.tenant.governed) return rc;
  pthread_mutex_lock(&tsr__mu);
  tsr__ctx_t *c = tsr__primary(dev);
  if (c && --c->refs <= 0) tsr__remove(c); /* the last release destroys it */
  pthread_mutex_unlock(&tsr__mu);
  return rc;
}

TSR_EXPORT CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev) {
  tsr_shim_ready();
  if (!tsr__real.cuDevicePrimaryCtxReset_v2) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult rc = tsr__real.cuDevicePrimaryCtxReset_v2(dev);
  if (rc != CUDA_SUCCESS || !tsr__shim.tenant.governed) return rc;
  pthread_mutex_lock(&tsr__mu);
  tsr__ctx_t *c = tsr__primary(dev);
  if (c) tsr__remove(c);
  pthread_mutex_unlock(&tsr__mu);
  return rc;
}

/* What `limit` at `value` reserves beyond the default the context charge
 * covers, on the device of `c`. */
static uint64_t tsr__excess(const tsr__ctx_t *c, CUlimit limit, uint64_t value) {
  switch (limit) {
    case CU_LIMIT_STACK_SIZE: {
      int sms = 0, threads = 0;
      if (!tsr__real.cuDeviceGetAttribute ||
          tsr__real.cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, c->dev) != CUDA_SUCCESS ||
          tsr__real.cuDeviceGetAttribute(&threads, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, c->dev) != CUDA_SUCCESS ||
          sms <= 0 || threads <= 0) {
        sms = 256; /* unknown device: more than any has */
        threads = 2048;
      }
      uint64_t per = (value + 15) / 16 * 16;
      if (per <= 1024) return 0;
      uint64_t n = (uint64_t)sms * (uint64_t)threads;
      return per - 1024 > UINT64_MAX / n ? UINT64_MAX : (per - 1024) * n;
    }
    case CU_LIMIT_PRINTF_FIFO_SIZE: return value > 8650752 ? value - 8650752 : 0;
    case CU_LIMIT_MALLOC_HEAP_SIZE: return value > (8u << 20) ? value - (8u << 20) : 0;
    default: return 0;
  }
}

TSR_EXPORT CUresult cuCtxSetLimit(CUlimit limit, size_t value) {
  tsr_shim_ready();
  if (!tsr__real.cuCtxSetLimit) return CUDA_ERROR_NOT_INITIALIZED;
  CUcontext ctx = NULL;
  if (!tsr__shim.tenant.governed || limit < 0 || limit >= TSR__LIMITS || !tsr__real.cuCtxGetCurrent ||
      tsr__real.cuCtxGetCurrent(&ctx) != CUDA_SUCCESS || !ctx)
    return tsr__real.cuCtxSetLimit(limit, value);
  pthread_mutex_lock(&tsr__mu);
  tsr__ctx_t *c = tsr__find(ctx);
  if (!c) {
    pthread_mutex_unlock(&tsr__mu);
    return tsr__real.cuCtxSetLimit(limit, value);
  }
  uint64_t old = c->excess[limit], want = tsr_shim_round(tsr__excess(c, limit, value));
  if (want > old && (want == UINT64_MAX || !tsr_shim_charge_exact(c->lease, want - old))) {
    pthread_mutex_unlock(&tsr__mu);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  uint64_t held = want > old ? want : old; /* charged now */
  CUresult rc = tsr__real.cuCtxSetLimit(limit, value);
  uint64_t now = old; /* what the context reserves after the call */
  if (rc == CUDA_SUCCESS) {
    size_t got = value;
    if (tsr__real.cuCtxGetLimit) tsr__real.cuCtxGetLimit(&got, limit);
    now = tsr_shim_round(tsr__excess(c, limit, got));
  }
  if (now < held) {
    tsr_shim_credit_exact(c->lease, held - now);
  } else if (now > held && !tsr_shim_charge_exact(c->lease, now - held)) {
    tsr_shim_warn_once(25, "a context limit reserved more than the lease has left");
    now = held;
  }
  c->excess[limit] = now;
  pthread_mutex_unlock(&tsr__mu);
  return rc;
}
