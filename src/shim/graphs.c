/* graphs.c: graph memory: allocation nodes (cuGraphAddMemAllocNode, and
 * the nodes stream capture makes of cuMemAllocAsync) and the device's graph
 * memory cache behind them.
 *
 * An allocation node takes no memory when it is added; a launch takes its
 * bytes from the device's graph memory cache, which grows as needed and
 * keeps freed bytes until cuDeviceGraphMemTrim. So, as with pools, a
 * device's graph memory is charged what the driver says the cache reserves
 * (CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT), one account per device:
 *   - adding an allocation node larger than the lease has left is refused
 *     at once with out-of-memory; the node's bytes are added to what its
 *     graph needs;
 *   - an instantiated graph needs the sum of its graph's allocation nodes;
 *   - a launch of a graph that needs memory first charges what the cache
 *     would have to grow by (used + need - reserved) and is refused with
 *     out-of-memory, before the driver is asked, if the lease cannot take
 *     it; after the launch the account is set to what the cache reserves;
 *   - a trim, a refusal anywhere (account.c) and the memory queries bring
 *     the accounts down to the cache's size again.
 * A graph whose allocation nodes the shim did not see being added (captured
 * from a stream, cloned) launches unchecked; its memory is charged when the
 * account is next settled, and what the lease could not take then is the
 * daemon's backstop's to see. */
#include <pthread.h>

#include "shim/shim.h"

#define TSR_EXPORT __attribute__((visibility("default")))
#define TSR__TRACKED 1024 /* graphs and instantiations with allocation nodes */
#define TSR__DEVICES 64

typedef struct {
  const void *key; /* a CUgraph or a CUgraphExec */
  uint64_t bytes;  /* what its allocation nodes need */
} tsr__need_t;

typedef struct {
  bool used;
  int lease;
  uint64_t charged;
} tsr__cache_t;

static pthread_mutex_t tsr__mu = PTHREAD_MUTEX_INITIALIZER;
static tsr__need_t tsr__graphs[TSR__TRACKED], tsr__execs[TSR__TRACKED];
static size_t tsr__ngraphs, tsr__nexecs;
static tsr__cache_t tsr__caches[TSR__DEVICES];

void tsr_shim_graphs_reset(void) {
  pthread_mutex_init(&tsr__mu, NULL);
  tsr__ngraphs = tsr__nexecs = 0;
  for (int i = 0; i < TSR__DEVICES; i++) tsr__caches[i].used = false;
}

static tsr__need_t *tsr__find(tsr__need_t *t, size_t n, const void *key) {
  for (size_t i = 0; i < n; i++)
    if (t[i].key == key) return &t[i];
  return NULL;
}

static uint64_t tsr__need_of(tsr__need_t *t, size_t n, const void *key) {
  tsr__need_t *e = tsr__find(t, n, key);
  return e ? e->bytes : 0;
}

/* Adds `bytes` to `key`'s need (a new entry if there is room). Counts are
 * changed under the lock, atomically: tsr__launch reads one without it. */
static void tsr__add(tsr__need_t *t, size_t *n, const void *key, uint64_t bytes) {
  tsr__need_t *e = tsr__find(t, *n, key);
  if (!e) {
    if (*n == TSR__TRACKED) return; /* untracked: settled after its launches */
    e = &t[*n];
    e->key = key;
    e->bytes = 0;
    __atomic_store_n(n, *n + 1, __ATOMIC_RELEASE);
  }
  e->bytes = bytes > UINT64_MAX - e->bytes ? UINT64_MAX : e->bytes + bytes;
}

static void tsr__drop(tsr__need_t *t, size_t *n, const void *key) {
  tsr__need_t *e = tsr__find(t, *n, key);
  if (!e) return;
  *e = t[*n - 1];
  __atomic_store_n(n, *n - 1, __ATOMIC_RELEASE);
}

static uint64_t tsr__attr(CUdevice dev, int attr) {
  cuuint64_t v = 0;
  if (!tsr__real.cuDeviceGetGraphMemAttribute ||
      tsr__real.cuDeviceGetGraphMemAttribute(dev, attr, &v) != CUDA_SUCCESS)
    return 0;
  return v;
}

/* Sets the account to what the cache reserves, and returns that. */
static uint64_t tsr__settle(CUdevice dev, tsr__cache_t *c) {
  uint64_t r = tsr__attr(dev, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT);
  if (r > c->charged) {
    if (tsr_shim_charge_exact(c->lease, r - c->charged)) c->charged = r;
    else tsr_shim_warn_once(23, "the graph memory cache holds more than the lease has left");
  } else if (r < c->charged) {
    tsr_shim_credit_exact(c->lease, c->charged - r);
    c->charged = r;
  }
  return r;
}

/* The account of device `dev`, made on first use; NULL when the device has
 * no lease. Called with the lock held. */
static tsr__cache_t *tsr__cache(CUdevice dev) {
  if (dev < 0 || dev >= TSR__DEVICES) return NULL;
  tsr__cache_t *c = &tsr__caches[dev];
  if (!c->used) {
    int lease = tsr_shim_lease_of_device(dev);
    if (lease < 0) return NULL;
    c->used = true;
    c->lease = lease;
    c->charged = 0;
  }
  return c;
}

void tsr_shim_graphs_reconcile(void) {
  pthread_mutex_lock(&tsr__mu);
  /* every device with a lease, launched through the shim or not: a
   * captured graph's memory is found here */
  for (int d = 0; d < TSR__DEVICES; d++) {
    tsr__cache_t *c = __atomic_load_n(&tsr__shim.lease_of_device[d], __ATOMIC_ACQUIRE) >= 0
                          ? tsr__cache(d) : (tsr__caches[d].used ? &tsr__caches[d] : NULL);
    if (c) tsr__settle(d, c);
  }
  pthread_mutex_unlock(&tsr__mu);
}

TSR_EXPORT CUresult cuGraphAddMemAllocNode(CUgraphNode *node, CUgraph graph, const CUgraphNode *deps,
                                           size_t ndeps, CUDA_MEM_ALLOC_NODE_PARAMS *params) {
  tsr_shim_ready();
  if (!tsr__real.cuGraphAddMemAllocNode) return CUDA_ERROR_NOT_INITIALIZED;
  if (!params || !tsr__shim.tenant.governed) return tsr__real.cuGraphAddMemAllocNode(node, graph, deps, ndeps, params);
  int lease = params->poolProps.location.type == CU_MEM_LOCATION_TYPE_DEVICE
                  ? tsr_shim_lease_of_device(params->poolProps.location.id)
                  : tsr_shim_current_lease();
  uint64_t want = tsr_shim_round(params->bytesize);
  if (lease >= 0 || tsr__shim.tenant.deny) {
    if (want > tsr_shim_left(lease)) tsr_shim_reconcile();
    if (want > tsr_shim_left(lease)) return CUDA_ERROR_OUT_OF_MEMORY;
  }
  CUresult rc = tsr__real.cuGraphAddMemAllocNode(node, graph, deps, ndeps, params);
  if (rc == CUDA_SUCCESS && lease >= 0) {
    pthread_mutex_lock(&tsr__mu);
    tsr__add(tsr__graphs, &tsr__ngraphs, graph, want);
    pthread_mutex_unlock(&tsr__mu);
  }
  return rc;
}

/* After an instantiation: the instance needs what its graph's nodes need. */
static CUresult tsr__instantiated(CUresult rc, CUgraphExec *exec, CUgraph graph) {
  if (rc != CUDA_SUCCESS || !exec || !tsr__shim.tenant.governed) return rc;
  tsr_shim_graph_priced(*exec, graph); /* what its launches cost */
  pthread_mutex_lock(&tsr__mu);
  uint64_t need = tsr__need_of(tsr__graphs, tsr__ngraphs, graph);
  if (need) tsr__add(tsr__execs, &tsr__nexecs, *exec, need);
  pthread_mutex_unlock(&tsr__mu);
  return rc;
}

TSR_EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec *exec, CUgraph graph, unsigned long long flags) {
  tsr_shim_ready();
  if (!tsr__real.cuGraphInstantiateWithFlags) return CUDA_ERROR_NOT_INITIALIZED;
  return tsr__instantiated(tsr__real.cuGraphInstantiateWithFlags(exec, graph, flags), exec, graph);
}

TSR_EXPORT CUresult cuGraphInstantiateWithParams(CUgraphExec *exec, CUgraph graph, void *params) {
  tsr_shim_ready();
  if (!tsr__real.cuGraphInstantiateWithParams) return CUDA_ERROR_NOT_INITIALIZED;
  return tsr__instantiated(tsr__real.cuGraphInstantiateWithParams(exec, graph, params), exec, graph);
}

TSR_EXPORT CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec *exec, CUgraph graph, void *params) {
  tsr_shim_ready();
  if (!tsr__real.cuGraphInstantiateWithParams_ptsz) return CUDA_ERROR_NOT_INITIALIZED;
  return tsr__instantiated(tsr__real.cuGraphInstantiateWithParams_ptsz(exec, graph, params), exec, graph);
}

TSR_EXPORT CUresult cuGraphInstantiate_v2(CUgraphExec *exec, CUgraph graph, CUgraphNode *error_node,
                                          char *log, size_t log_size) {
  tsr_shim_ready();
  if (!tsr__real.cuGraphInstantiate_v2) return CUDA_ERROR_NOT_INITIALIZED;
  return tsr__instantiated(tsr__real.cuGraphInstantiate_v2(exec, graph, error_node, log, log_size),
                           exec, graph);
}

TSR_EXPORT CUresult cuGraphExecDestroy(CUgraphExec exec) {
  tsr_shim_ready();
  if (!tsr__real.cuGraphExecDestroy) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult rc = tsr__real.cuGraphExecDestroy(exec);
  if (rc == CUDA_SUCCESS && tsr__shim.tenant.governed) {
    pthread_mutex_lock(&tsr__mu);
    tsr__drop(tsr__execs, &tsr__nexecs, exec);
    pthread_mutex_unlock(&tsr__mu);
  }
  return rc;
}

TSR_EXPORT CUresult cuGraphDestroy(CUgraph graph) {
  tsr_shim_ready();
  if (!tsr__real.cuGraphDestroy) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult rc = tsr__real.cuGraphDestroy(graph);
  if (rc == CUDA_SUCCESS && tsr__shim.tenant.governed) {
    pthread_mutex_lock(&tsr__mu);
    tsr__drop(tsr__graphs, &tsr__ngraphs, graph);
    pthread_mutex_unlock(&tsr__mu);
  }
  return rc;
}

static CUresult tsr__launch(CUresult (*real)(CUgraphExec, CUstream), CUgraphExec exec, CUstream stream) {
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  if (!tsr__shim.tenant.governed || !exec) return real(exec, stream);
  /* the hot path of graph users: while no instance needs graph memory (the
   * common case) a launch costs one atomic load; else one lookup under the
   * lock */
  if (!__atomic_load_n(&tsr__nexecs, __ATOMIC_ACQUIRE)) return real(exec, stream);
  pthread_mutex_lock(&tsr__mu);
  uint64_t need = tsr__need_of(tsr__execs, tsr__nexecs, exec);
  pthread_mutex_unlock(&tsr__mu);
  if (!need) return real(exec, stream);
  CUdevice dev = 0;
  if (tsr__real.cuCtxGetDevice(&dev) != CUDA_SUCCESS) return real(exec, stream);
  for (int attempt = 0; attempt < 2; attempt++) {
    if (attempt) tsr_shim_reconcile();
    pthread_mutex_lock(&tsr__mu);
    tsr__cache_t *c = tsr__cache(dev);
    if (!c) {
      pthread_mutex_unlock(&tsr__mu);
      return tsr__shim.tenant.deny ? CUDA_ERROR_OUT_OF_MEMORY : real(exec, stream);
    }
    uint64_t reserved = tsr__settle(dev, c);
    uint64_t used = tsr__attr(dev, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT);
    uint64_t grow = used > UINT64_MAX - need ? UINT64_MAX : used + need;
    grow = grow > reserved ? grow - reserved : 0;
    if (grow && !tsr_shim_charge_exact(c->lease, grow)) {
      pthread_mutex_unlock(&tsr__mu);
      continue;
    }
    c->charged += grow;
    CUresult rc = real(exec, stream);
    tsr__settle(dev, c);
    pthread_mutex_unlock(&tsr__mu);
    return rc;
  }
  return CUDA_ERROR_OUT_OF_MEMORY;
}

/* The launch as the memory account sees it, behind the compute share's
 * admission (launch.c), which waits without holding tsr__mu. */
static CUresult tsr__launch_mem(CUgraphExec exec, CUstream stream) {
  return tsr__launch(tsr__real.cuGraphLaunch, exec, stream);
}
static CUresult tsr__launch_mem_ptsz(CUgraphExec exec, CUstream stream) {
  return tsr__launch(tsr__real.cuGraphLaunch_ptsz, exec, stream);
}

TSR_EXPORT CUresult cuGraphLaunch(CUgraphExec exec, CUstream stream) {
  tsr_shim_ready();
  if (!tsr__real.cuGraphLaunch) return CUDA_ERROR_NOT_INITIALIZED;
  return tsr_shim_graph_launch(tsr__launch_mem, exec, stream, false);
}

TSR_EXPORT CUresult cuGraphLaunch_ptsz(CUgraphExec exec, CUstream stream) {
  tsr_shim_ready();
  if (!tsr__real.cuGraphLaunch_ptsz) return CUDA_ERROR_NOT_INITIALIZED;
  return tsr_shim_graph_launch(tsr__launch_mem_ptsz, exec, stream, true);
}

TSR_EXPORT CUresult cuDeviceGraphMemTrim(CUdevice dev) {
  tsr_shim_ready();
  if (!tsr__real.cuDeviceGraphMemTrim) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult rc = tsr__real.cuDeviceGraphMemTrim(dev);
  if (rc == CUDA_SUCCESS && tsr__shim.tenant.governed) {
    pthread_mutex_lock(&tsr__mu);
    if (dev >= 0 && dev < TSR__DEVICES && tsr__caches[dev].used) tsr__settle(dev, &tsr__caches[dev]);
    pthread_mutex_unlock(&tsr__mu);
  }
  return rc;
}
