/* graphs.c: CUDA graphs with memory nodes (cuGraphAddMemAllocNode and
 * cuGraphAddMemFreeNode), a path HAMi-core let through.
 *
 * The model, as the H100 behaved:
 *   - an allocation node fixes its address when it is added
 *     (nodeParams.dptr), but takes no memory until a launch;
 *   - a launch runs the nodes in the order they were added (a node's
 *     dependencies are always added before it); an allocation node takes
 *     its bytes from the device's graph memory cache, charging the device
 *     for what the cache lacks; a free node gives them back to the cache;
 *   - an allocation not freed in its graph stays usable after the launch and
 *     is freed by cuMemFree, cuMemFreeAsync or a free node of another launch;
 *     launching again before that is CUDA_ERROR_INVALID_VALUE (unless
 *     instantiated with CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH);
 *   - freed bytes stay in the cache (still charged: 64 MiB after a launch
 *     that allocated and freed) until cuDeviceGraphMemTrim; a synchronize
 *     does not trim it.
 * Nodes of other kinds, stream capture (cuStreamBeginCapture_v2 /
 * cuStreamEndCapture) and graph updates are not emulated. "Only one
 * instantiation of a graph with memory nodes may exist" is not enforced. */
#include <stdlib.h>

#include "base/array.h"
#include "internal.h"

typedef struct fc_graph fc_graph_t;

typedef struct fc_node {
  fc_obj_t hdr;
  fc_graph_t *graph;
  fc_alloc_t *alloc; /* the allocation node's range */
  fc_alloc_t *frees; /* a free node's allocation */
} fc_node_t;

struct fc_graph {
  fc_obj_t hdr;
  fc_node_t **nodes;
  size_t n, cap;
  unsigned refs; /* the graph's own reference and one per executable graph */
};

typedef struct {
  fc_obj_t hdr;
  fc_graph_t *graph;
  unsigned long long flags;
} fc_exec_t;

/* Drops a graph allocation nobody can reach any more, and forgets it in the
 * free nodes of other graphs that named it. */
static void fc_graph_alloc_drop(fc_alloc_t *a) {
  for (size_t i = 0; i < g_fc.nobjs[FC_K_NODE]; i++) {
    fc_node_t *n = g_fc.objs[FC_K_NODE][i];
    if (n->frees == a) n->frees = NULL;
  }
  fc_alloc_drop(a);
}

static void fc_graph_unref(fc_graph_t *g) {
  if (--g->refs > 0) return;
  for (size_t i = 0; i < g->n; i++) {
    fc_node_t *n = g->nodes[i];
    if (n->alloc) {
      /* an allocation still live outlives its graph; a dormant one goes */
      if (n->alloc->live) n->alloc->node = NULL;
      else fc_graph_alloc_drop(n->alloc);
    }
    fc_obj_remove(FC_K_NODE, n);
    free(n);
  }
  free(g->nodes);
  free(g);
}

void fc_graph_alloc_freed(fc_alloc_t *a) {
  g_fc.graph_used[a->dev] -= a->charged;
  a->charged = 0;
  a->live = false;
  if (!a->node) fc_graph_alloc_drop(a);
}

static CUresult fc_graph_create(CUgraph *phGraph, unsigned int flags) {
  if (!phGraph || flags != 0) return CUDA_ERROR_INVALID_VALUE; /* "flags: must be zero" */
  fc_graph_t *g = calloc(1, sizeof *g);
  if (!g) return CUDA_ERROR_OUT_OF_MEMORY;
  g->hdr.kind = FC_K_GRAPH;
  g->refs = 1;
  if (!fc_obj_add(FC_K_GRAPH, g)) {
    free(g);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  *phGraph = (CUgraph)g;
  return CUDA_SUCCESS;
}
/* Graphs belong to no context: no current context needed (the H100). */
FC_EXPORT CUresult cuGraphCreate(CUgraph *phGraph, unsigned int flags) {
  FC_LOCKED(fc_graph_create(phGraph, flags));
}

static CUresult fc_graph_destroy(CUgraph hGraph) {
  fc_graph_t *g = fc_obj_find(FC_K_GRAPH, hGraph);
  if (!g) return CUDA_ERROR_INVALID_VALUE; /* NULL (the H100) */
  fc_obj_remove(FC_K_GRAPH, g);
  fc_graph_unref(g);
  return CUDA_SUCCESS;
}
FC_EXPORT CUresult cuGraphDestroy(CUgraph hGraph) { FC_LOCKED(fc_graph_destroy(hGraph)); }

/* Checks the graph and the dependencies, makes a node and adds it. */
static CUresult fc_node_new(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *deps,
                            size_t ndeps, fc_graph_t **out_graph, fc_node_t **out_node) {
  fc_graph_t *g = fc_obj_find(FC_K_GRAPH, hGraph);
  if (!phGraphNode || !g || (ndeps > 0 && !deps)) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < ndeps; i++) {
    fc_node_t *d = fc_obj_find(FC_K_NODE, deps[i]);
    if (!d || d->graph != g) return CUDA_ERROR_INVALID_VALUE;
  }
  fc_node_t **grown = tsr_array_grow(g->nodes, &g->cap, g->n + 1, sizeof *g->nodes, 8);
  if (!grown) return CUDA_ERROR_OUT_OF_MEMORY;
  g->nodes = grown;
  fc_node_t *n = calloc(1, sizeof *n);
  if (!n) return CUDA_ERROR_OUT_OF_MEMORY;
  n->hdr.kind = FC_K_NODE;
  n->graph = g;
  if (!fc_obj_add(FC_K_NODE, n)) {
    free(n);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  *out_graph = g;
  *out_node = n;
  return CUDA_SUCCESS;
}

static CUresult fc_add_alloc_node(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *deps,
                                  size_t ndeps, CUDA_MEM_ALLOC_NODE_PARAMS *p) {
  if (!p || p->bytesize == 0 || (p->accessDescCount > 0 && !p->accessDescs))
    return CUDA_ERROR_INVALID_VALUE;
  /* a pinned device allocation; a bad ordinal is INVALID_VALUE (the H100) */
  int phys = fc_dev_phys(p->poolProps.location.id);
  if (p->poolProps.allocType != CU_MEM_ALLOCATION_TYPE_PINNED ||
      p->poolProps.location.type != CU_MEM_LOCATION_TYPE_DEVICE || phys < 0)
    return CUDA_ERROR_INVALID_VALUE;
  if (p->bytesize > fake_cuda_state_total(g_fc.state, phys))
    return CUDA_ERROR_OUT_OF_MEMORY;
  fc_graph_t *g;
  fc_node_t *n;
  CUresult rc = fc_node_new(phGraphNode, hGraph, deps, ndeps, &g, &n);
  if (rc != CUDA_SUCCESS) return rc;
  /* the address is fixed now; the memory comes with each launch */
  fc_alloc_t *a = fc_alloc_new(FC_A_GRAPH, p->bytesize, true);
  if (!a) {
    fc_obj_remove(FC_K_NODE, n);
    free(n);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  a->dev = phys;
  a->node = n;
  n->alloc = a;
  g->nodes[g->n++] = n;
  p->dptr = (CUdeviceptr)a->base;
  *phGraphNode = (CUgraphNode)n;
  return CUDA_SUCCESS;
}
FC_EXPORT CUresult cuGraphAddMemAllocNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                          const CUgraphNode *dependencies, size_t numDependencies,
                                          CUDA_MEM_ALLOC_NODE_PARAMS *nodeParams) {
  FC_LOCKED(fc_add_alloc_node(phGraphNode, hGraph, dependencies, numDependencies, nodeParams));
}

static CUresult fc_add_free_node(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *deps,
                                 size_t ndeps, CUdeviceptr dptr) {
  /* "an address that was not returned by an allocation node", "an
   * allocation twice in the same graph": CUDA_ERROR_INVALID_VALUE */
  fc_alloc_t *a = fc_alloc_at((uintptr_t)dptr);
  if (!a || a->kind != FC_A_GRAPH) return CUDA_ERROR_INVALID_VALUE;
  fc_graph_t *target = fc_obj_find(FC_K_GRAPH, hGraph);
  if (target)
    for (size_t i = 0; i < target->n; i++)
      if (target->nodes[i]->frees == a) return CUDA_ERROR_INVALID_VALUE;
  fc_graph_t *g;
  fc_node_t *n;
  CUresult rc = fc_node_new(phGraphNode, hGraph, deps, ndeps, &g, &n);
  if (rc != CUDA_SUCCESS) return rc;
  n->frees = a;
  g->nodes[g->n++] = n;
  *phGraphNode = (CUgraphNode)n;
  return CUDA_SUCCESS;
}
FC_EXPORT CUresult cuGraphAddMemFreeNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                         const CUgraphNode *dependencies, size_t numDependencies,
                                         CUdeviceptr dptr) {
  FC_LOCKED(fc_add_free_node(phGraphNode, hGraph, dependencies, numDependencies, dptr));
}

static CUresult fc_instantiate(CUgraphExec *phGraphExec, CUgraph hGraph, unsigned long long flags) {
  fc_ctx_t *c;
  CUresult rc = fc_current(&c); /* unconfirmed: the H100 was asked with a context */
  if (rc != CUDA_SUCCESS) return rc;
  fc_graph_t *g = fc_obj_find(FC_K_GRAPH, hGraph);
  if (!phGraphExec || !g) return CUDA_ERROR_INVALID_VALUE;
  /* AUTO_FREE_ON_LAUNCH, UPLOAD, DEVICE_LAUNCH, USE_NODE_PRIORITY */
  if (flags & ~0xfULL) return CUDA_ERROR_INVALID_VALUE;
  fc_exec_t *e = calloc(1, sizeof *e);
  if (!e) return CUDA_ERROR_OUT_OF_MEMORY;
  e->hdr.kind = FC_K_EXEC;
  e->graph = g;
  e->flags = flags;
  if (!fc_obj_add(FC_K_EXEC, e)) {
    free(e);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  g->refs++;
  *phGraphExec = (CUgraphExec)e;
  return CUDA_SUCCESS;
}
FC_EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph,
                                               unsigned long long flags) {
  FC_LOCKED(fc_instantiate(phGraphExec, hGraph, flags));
}

/* CUDA 10's signature, kept by cuGraphInstantiate and cuGraphInstantiate_v2
 * (what cuGetProcAddress("cuGraphInstantiate") gives at CUDA 11.0 and up on
 * the H100). No error node or log is ever produced. */
static CUresult fc_instantiate_v1(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode,
                                  char *logBuffer, size_t bufferSize) {
  if (phErrorNode) *phErrorNode = NULL;
  if (logBuffer && bufferSize > 0) logBuffer[0] = '\0';
  return fc_instantiate(phGraphExec, hGraph, 0);
}
FC_EXPORT CUresult cuGraphInstantiate(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode,
                                      char *logBuffer, size_t bufferSize) {
  FC_LOCKED(fc_instantiate_v1(phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize));
}
FC_EXPORT CUresult cuGraphInstantiate_v2(CUgraphExec *phGraphExec, CUgraph hGraph,
                                         CUgraphNode *phErrorNode, char *logBuffer, size_t bufferSize) {
  FC_LOCKED(fc_instantiate_v1(phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize));
}

static CUresult fc_exec_destroy(CUgraphExec hGraphExec) {
  fc_exec_t *e = fc_obj_find(FC_K_EXEC, hGraphExec);
  if (!e) return CUDA_ERROR_INVALID_VALUE; /* NULL (the H100) */
  fc_obj_remove(FC_K_EXEC, e);
  fc_graph_unref(e->graph);
  free(e);
  return CUDA_SUCCESS;
}
FC_EXPORT CUresult cuGraphExecDestroy(CUgraphExec hGraphExec) { FC_LOCKED(fc_exec_destroy(hGraphExec)); }

/* Takes `bytes` for a graph allocation on `dev` from the graph cache,
 * charging the device for what it lacks. */
static CUresult fc_graph_take(int dev, uint64_t bytes) {
  uint64_t avail = g_fc.graph_reserved[dev] - g_fc.graph_used[dev];
  if (bytes > avail) {
    CUresult rc = fc_charge(dev, bytes - avail);
    if (rc != CUDA_SUCCESS) return rc;
    g_fc.graph_reserved[dev] += bytes - avail;
  }
  g_fc.graph_used[dev] += bytes;
  return CUDA_SUCCESS;
}

static CUresult fc_graph_launch(CUgraphExec hGraphExec, CUstream hStream) {
  fc_exec_t *e = fc_obj_find(FC_K_EXEC, hGraphExec);
  if (!e) return CUDA_ERROR_INVALID_VALUE; /* NULL (the H100) */
  fc_ctx_t *c;
  CUresult rc = fc_stream_ctx(hStream, &c);
  if (rc != CUDA_SUCCESS) return rc;
  fc_graph_t *g = e->graph;
  /* "If any allocations created by hGraphExec remain unfreed ... the launch
   * will fail with CUDA_ERROR_INVALID_VALUE" (the H100 too) */
  for (size_t i = 0; i < g->n; i++) {
    fc_alloc_t *a = g->nodes[i]->alloc;
    if (!a || !a->live) continue;
    if (!(e->flags & CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH)) return CUDA_ERROR_INVALID_VALUE;
  }
  for (size_t i = 0; i < g->n; i++) {
    fc_alloc_t *a = g->nodes[i]->alloc;
    if (a && a->live) fc_graph_alloc_freed(a); /* auto free on launch */
  }
  for (size_t i = 0; i < g->n; i++) {
    fc_node_t *n = g->nodes[i];
    if (n->alloc) {
      if ((rc = fc_graph_take(n->alloc->dev, n->alloc->size)) != CUDA_SUCCESS) {
        /* out of memory: undo what this launch allocated */
        for (size_t j = 0; j < i; j++) {
          fc_alloc_t *a = g->nodes[j]->alloc;
          if (a && a->live) fc_graph_alloc_freed(a);
        }
        return rc;
      }
      n->alloc->charged = n->alloc->size;
      n->alloc->live = true;
    } else if (n->frees && n->frees->live) {
      fc_graph_alloc_freed(n->frees);
    }
  }
  return CUDA_SUCCESS;
}
FC_EXPORT CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream) {
  FC_LOCKED(fc_graph_launch(hGraphExec, hStream));
}
FC_EXPORT CUresult cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream) {
  FC_LOCKED(fc_graph_launch(hGraphExec, hStream));
}

static CUresult fc_graph_mem_trim(CUdevice device) {
  int phys = fc_dev_phys(device);
  if (phys < 0) return CUDA_ERROR_INVALID_DEVICE;
  uint64_t unused = g_fc.graph_reserved[phys] - g_fc.graph_used[phys];
  fc_uncharge(phys, unused);
  g_fc.graph_reserved[phys] -= unused;
  return CUDA_SUCCESS;
}
FC_EXPORT CUresult cuDeviceGraphMemTrim(CUdevice device) { FC_LOCKED(fc_graph_mem_trim(device)); }

/* The graph allocator's cache: used (held by live graph allocations) and
 * reserved (charged to the device); the high-water marks are not kept. */
static CUresult fc_graph_mem_attr(CUdevice device, CUgraphMem_attribute attr, void *value) {
  int phys = fc_dev_phys(device);
  if (phys < 0) return CUDA_ERROR_INVALID_DEVICE;
  if (!value) return CUDA_ERROR_INVALID_VALUE;
  switch (attr) {
    case CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT: *(cuuint64_t *)value = g_fc.graph_used[phys]; break;
    case CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT:
      *(cuuint64_t *)value = g_fc.graph_reserved[phys];
      break;
    default: return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}
FC_EXPORT CUresult cuDeviceGetGraphMemAttribute(CUdevice device, CUgraphMem_attribute attr,
                                                void *value) {
  FC_LOCKED(fc_graph_mem_attr(device, attr, value));
}
