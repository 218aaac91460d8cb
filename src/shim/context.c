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
 * A context's end also frees what was made in it: the H100 gave back 587
 * MiB for a context holding a 64 MiB allocation, and a reset primary
 * context everything it held. So each context has an id (never reused in
 * a process), every allocation, array and module is recorded with the id
 * of the context current when it was made (account.c), and the end takes
 * every record of that id out of the map and credits it, so the lease is
 * whole again and a free that comes after credits nothing. The driver's
 * call, the end of the account and that walk happen under one mutex, and a
 * free the driver refused is recorded again under it too
 * (tsr_shim_context_keep), so a free racing the end is credited exactly
 * once. Not a context's, by the driver's rules: VMM handles (cuMemCreate)
 * and memory pools, which belong to the device and outlive any context
 * (their records carry no context), libraries (loaded into every context),
 * and graph memory. Stream-ordered blocks are freed with their context and
 * go back to their pool; the pools' accounts are then brought to what the
 * driver says they reserve.
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
#include <stdatomic.h>
#include <string.h>

#include "shim/shim.h"

#define TSR_EXPORT __attribute__((visibility("default")))
#define TSR__CONTEXTS 256
#define TSR__LIMITS 3 /* stack, printf FIFO, malloc heap: CU_LIMIT_ 0..2 */

typedef struct {
  CUcontext ctx;
  uint32_t id; /* what its allocations' records name (never 0, never reused) */
  CUdevice dev;
  int lease;
  bool primary;
  int refs;                     /* primary: retains not yet released */
  uint64_t excess[TSR__LIMITS]; /* charged for each limit beyond its default */
} tsr__ctx_t;

static pthread_mutex_t tsr__mu = PTHREAD_MUTEX_INITIALIZER;
static tsr__ctx_t tsr__ctxs[TSR__CONTEXTS];
static size_t tsr__nctxs;
static uint32_t tsr__last_id; /* under tsr__mu */
/* Bumped (under tsr__mu) whenever a context is added or removed: a thread's
 * cached answer of tsr_shim_context_current is good while it stands. */
static _Atomic uint32_t tsr__epoch;

/* The calling thread's last answer: its current context handle and its id. */
static _Thread_local struct {
  CUcontext ctx;
  uint32_t id, epoch;
  bool valid;
} tsr__cur;

static void tsr__contexts_after_fork(void) {
  pthread_mutex_init(&tsr__mu, NULL);
  tsr__nctxs = 0;
  atomic_fetch_add_explicit(&tsr__epoch, 1, memory_order_release);
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

static tsr__ctx_t *tsr__find_id(uint32_t id) {
  for (size_t i = 0; i < tsr__nctxs; i++)
    if (tsr__ctxs[i].id == id) return &tsr__ctxs[i];
  return NULL;
}

static tsr__ctx_t *tsr__add(CUcontext ctx, CUdevice dev, int lease, bool primary) {
  if (tsr__nctxs == TSR__CONTEXTS) return NULL;
  tsr__ctx_t *c = &tsr__ctxs[tsr__nctxs++];
  memset(c, 0, sizeof(*c));
  c->ctx = ctx;
  if (++tsr__last_id == 0) tsr__last_id = 1; /* 0 means "no context" */
  c->id = tsr__last_id;
  c->dev = dev;
  c->lease = lease;
  c->primary = primary;
  c->refs = 1;
  atomic_fetch_add_explicit(&tsr__epoch, 1, memory_order_release);
  return c;
}

uint32_t tsr_shim_context_current(void) {
  CUcontext ctx = NULL;
  if (!tsr_shim.tenant.governed || !tsr_real.cuCtxGetCurrent || tsr_real.cuCtxGetCurrent(&ctx) != CUDA_SUCCESS || !ctx)
    return 0;
  uint32_t epoch = atomic_load_explicit(&tsr__epoch, memory_order_acquire);
  if (tsr__cur.valid && tsr__cur.ctx == ctx && tsr__cur.epoch == epoch) return tsr__cur.id;
  pthread_mutex_lock(&tsr__mu);
  epoch = atomic_load_explicit(&tsr__epoch, memory_order_relaxed); /* changes only under tsr__mu */
  tsr__ctx_t *c = tsr__find(ctx);
  uint32_t id = c ? c->id : 0;
  pthread_mutex_unlock(&tsr__mu);
  tsr__cur.ctx = ctx;
  tsr__cur.id = id;
  tsr__cur.epoch = epoch;
  tsr__cur.valid = true;
  return id;
}

void tsr_shim_context_keep(uint64_t key, const tsr_shim_ptrmap_val_t *held) {
  if (!held->ctx) {
    tsr_shim_ptrmap_put(&tsr_shim.map, key, held);
    return;
  }
  pthread_mutex_lock(&tsr__mu);
  if (tsr__find_id(held->ctx))
    tsr_shim_ptrmap_put(&tsr_shim.map, key, held);
  else
    tsr_shim_held_end(held); /* its context ended while the free was in flight */
  pthread_mutex_unlock(&tsr__mu);
}

/* A record of the ended context: what it held is gone with it. */
static void tsr__ended(void *arg, uint64_t key, const tsr_shim_ptrmap_val_t *held) {
  if (TSR_KEY_IS_MODULE(key)) *(bool *)arg = true;
  tsr_shim_held_end(held);
}

/* Credits everything `c` holds, its allocations, arrays and modules
 * included, and forgets it; *modules is set if modules were among them. */
static void tsr__remove(tsr__ctx_t *c, bool *modules) {
  uint32_t id = c->id;
  uint64_t held = TSR_SHIM_CONTEXT_BYTES;
  for (int i = 0; i < TSR__LIMITS; i++) held += c->excess[i];
  tsr_shim_credit_exact(c->lease, held);
  *c = tsr__ctxs[--tsr__nctxs];
  atomic_fetch_add_explicit(&tsr__epoch, 1, memory_order_release);
  tsr_shim_ptrmap_take_ctx(&tsr_shim.map, id, tsr__ended, modules);
}

/* After a context's end, outside tsr__mu: its modules' function handles may
 * come back, and the pools its blocks went back to may have shrunk. */
static void tsr__after_end(bool modules) {
  if (modules) tsr_shim_launch_forget();
  tsr_shim_reconcile();
}

/* Charges a new context on `dev`; *out_lease is the lease charged (-1:
 * none). False: refuse with out-of-memory. */
static bool tsr__charge_context(CUdevice dev, int *out_lease) {
  int lease = tsr_shim_lease_of_device(dev);
  if (lease == TSR_TENANT_NO_LEASE && tsr_shim.tenant.deny) return false;
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
  tsr_shim_warn_once(TSR_WARN_TOO_MANY_CONTEXTS, "too many contexts to account for; refusing more");
  tsr_real.cuCtxDestroy_v2(*pctx);
  tsr_shim_credit_exact(lease, TSR_SHIM_CONTEXT_BYTES);
  return CUDA_ERROR_OUT_OF_MEMORY;
}

#define TSR__CREATE(real, call)                                              \
  do {                                                                       \
    tsr_shim_ready();                                                        \
    if (!tsr_real.real) return CUDA_ERROR_NOT_INITIALIZED;                   \
    if (!pctx || !tsr_shim.tenant.governed) return call;                     \
    int lease_;                                                              \
    if (!tsr__charge_context(dev, &lease_)) return CUDA_ERROR_OUT_OF_MEMORY; \
    return tsr__created(call, pctx, dev, lease_);                            \
  } while (0)

TSR_EXPORT CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev) {
  TSR__CREATE(cuCtxCreate_v2, tsr_real.cuCtxCreate_v2(pctx, flags, dev));
}

TSR_EXPORT CUresult cuCtxCreate_v3(CUcontext *pctx, void *affinity, int naffinity, unsigned int flags, CUdevice dev) {
  TSR__CREATE(cuCtxCreate_v3, tsr_real.cuCtxCreate_v3(pctx, affinity, naffinity, flags, dev));
}

TSR_EXPORT CUresult cuCtxCreate_v4(CUcontext *pctx, void *params, unsigned int flags, CUdevice dev) {
  TSR__CREATE(cuCtxCreate_v4, tsr_real.cuCtxCreate_v4(pctx, params, flags, dev));
}

/* How a driver call ends a context. */
typedef enum {
  TSR__END_DESTROY, /* cuCtxDestroy: a created context */
  TSR__END_RELEASE, /* cuDevicePrimaryCtxRelease: the primary, at its last reference */
  TSR__END_RESET,   /* cuDevicePrimaryCtxReset: the primary, whatever its references */
} tsr__end_t;

/* Whether a successful call of kind `how` ended `c` (under tsr__mu). */
static bool tsr__ends(tsr__ctx_t *c, tsr__end_t how) {
  switch (how) {
    case TSR__END_DESTROY: return !c->primary;
    case TSR__END_RELEASE: return --c->refs <= 0; /* the last release destroys it */
    case TSR__END_RESET: return true;
  }
  return false;
}

/* Calls the driver: destroy(ctx) for TSR__END_DESTROY, else primary(dev);
 * if that ended a context, ends its account. The driver's end and the
 * shim's happen under tsr__mu, so that a free racing them is credited
 * once (tsr_shim_context_keep). */
static CUresult tsr__end(tsr__end_t how, CUresult (*destroy)(CUcontext), CUcontext ctx, CUresult (*primary)(CUdevice),
                         CUdevice dev) {
  bool by_handle = how == TSR__END_DESTROY;
  if (!tsr_shim.tenant.governed) return by_handle ? destroy(ctx) : primary(dev);
  bool modules = false, ended = false;
  pthread_mutex_lock(&tsr__mu);
  CUresult rc = by_handle ? destroy(ctx) : primary(dev);
  tsr__ctx_t *c = rc != CUDA_SUCCESS ? NULL : by_handle ? tsr__find(ctx) : tsr__primary(dev);
  if (c && tsr__ends(c, how)) {
    tsr__remove(c, &modules);
    ended = true;
  }
  pthread_mutex_unlock(&tsr__mu);
  if (ended) tsr__after_end(modules);
  return rc;
}

TSR_EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx) {
  tsr_shim_ready();
  if (!tsr_real.cuCtxDestroy_v2) return CUDA_ERROR_NOT_INITIALIZED;
  return tsr__end(TSR__END_DESTROY, tsr_real.cuCtxDestroy_v2, ctx, NULL, 0);
}

TSR_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev) {
  tsr_shim_ready();
  if (!tsr_real.cuDevicePrimaryCtxRetain) return CUDA_ERROR_NOT_INITIALIZED;
  if (!pctx || !tsr_shim.tenant.governed) return tsr_real.cuDevicePrimaryCtxRetain(pctx, dev);
  pthread_mutex_lock(&tsr__mu);
  CUresult rc;
  tsr__ctx_t *c = tsr__primary(dev);
  if (c) { /* already charged: one more reference */
    rc = tsr_real.cuDevicePrimaryCtxRetain(pctx, dev);
    if (rc == CUDA_SUCCESS) c->refs++;
  } else {
    int lease;
    if (!tsr__charge_context(dev, &lease)) {
      rc = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
      rc = tsr_real.cuDevicePrimaryCtxRetain(pctx, dev);
      if (rc != CUDA_SUCCESS) {
        tsr_shim_credit_exact(lease, TSR_SHIM_CONTEXT_BYTES);
      } else if (lease >= 0 && !tsr__add(*pctx, dev, lease, true)) {
        tsr_shim_warn_once(TSR_WARN_TOO_MANY_CONTEXTS, "too many contexts to account for; refusing more");
        tsr_real.cuDevicePrimaryCtxRelease_v2(dev);
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
  if (!tsr_real.cuDevicePrimaryCtxRelease_v2) return CUDA_ERROR_NOT_INITIALIZED;
  return tsr__end(TSR__END_RELEASE, NULL, NULL, tsr_real.cuDevicePrimaryCtxRelease_v2, dev);
}

TSR_EXPORT CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev) {
  tsr_shim_ready();
  if (!tsr_real.cuDevicePrimaryCtxReset_v2) return CUDA_ERROR_NOT_INITIALIZED;
  return tsr__end(TSR__END_RESET, NULL, NULL, tsr_real.cuDevicePrimaryCtxReset_v2, dev);
}

/* What `limit` at `value` reserves beyond the default the context charge
 * covers, on the device of `c`. */
static uint64_t tsr__excess(const tsr__ctx_t *c, CUlimit limit, uint64_t value) {
  switch (limit) {
    case CU_LIMIT_STACK_SIZE: {
      int sms = 0, threads = 0;
      if (!tsr_real.cuDeviceGetAttribute ||
          tsr_real.cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, c->dev) != CUDA_SUCCESS ||
          tsr_real.cuDeviceGetAttribute(&threads, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, c->dev) !=
              CUDA_SUCCESS ||
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
  if (!tsr_real.cuCtxSetLimit) return CUDA_ERROR_NOT_INITIALIZED;
  CUcontext ctx = NULL;
  if (!tsr_shim.tenant.governed || limit < 0 || limit >= TSR__LIMITS || !tsr_real.cuCtxGetCurrent ||
      tsr_real.cuCtxGetCurrent(&ctx) != CUDA_SUCCESS || !ctx)
    return tsr_real.cuCtxSetLimit(limit, value);
  pthread_mutex_lock(&tsr__mu);
  tsr__ctx_t *c = tsr__find(ctx);
  if (!c) {
    pthread_mutex_unlock(&tsr__mu);
    return tsr_real.cuCtxSetLimit(limit, value);
  }
  uint64_t old = c->excess[limit], want = tsr_shim_round(tsr__excess(c, limit, value));
  if (want > old && (want == UINT64_MAX || !tsr_shim_charge_exact(c->lease, want - old))) {
    pthread_mutex_unlock(&tsr__mu);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  uint64_t held = want > old ? want : old; /* charged now */
  CUresult rc = tsr_real.cuCtxSetLimit(limit, value);
  uint64_t now = old; /* what the context reserves after the call */
  if (rc == CUDA_SUCCESS) {
    size_t got = value;
    if (tsr_real.cuCtxGetLimit) tsr_real.cuCtxGetLimit(&got, limit);
    now = tsr_shim_round(tsr__excess(c, limit, got));
  }
  if (now < held) {
    tsr_shim_credit_exact(c->lease, held - now);
  } else if (now > held && !tsr_shim_charge_exact(c->lease, now - held)) {
    tsr_shim_warn_once(TSR_WARN_LIMIT_OVER, "a context limit reserved more than the lease has left");
    now = held;
  }
  c->excess[limit] = now;
  pthread_mutex_unlock(&tsr__mu);
  return rc;
}

const tsr_shim_family_t tsr_shim_family_contexts = {.after_fork = tsr__contexts_after_fork, .reconcile = NULL};
