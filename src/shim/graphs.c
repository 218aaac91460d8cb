/* graphs.c: graph memory: allocation nodes, however a graph got them, and
 * the device's graph memory cache behind them; and the entries that make,
 * update, upload and launch executable graphs.
 *
 * An allocation node takes no memory when it is added; an upload or a
 * launch takes its bytes from the device's graph memory cache, which grows
 * as needed and keeps freed bytes until cuDeviceGraphMemTrim. So, as with
 * pools, a device's graph memory is charged what the driver says the cache
 * reserves (CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT), one account per device:
 *   - adding an allocation node larger than the lease has left is refused
 *     at once with out-of-memory (a stream-ordered allocation captured into
 *     a graph is checked the same way, pools.c);
 *   - an instantiation (every cuGraphInstantiate* entry) reads what the
 *     graph's allocation nodes need on each device from the graph itself
 *     (cuGraphGetNodes, cuGraphMemAllocNodeGetParams, child graphs
 *     followed), whoever put them there: cuGraphAddMemAllocNode, stream
 *     capture (cuStreamEndCapture, cuStreamBeginCaptureToGraph, a graph
 *     reached through cuStreamGetCaptureInfo), cuGraphAddNode. The instance
 *     is remembered with that need; one whose graph cannot be read, or
 *     that cannot be remembered, is refused (destroyed again);
 *   - an upload (cuGraphUpload, or an instantiation with
 *     CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD) and a launch first charge what
 *     the cache would have to grow by (used + need - reserved), refused
 *     with out-of-memory before the driver is asked if the lease cannot
 *     take it; afterwards each account is set to what the cache reserves;
 *   - cuGraphExecUpdate keeps, per device, the larger of the instance's
 *     need and its new graph's (the driver may keep either node's size);
 *   - a trim, a refusal anywhere (account.c) and the memory queries bring
 *     the accounts down to the cache's size again.
 * The lock is held across the driver's upload or launch, so that two
 * launches cannot both be admitted on the same room. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "shim/shim.h"

#define TSR_EXPORT __attribute__((visibility("default")))
#define TSR__TRACKED 1024 /* instances that need graph memory */
#define TSR__DEVICES 64
#define TSR__EXEC_DEVICES 4 /* devices one instance may allocate on */
#define TSR__DEPTH 64       /* child graphs followed this deep; deeper is refused */

/* What an instance's allocation nodes need on each device they name. */
typedef struct {
  CUgraphExec exec;
  unsigned ndev;
  CUdevice dev[TSR__EXEC_DEVICES];
  uint64_t bytes[TSR__EXEC_DEVICES];
} tsr__need_t;

typedef struct {
  bool used;
  int lease;
  uint64_t charged;
} tsr__cache_t;

static pthread_mutex_t tsr__mu = PTHREAD_MUTEX_INITIALIZER;
static tsr__need_t tsr__needs[TSR__TRACKED];
static size_t tsr__nneeds; /* changed under the lock, read without it by the launch's fast path */
static tsr__cache_t tsr__caches[TSR__DEVICES];

static void tsr__graphs_after_fork(void) {
  pthread_mutex_init(&tsr__mu, NULL);
  tsr__nneeds = 0;
  for (int i = 0; i < TSR__DEVICES; i++) tsr__caches[i].used = false;
}

/* ---- what a graph needs ---------------------------------------------------------- */

static uint64_t tsr__sat_add(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

/* Adds `bytes` on `dev` to `n`; false if `n` names TSR__EXEC_DEVICES others. */
static bool tsr__need_add(tsr__need_t *n, CUdevice dev, uint64_t bytes) {
  for (unsigned i = 0; i < n->ndev; i++)
    if (n->dev[i] == dev) {
      n->bytes[i] = tsr__sat_add(n->bytes[i], bytes);
      return true;
    }
  if (n->ndev == TSR__EXEC_DEVICES) return false;
  n->dev[n->ndev] = dev;
  n->bytes[n->ndev++] = bytes;
  return true;
}

/* Adds what the allocation nodes of `graph` and of the graphs embedded in
 * it need to *need. A graph the driver will not describe gets the driver's
 * error; one deeper than TSR__DEPTH, or allocating on more devices than an
 * instance is remembered with, CUDA_ERROR_NOT_SUPPORTED. */
static CUresult tsr__graph_need(CUgraph graph, int depth, tsr__need_t *need) {
  if (depth > TSR__DEPTH) {
    tsr_shim_warn_once(TSR_WARN_GRAPH_TOO_DEEP, "a graph nests child graphs deeper than %d: refused", TSR__DEPTH);
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  if (!tsr_real.cuGraphGetNodes || !tsr_real.cuGraphNodeGetType) return CUDA_ERROR_NOT_SUPPORTED;
  size_t n = 0;
  CUresult rc = tsr_real.cuGraphGetNodes(graph, NULL, &n);
  if (rc != CUDA_SUCCESS || n == 0) return rc;
  CUgraphNode *nodes = calloc(n, sizeof(*nodes));
  if (!nodes) return CUDA_ERROR_OUT_OF_MEMORY;
  size_t got = n;
  rc = tsr_real.cuGraphGetNodes(graph, nodes, &got);
  for (size_t i = 0; i < got && i < n && rc == CUDA_SUCCESS; i++) {
    int type = -1;
    if ((rc = tsr_real.cuGraphNodeGetType(nodes[i], &type)) != CUDA_SUCCESS) break;
    if (type == CU_GRAPH_NODE_TYPE_MEM_ALLOC) {
      CUDA_MEM_ALLOC_NODE_PARAMS p;
      memset(&p, 0, sizeof(p));
      if (!tsr_real.cuGraphMemAllocNodeGetParams)
        rc = CUDA_ERROR_NOT_SUPPORTED;
      else
        rc = tsr_real.cuGraphMemAllocNodeGetParams(nodes[i], &p);
      /* host memory (a pinned host location) is not the lease's, nor is a
       * device the process is not governed on (no lease, policy pass) */
      if (rc != CUDA_SUCCESS || p.poolProps.location.type != CU_MEM_LOCATION_TYPE_DEVICE) continue;
      int id = p.poolProps.location.id, lease = tsr_shim_lease_of_device(id);
      if (lease < 0 && !(lease == TSR_TENANT_NO_LEASE && tsr_shim.tenant.deny)) continue;
      if (id < 0 || id >= TSR__DEVICES || !tsr__need_add(need, id, tsr_shim_round(p.bytesize))) {
        tsr_shim_warn_once(TSR_WARN_GRAPH_TOO_MANY_DEVICES, "a graph allocates on more than %d devices: refused",
                           TSR__EXEC_DEVICES);
        rc = CUDA_ERROR_NOT_SUPPORTED;
      }
    } else if (type == CU_GRAPH_NODE_TYPE_GRAPH && tsr_real.cuGraphChildGraphNodeGetGraph) {
      CUgraph child = NULL;
      rc = tsr_real.cuGraphChildGraphNodeGetGraph(nodes[i], &child);
      if (rc == CUDA_SUCCESS && child) rc = tsr__graph_need(child, depth + 1, need);
    }
  }
  free(nodes);
  return rc;
}

/* ---- the instances remembered ---------------------------------------------------- */

/* Called with the lock held. */
static tsr__need_t *tsr__find(CUgraphExec exec) {
  for (size_t i = 0; i < tsr__nneeds; i++)
    if (tsr__needs[i].exec == exec) return &tsr__needs[i];
  return NULL;
}

static void tsr__drop(CUgraphExec exec) {
  tsr__need_t *e = tsr__find(exec);
  if (!e) return;
  *e = tsr__needs[tsr__nneeds - 1];
  __atomic_store_n(&tsr__nneeds, tsr__nneeds - 1, __ATOMIC_RELEASE);
}

/* Remembers that `exec` needs `need` (or, with `merge`, the larger of that
 * and what it needed). False: no room (nothing changed). */
static bool tsr__remember(CUgraphExec exec, const tsr__need_t *need, bool merge) {
  tsr__need_t *e = tsr__find(exec);
  if (e && merge) {
    tsr__need_t m = *e;
    for (unsigned i = 0; i < need->ndev; i++) {
      unsigned j = 0;
      while (j < m.ndev && m.dev[j] != need->dev[i]) j++;
      if (j == m.ndev && !tsr__need_add(&m, need->dev[i], 0)) return false;
      if (need->bytes[i] > m.bytes[j]) m.bytes[j] = need->bytes[i];
    }
    *e = m;
    return true;
  }
  if (!need->ndev) {
    if (e) tsr__drop(exec);
    return true;
  }
  if (!e) {
    if (tsr__nneeds == TSR__TRACKED) return false;
    e = &tsr__needs[tsr__nneeds];
    *e = *need;
    e->exec = exec;
    __atomic_store_n(&tsr__nneeds, tsr__nneeds + 1, __ATOMIC_RELEASE);
    return true;
  }
  *e = *need;
  e->exec = exec;
  return true;
}

/* ---- the cache's accounts -------------------------------------------------------- */

static uint64_t tsr__attr(CUdevice dev, int attr) {
  cuuint64_t v = 0;
  if (!tsr_real.cuDeviceGetGraphMemAttribute || tsr_real.cuDeviceGetGraphMemAttribute(dev, attr, &v) != CUDA_SUCCESS)
    return 0;
  return v;
}

/* Sets the account to what the cache reserves, and returns that. */
static uint64_t tsr__settle(CUdevice dev, tsr__cache_t *c) {
  uint64_t r = tsr__attr(dev, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT);
  if (r > c->charged) {
    if (tsr_shim_charge_exact(c->lease, r - c->charged))
      c->charged = r;
    else
      tsr_shim_warn_once(TSR_WARN_GRAPH_CACHE_OVER, "the graph memory cache holds more than the lease has left");
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

static void tsr__graphs_reconcile(void) {
  pthread_mutex_lock(&tsr__mu);
  /* every device with a lease, launched through the shim or not */
  for (int d = 0; d < TSR__DEVICES; d++) {
    tsr__cache_t *c = __atomic_load_n(&tsr_shim.lease_of_device[d], __ATOMIC_ACQUIRE) >= 0
                          ? tsr__cache(d)
                          : (tsr__caches[d].used ? &tsr__caches[d] : NULL);
    if (c) tsr__settle(d, c);
  }
  pthread_mutex_unlock(&tsr__mu);
}

/* Runs op(arg), which takes `need` from the graph memory caches (an upload
 * or a launch), after charging what each cache must grow by; settles the
 * accounts after it. Out-of-memory, the driver not asked, when a lease
 * cannot take the growth (after one reconciliation), or a device without a
 * lease is asked for memory under the deny policy. */
static CUresult tsr__charged(const tsr__need_t *need, CUresult (*op)(void *), void *arg) {
  for (int attempt = 0; attempt < 2; attempt++) {
    if (attempt) tsr_shim_reconcile();
    pthread_mutex_lock(&tsr__mu);
    uint64_t grown[TSR__EXEC_DEVICES] = {0};
    unsigned i = 0;
    for (; i < need->ndev; i++) {
      tsr__cache_t *c = tsr__cache(need->dev[i]);
      if (!c) {
        if (tsr_shim.tenant.deny && tsr_shim_lease_of_device(need->dev[i]) == TSR_TENANT_NO_LEASE) break;
        continue;
      }
      uint64_t reserved = tsr__settle(need->dev[i], c);
      uint64_t used = tsr__attr(need->dev[i], CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT);
      uint64_t grow = tsr__sat_add(used, need->bytes[i]);
      grow = grow > reserved ? grow - reserved : 0;
      if (grow && !tsr_shim_charge_exact(c->lease, grow)) break;
      c->charged += grow;
      grown[i] = grow;
    }
    if (i < need->ndev) { /* refused: give back what this attempt charged */
      bool deny = !tsr__cache(need->dev[i]);
      for (unsigned j = 0; j < i; j++)
        if (grown[j]) {
          tsr__cache_t *c = &tsr__caches[need->dev[j]];
          c->charged -= grown[j];
          tsr_shim_credit_exact(c->lease, grown[j]);
        }
      pthread_mutex_unlock(&tsr__mu);
      if (deny) return CUDA_ERROR_OUT_OF_MEMORY;
      continue;
    }
    CUresult rc = op(arg);
    for (unsigned j = 0; j < need->ndev; j++)
      if (tsr__cache(need->dev[j])) tsr__settle(need->dev[j], &tsr__caches[need->dev[j]]);
    pthread_mutex_unlock(&tsr__mu);
    return rc;
  }
  return CUDA_ERROR_OUT_OF_MEMORY;
}

/* ---- allocation nodes -------------------------------------------------------------- */

TSR_EXPORT CUresult cuGraphAddMemAllocNode(CUgraphNode *node, CUgraph graph, const CUgraphNode *deps, size_t ndeps,
                                           CUDA_MEM_ALLOC_NODE_PARAMS *params) {
  tsr_shim_ready();
  if (!tsr_real.cuGraphAddMemAllocNode) return CUDA_ERROR_NOT_INITIALIZED;
  if (!params || !tsr_shim.tenant.governed) return tsr_real.cuGraphAddMemAllocNode(node, graph, deps, ndeps, params);
  int lease = params->poolProps.location.type == CU_MEM_LOCATION_TYPE_DEVICE
                  ? tsr_shim_lease_of_device(params->poolProps.location.id)
                  : tsr_shim_current_lease();
  uint64_t want = tsr_shim_round(params->bytesize);
  if (lease >= 0 || tsr_shim.tenant.deny) {
    if (want > tsr_shim_left(lease)) tsr_shim_reconcile();
    if (want > tsr_shim_left(lease)) return CUDA_ERROR_OUT_OF_MEMORY;
  }
  return tsr_real.cuGraphAddMemAllocNode(node, graph, deps, ndeps, params);
}

/* ---- instantiation ----------------------------------------------------------------- */

/* One instantiation entry, its arguments kept for tsr__instantiate. */
typedef struct {
  enum { TSR__WITH_FLAGS, TSR__WITH_PARAMS, TSR__WITH_PARAMS_PTSZ, TSR__V2, TSR__V1 } entry;
  CUgraphExec *exec;
  CUgraph graph;
  unsigned long long flags;
  CUDA_GRAPH_INSTANTIATE_PARAMS *params;
  CUgraphNode *error_node;
  char *log;
  size_t log_size;
} tsr__inst_t;

static CUresult tsr__inst_call(void *arg) {
  const tsr__inst_t *a = arg;
  switch (a->entry) {
    case TSR__WITH_FLAGS: return tsr_real.cuGraphInstantiateWithFlags(a->exec, a->graph, a->flags);
    case TSR__WITH_PARAMS: return tsr_real.cuGraphInstantiateWithParams(a->exec, a->graph, a->params);
    case TSR__WITH_PARAMS_PTSZ: return tsr_real.cuGraphInstantiateWithParams_ptsz(a->exec, a->graph, a->params);
    case TSR__V2: return tsr_real.cuGraphInstantiate_v2(a->exec, a->graph, a->error_node, a->log, a->log_size);
    case TSR__V1: return tsr_real.cuGraphInstantiate(a->exec, a->graph, a->error_node, a->log, a->log_size);
  }
  return CUDA_ERROR_NOT_SUPPORTED;
}

/* Reads what the graph needs, instantiates (charged first when the
 * instantiation uploads), and remembers the instance. */
static CUresult tsr__instantiate(tsr__inst_t *a) {
  if (!a->exec || !a->graph || !tsr_shim.tenant.governed) return tsr__inst_call(a); /* the driver's own error */
  tsr__need_t need;
  memset(&need, 0, sizeof(need));
  CUresult rc = tsr__graph_need(a->graph, 0, &need);
  if (rc != CUDA_SUCCESS) return rc;
  bool upload = a->params && (a->params->flags & CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD) &&
                (a->entry == TSR__WITH_PARAMS || a->entry == TSR__WITH_PARAMS_PTSZ);
  rc = upload && need.ndev ? tsr__charged(&need, tsr__inst_call, a) : tsr__inst_call(a);
  if (rc != CUDA_SUCCESS) return rc;
  tsr_shim_graph_priced(*a->exec, a->graph); /* what its launches cost */
  pthread_mutex_lock(&tsr__mu);
  bool kept = tsr__remember(*a->exec, &need, false);
  pthread_mutex_unlock(&tsr__mu);
  if (kept) return rc;
  tsr_shim_warn_once(TSR_WARN_TOO_MANY_GRAPHS,
                     "too many graph instances with allocation nodes to account for; refusing more");
  tsr_real.cuGraphExecDestroy(*a->exec); /* what an upload took stays in the cache, charged */
  return CUDA_ERROR_OUT_OF_MEMORY;
}

TSR_EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec *exec, CUgraph graph, unsigned long long flags) {
  tsr_shim_ready();
  if (!tsr_real.cuGraphInstantiateWithFlags) return CUDA_ERROR_NOT_INITIALIZED;
  tsr__inst_t a = {.entry = TSR__WITH_FLAGS, .exec = exec, .graph = graph, .flags = flags};
  return tsr__instantiate(&a);
}

TSR_EXPORT CUresult cuGraphInstantiateWithParams(CUgraphExec *exec, CUgraph graph,
                                                 CUDA_GRAPH_INSTANTIATE_PARAMS *params) {
  tsr_shim_ready();
  if (!tsr_real.cuGraphInstantiateWithParams) return CUDA_ERROR_NOT_INITIALIZED;
  tsr__inst_t a = {.entry = TSR__WITH_PARAMS, .exec = exec, .graph = graph, .params = params};
  return tsr__instantiate(&a);
}

TSR_EXPORT CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec *exec, CUgraph graph,
                                                      CUDA_GRAPH_INSTANTIATE_PARAMS *params) {
  tsr_shim_ready();
  if (!tsr_real.cuGraphInstantiateWithParams_ptsz) return CUDA_ERROR_NOT_INITIALIZED;
  tsr__inst_t a = {.entry = TSR__WITH_PARAMS_PTSZ, .exec = exec, .graph = graph, .params = params};
  return tsr__instantiate(&a);
}

TSR_EXPORT CUresult cuGraphInstantiate_v2(CUgraphExec *exec, CUgraph graph, CUgraphNode *error_node, char *log,
                                          size_t log_size) {
  tsr_shim_ready();
  if (!tsr_real.cuGraphInstantiate_v2) return CUDA_ERROR_NOT_INITIALIZED;
  tsr__inst_t a = {
      .entry = TSR__V2, .exec = exec, .graph = graph, .error_node = error_node, .log = log, .log_size = log_size};
  return tsr__instantiate(&a);
}

/* CUDA 10.0's entry, the same arguments as _v2 (cuGetProcAddress hands it
 * out for versions before 11.0; CUDA 10's runtime finds it by name). */
TSR_EXPORT CUresult cuGraphInstantiate(CUgraphExec *exec, CUgraph graph, CUgraphNode *error_node, char *log,
                                       size_t log_size) {
  tsr_shim_ready();
  if (!tsr_real.cuGraphInstantiate) return CUDA_ERROR_NOT_INITIALIZED;
  tsr__inst_t a = {
      .entry = TSR__V1, .exec = exec, .graph = graph, .error_node = error_node, .log = log, .log_size = log_size};
  return tsr__instantiate(&a);
}

TSR_EXPORT CUresult cuGraphExecDestroy(CUgraphExec exec) {
  tsr_shim_ready();
  if (!tsr_real.cuGraphExecDestroy) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult rc = tsr_real.cuGraphExecDestroy(exec);
  if (rc == CUDA_SUCCESS && tsr_shim.tenant.governed) {
    pthread_mutex_lock(&tsr__mu);
    tsr__drop(exec);
    pthread_mutex_unlock(&tsr__mu);
  }
  return rc;
}

/* ---- update ------------------------------------------------------------------------- */

/* An update of `exec` from `graph` through op(arg): refused (nothing
 * changed) if `graph` cannot be read or its need cannot be remembered; on
 * success the instance needs the larger of the two, and costs what
 * `graph`'s kernels cost. The lock is held across the update, so that the
 * room checked is the room used. */
static CUresult tsr__update(CUgraphExec exec, CUgraph graph, CUresult (*op)(void *), void *arg) {
  if (!exec || !graph || !tsr_shim.tenant.governed) return op(arg); /* the driver's own error */
  tsr__need_t need;
  memset(&need, 0, sizeof(need));
  CUresult rc = tsr__graph_need(graph, 0, &need);
  if (rc != CUDA_SUCCESS) return rc;
  pthread_mutex_lock(&tsr__mu);
  tsr__need_t *old = tsr__find(exec);
  tsr__need_t probe = old ? *old : (tsr__need_t){.exec = exec};
  bool room = need.ndev == 0 || old != NULL || tsr__nneeds < TSR__TRACKED;
  for (unsigned i = 0; i < need.ndev && room; i++) room = tsr__need_add(&probe, need.dev[i], 0);
  if (!room) {
    pthread_mutex_unlock(&tsr__mu);
    tsr_shim_warn_once(TSR_WARN_TOO_MANY_GRAPHS,
                       "too many graph instances with allocation nodes to account for; refusing more");
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  rc = op(arg);
  if (rc == CUDA_SUCCESS && need.ndev) tsr__remember(exec, &need, true);
  pthread_mutex_unlock(&tsr__mu);
  if (rc == CUDA_SUCCESS) tsr_shim_graph_priced(exec, graph);
  return rc;
}

typedef struct {
  CUgraphExec exec;
  CUgraph graph;
  void *info;         /* _v2: CUgraphExecUpdateResultInfo */
  CUgraphNode *error; /* CUDA 10.2's */
  int *result;
} tsr__update_t;

static CUresult tsr__update_v2(void *arg) {
  const tsr__update_t *u = arg;
  return tsr_real.cuGraphExecUpdate_v2(u->exec, u->graph, u->info);
}
static CUresult tsr__update_v1(void *arg) {
  const tsr__update_t *u = arg;
  return tsr_real.cuGraphExecUpdate(u->exec, u->graph, u->error, u->result);
}

TSR_EXPORT CUresult cuGraphExecUpdate_v2(CUgraphExec exec, CUgraph graph, void *info) {
  tsr_shim_ready();
  if (!tsr_real.cuGraphExecUpdate_v2) return CUDA_ERROR_NOT_INITIALIZED;
  tsr__update_t u = {.exec = exec, .graph = graph, .info = info};
  return tsr__update(exec, graph, tsr__update_v2, &u);
}

/* CUDA 10.2's entry: the error node and the result apart. */
TSR_EXPORT CUresult cuGraphExecUpdate(CUgraphExec exec, CUgraph graph, CUgraphNode *error, int *result) {
  tsr_shim_ready();
  if (!tsr_real.cuGraphExecUpdate) return CUDA_ERROR_NOT_INITIALIZED;
  tsr__update_t u = {.exec = exec, .graph = graph, .error = error, .result = result};
  return tsr__update(exec, graph, tsr__update_v1, &u);
}

/* ---- upload and launch --------------------------------------------------------------- */

typedef struct {
  CUresult (*real)(CUgraphExec, CUstream);
  CUgraphExec exec;
  CUstream stream;
} tsr__exec_op_t;

static CUresult tsr__exec_call(void *arg) {
  const tsr__exec_op_t *o = arg;
  return o->real(o->exec, o->stream);
}

/* An upload or a launch of `exec` through `real`, charged what the caches
 * must grow by for it. */
static CUresult tsr__exec_op(CUresult (*real)(CUgraphExec, CUstream), CUgraphExec exec, CUstream stream) {
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  if (!tsr_shim.tenant.governed || !exec) return real(exec, stream);
  /* the hot path of graph users: while no instance needs graph memory (the
   * common case) a launch costs one atomic load; else one lookup under the
   * lock */
  if (!__atomic_load_n(&tsr__nneeds, __ATOMIC_ACQUIRE)) return real(exec, stream);
  pthread_mutex_lock(&tsr__mu);
  tsr__need_t *e = tsr__find(exec);
  tsr__need_t need = e ? *e : (tsr__need_t){.ndev = 0};
  pthread_mutex_unlock(&tsr__mu);
  if (!need.ndev) return real(exec, stream);
  tsr__exec_op_t o = {real, exec, stream};
  return tsr__charged(&need, tsr__exec_call, &o);
}

/* The launch as the memory account sees it, behind the compute share's
 * admission (launch.c), which waits without holding tsr__mu. */
static CUresult tsr__launch_mem(CUgraphExec exec, CUstream stream) {
  return tsr__exec_op(tsr_real.cuGraphLaunch, exec, stream);
}
static CUresult tsr__launch_mem_ptsz(CUgraphExec exec, CUstream stream) {
  return tsr__exec_op(tsr_real.cuGraphLaunch_ptsz, exec, stream);
}

TSR_EXPORT CUresult cuGraphLaunch(CUgraphExec exec, CUstream stream) {
  tsr_shim_ready();
  if (!tsr_real.cuGraphLaunch) return CUDA_ERROR_NOT_INITIALIZED;
  return tsr_shim_graph_launch(tsr__launch_mem, exec, stream, false);
}

TSR_EXPORT CUresult cuGraphLaunch_ptsz(CUgraphExec exec, CUstream stream) {
  tsr_shim_ready();
  if (!tsr_real.cuGraphLaunch_ptsz) return CUDA_ERROR_NOT_INITIALIZED;
  return tsr_shim_graph_launch(tsr__launch_mem_ptsz, exec, stream, true);
}

/* An upload runs no kernel: charged for memory only. */
TSR_EXPORT CUresult cuGraphUpload(CUgraphExec exec, CUstream stream) {
  tsr_shim_ready();
  return tsr__exec_op(tsr_real.cuGraphUpload, exec, stream);
}

TSR_EXPORT CUresult cuGraphUpload_ptsz(CUgraphExec exec, CUstream stream) {
  tsr_shim_ready();
  return tsr__exec_op(tsr_real.cuGraphUpload_ptsz, exec, stream);
}

TSR_EXPORT CUresult cuDeviceGraphMemTrim(CUdevice dev) {
  tsr_shim_ready();
  if (!tsr_real.cuDeviceGraphMemTrim) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult rc = tsr_real.cuDeviceGraphMemTrim(dev);
  if (rc == CUDA_SUCCESS && tsr_shim.tenant.governed) {
    pthread_mutex_lock(&tsr__mu);
    if (dev >= 0 && dev < TSR__DEVICES && tsr__caches[dev].used) tsr__settle(dev, &tsr__caches[dev]);
    pthread_mutex_unlock(&tsr__mu);
  }
  return rc;
}

const tsr_shim_family_t tsr_shim_family_graphs = {.after_fork = tsr__graphs_after_fork,
                                                  .reconcile = tsr__graphs_reconcile};
