/* graphs.c: CUDA graphs. Memory nodes (cuGraphAddMemAllocNode and
 * cuGraphAddMemFreeNode: a path HAMi-core let through), kernel nodes, empty
 * nodes and child graph nodes; executable graphs (cuGraphInstantiate*,
 * WithParams and its upload included), their upload and launch, kernel
 * parameter edits and cuGraphExecUpdate. Stream capture (capture.c) builds
 * graphs through fc_graph_add_*.
 *
 * The memory model, as the H100 behaved:
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
 *   - an upload grows the cache by what the graph's allocations lack,
 *     without making them live (the reference's words; unconfirmed).
 *
 * Kernels: instantiation copies every kernel node's parameters into the
 * executable graph, child graphs flattened in (later edits of the graph do
 * not reach it; cuGraphExecKernelNodeSetParams and cuGraphExecUpdate do). A
 * launch queues the sum of its kernels' durations on the stream's timeline
 * (timeline.c): the kernels run one after another. Kernel arguments are not
 * kept: cuGraphKernelNodeGetParams answers kernelParams and extra NULL.
 *
 * Dependencies are kept (as indexes of earlier nodes) for cuGraphExecUpdate,
 * which pairs nodes by the order they were added: same count, same kinds,
 * same dependencies, recursively in child graphs. Nodes of other kinds
 * (memcpy, memset, host, events), cuGraphDestroyNode, edges added later,
 * and "one instantiation of a graph with memory nodes at a time" are not
 * emulated. Answers the H100 was not asked about are marked unconfirmed. */
#include <stdlib.h>
#include <string.h>

#include "base/array.h"
#include "internal.h"

#define FC_GRAPH_DEPTH_MAX 64 /* child graphs nested deeper are refused (unconfirmed) */

typedef struct fc_graph fc_graph_t;

typedef struct fc_node {
  fc_obj_t hdr;
  fc_graph_t *graph;
  size_t index; /* in graph->nodes */
  CUgraphNodeType type;
  size_t *deps; /* indexes of the nodes it depends on, in graph->nodes */
  size_t ndeps;
  fc_alloc_t *alloc; /* MEM_ALLOC: its range */
  fc_alloc_t *frees; /* MEM_FREE: the allocation it frees (NULL once that is gone) */
  fc_kparams_t k;    /* KERNEL */
  fc_graph_t *child; /* GRAPH: the embedded graph, owned by the node */
} fc_node_t;

struct fc_graph {
  fc_obj_t hdr;
  fc_node_t **nodes;
  size_t n, cap;
  unsigned refs;     /* the graph's own reference, one per executable graph and capture */
  fc_node_t *parent; /* an embedded graph: the child graph node that owns it */
};

/* One node of an executable graph, child graphs flattened in (pre-order). */
typedef struct {
  fc_node_t *node; /* the node it was made from */
  CUgraphNodeType type;
  size_t count;   /* GRAPH: how many nodes its embedded graph had */
  fc_kparams_t k; /* KERNEL: what it runs */
} fc_xnode_t;

typedef struct {
  fc_obj_t hdr;
  fc_graph_t *graph;
  unsigned long long flags;
  size_t ntop;   /* nodes directly in the graph when it was instantiated */
  fc_xnode_t *x; /* its nodes, child graphs flattened in */
  size_t nx, capx;
} fc_exec_t;

/* ---- graphs and nodes ----------------------------------------------------------- */

/* Drops a graph allocation nobody can reach any more, and forgets it in the
 * free nodes of other graphs that named it. */
static void fc_graph_alloc_drop(fc_alloc_t *a) {
  for (size_t i = 0; i < g_fc.nobjs[FC_K_NODE]; i++) {
    fc_node_t *n = g_fc.objs[FC_K_NODE][i];
    if (n->frees == a) n->frees = NULL;
  }
  fc_alloc_drop(a);
}

void fc_graph_ref(fc_graph_t *g) { g->refs++; }

void fc_graph_unref(fc_graph_t *g) {
  if (--g->refs > 0) return;
  for (size_t i = 0; i < g->n; i++) {
    fc_node_t *n = g->nodes[i];
    if (n->alloc) {
      /* an allocation still live outlives its graph; a dormant one goes */
      if (n->alloc->live)
        n->alloc->node = NULL;
      else
        fc_graph_alloc_drop(n->alloc);
    }
    if (n->child) {
      /* the embedded graph's handle dies with its node */
      n->child->parent = NULL;
      fc_obj_remove(FC_K_GRAPH, n->child);
      fc_graph_unref(n->child);
    }
    fc_obj_remove(FC_K_NODE, n);
    free(n->deps);
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

CUresult fc_graph_new(fc_graph_t **out_graph) {
  fc_graph_t *g = fc_obj_new(FC_K_GRAPH, sizeof *g);
  if (!g) return CUDA_ERROR_OUT_OF_MEMORY;
  g->refs = 1;
  *out_graph = g;
  return CUDA_SUCCESS;
}

fc_graph_t *fc_graph_find(CUgraph h) { return fc_obj_find(FC_K_GRAPH, h); }
size_t fc_graph_count(const fc_graph_t *g) { return g->n; }

size_t fc_graph_node_index(const fc_graph_t *g, CUgraphNode h) {
  fc_node_t *n = fc_obj_find(FC_K_NODE, h);
  return n && n->graph == g ? n->index : SIZE_MAX;
}

/* Takes `g` and the graphs embedded in it out of the handle table (an
 * executable graph may keep them alive a while). */
static void fc_graph_hide(fc_graph_t *g) {
  fc_obj_remove(FC_K_GRAPH, g);
  for (size_t i = 0; i < g->n; i++)
    if (g->nodes[i]->child) fc_graph_hide(g->nodes[i]->child);
}

void fc_graph_discard(fc_graph_t *g) {
  fc_graph_hide(g);
  fc_graph_unref(g);
}

static CUresult fc_graph_create(CUgraph *phGraph, unsigned int flags) {
  if (!phGraph || flags != 0) return CUDA_ERROR_INVALID_VALUE; /* "flags: must be zero" */
  fc_graph_t *g;
  CUresult rc = fc_graph_new(&g);
  if (rc == CUDA_SUCCESS) *phGraph = (CUgraph)g;
  return rc;
}
/* Graphs belong to no context: no current context needed (the H100). */
FC_EXPORT CUresult cuGraphCreate(CUgraph *phGraph, unsigned int flags) { FC_LOCKED(fc_graph_create(phGraph, flags)); }

static CUresult fc_graph_destroy(CUgraph hGraph) {
  fc_graph_t *g = fc_obj_find(FC_K_GRAPH, hGraph);
  if (!g) return CUDA_ERROR_INVALID_VALUE;        /* NULL (the H100) */
  if (g->parent) return CUDA_ERROR_INVALID_VALUE; /* its child graph node owns it (unconfirmed) */
  fc_graph_discard(g);
  return CUDA_SUCCESS;
}
FC_EXPORT CUresult cuGraphDestroy(CUgraph hGraph) { FC_LOCKED(fc_graph_destroy(hGraph)); }

/* Appends a node of `type` to `g` after the nodes at deps[0..ndeps)
 * (checked by the caller). */
static CUresult fc_node_append(fc_graph_t *g, const size_t *deps, size_t ndeps, CUgraphNodeType type,
                               fc_node_t **out_node) {
  fc_node_t **grown = tsr_array_grow(g->nodes, &g->cap, g->n + 1, sizeof *g->nodes, 8);
  if (!grown) return CUDA_ERROR_OUT_OF_MEMORY;
  g->nodes = grown;
  fc_node_t *n = calloc(1, sizeof *n);
  if (!n) return CUDA_ERROR_OUT_OF_MEMORY;
  if (ndeps > 0 && !(n->deps = malloc(ndeps * sizeof *n->deps))) {
    free(n);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  if (ndeps > 0) memcpy(n->deps, deps, ndeps * sizeof *deps);
  n->ndeps = ndeps;
  n->hdr.kind = FC_K_NODE;
  n->graph = g;
  n->type = type;
  if (!fc_obj_add(FC_K_NODE, n)) {
    free(n->deps);
    free(n);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  n->index = g->n;
  g->nodes[g->n++] = n;
  *out_node = n;
  return CUDA_SUCCESS;
}

/* Undoes the fc_node_append just made (a later step failed). */
static void fc_node_unappend(fc_node_t *n) {
  n->graph->n--;
  fc_obj_remove(FC_K_NODE, n);
  free(n->deps);
  free(n);
}

/* Checks a graph handle and dependency handles (of that graph, no
 * duplicates) and turns the dependencies into indexes (*out_deps, freed by
 * the caller). */
static CUresult fc_node_args(CUgraph hGraph, const CUgraphNode *deps, size_t ndeps, fc_graph_t **out_graph,
                             size_t **out_deps) {
  fc_graph_t *g = fc_obj_find(FC_K_GRAPH, hGraph);
  *out_deps = NULL;
  if (!g || (ndeps > 0 && !deps)) return CUDA_ERROR_INVALID_VALUE;
  if (ndeps > g->n) return CUDA_ERROR_INVALID_VALUE; /* a duplicate at least */
  size_t *idx = ndeps ? malloc(ndeps * sizeof *idx) : NULL;
  if (ndeps && !idx) return CUDA_ERROR_OUT_OF_MEMORY;
  for (size_t i = 0; i < ndeps; i++) {
    idx[i] = fc_graph_node_index(g, deps[i]);
    bool dup = false;
    for (size_t j = 0; j < i && !dup; j++) dup = idx[j] == idx[i];
    if (idx[i] == SIZE_MAX || dup) { /* "may not have any duplicate entries" */
      free(idx);
      return CUDA_ERROR_INVALID_VALUE;
    }
  }
  *out_graph = g;
  *out_deps = idx;
  return CUDA_SUCCESS;
}

static bool fc_deps_valid(const fc_graph_t *g, const size_t *deps, size_t ndeps) {
  for (size_t i = 0; i < ndeps; i++)
    if (deps[i] >= g->n) return false;
  return true;
}

/* ---- memory nodes ------------------------------------------------------------------ */

CUresult fc_graph_add_alloc(fc_graph_t *g, const size_t *deps, size_t ndeps, int dev, size_t bytes,
                            CUdeviceptr *out_dptr, size_t *out_index) {
  if (bytes == 0 || !fc_deps_valid(g, deps, ndeps)) return CUDA_ERROR_INVALID_VALUE;
  /* "Allocation and free nodes cannot be added to the returned graph" (a
   * child graph's; the code is unconfirmed) */
  if (g->parent) return CUDA_ERROR_INVALID_VALUE;
  if (bytes > fake_cuda_state_total(g_fc.state, dev)) return CUDA_ERROR_OUT_OF_MEMORY;
  fc_node_t *n;
  CUresult rc = fc_node_append(g, deps, ndeps, CU_GRAPH_NODE_TYPE_MEM_ALLOC, &n);
  if (rc != CUDA_SUCCESS) return rc;
  /* the address is fixed now; the memory comes with each launch */
  fc_alloc_t *a = fc_alloc_new(FC_A_GRAPH, bytes, true);
  if (!a) {
    fc_node_unappend(n);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  a->dev = dev;
  a->node = n;
  n->alloc = a;
  *out_dptr = (CUdeviceptr)a->base;
  *out_index = n->index;
  return CUDA_SUCCESS;
}

static CUresult fc_add_alloc_node(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *deps, size_t ndeps,
                                  CUDA_MEM_ALLOC_NODE_PARAMS *p) {
  if (!p || p->bytesize == 0 || (p->accessDescCount > 0 && !p->accessDescs)) return CUDA_ERROR_INVALID_VALUE;
  /* a pinned device allocation; a bad ordinal is INVALID_VALUE (the H100) */
  int phys = fc_dev_phys(p->poolProps.location.id);
  if (p->poolProps.allocType != CU_MEM_ALLOCATION_TYPE_PINNED ||
      p->poolProps.location.type != CU_MEM_LOCATION_TYPE_DEVICE || phys < 0)
    return CUDA_ERROR_INVALID_VALUE;
  if (p->bytesize > fake_cuda_state_total(g_fc.state, phys)) return CUDA_ERROR_OUT_OF_MEMORY;
  if (!phGraphNode) return CUDA_ERROR_INVALID_VALUE;
  fc_graph_t *g;
  size_t *idx, at;
  CUresult rc = fc_node_args(hGraph, deps, ndeps, &g, &idx);
  if (rc != CUDA_SUCCESS) return rc;
  CUdeviceptr dptr;
  rc = fc_graph_add_alloc(g, idx, ndeps, phys, p->bytesize, &dptr, &at);
  free(idx);
  if (rc != CUDA_SUCCESS) return rc;
  p->dptr = dptr;
  *phGraphNode = (CUgraphNode)g->nodes[at];
  return CUDA_SUCCESS;
}
FC_EXPORT CUresult cuGraphAddMemAllocNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                          size_t numDependencies, CUDA_MEM_ALLOC_NODE_PARAMS *nodeParams) {
  FC_LOCKED(fc_add_alloc_node(phGraphNode, hGraph, dependencies, numDependencies, nodeParams));
}

CUresult fc_graph_add_free(fc_graph_t *g, const size_t *deps, size_t ndeps, CUdeviceptr dptr, size_t *out_index) {
  /* "an address that was not returned by an allocation node", "an
   * allocation twice in the same graph": CUDA_ERROR_INVALID_VALUE */
  fc_alloc_t *a = fc_alloc_at((uintptr_t)dptr);
  if (!a || a->kind != FC_A_GRAPH || g->parent || !fc_deps_valid(g, deps, ndeps)) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < g->n; i++)
    if (g->nodes[i]->frees == a) return CUDA_ERROR_INVALID_VALUE;
  fc_node_t *n;
  CUresult rc = fc_node_append(g, deps, ndeps, CU_GRAPH_NODE_TYPE_MEM_FREE, &n);
  if (rc != CUDA_SUCCESS) return rc;
  n->frees = a;
  *out_index = n->index;
  return CUDA_SUCCESS;
}

static CUresult fc_add_free_node(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *deps, size_t ndeps,
                                 CUdeviceptr dptr) {
  fc_alloc_t *a = fc_alloc_at((uintptr_t)dptr);
  if (!a || a->kind != FC_A_GRAPH || !phGraphNode) return CUDA_ERROR_INVALID_VALUE;
  fc_graph_t *g;
  size_t *idx, at;
  CUresult rc = fc_node_args(hGraph, deps, ndeps, &g, &idx);
  if (rc != CUDA_SUCCESS) return rc;
  rc = fc_graph_add_free(g, idx, ndeps, dptr, &at);
  free(idx);
  if (rc == CUDA_SUCCESS) *phGraphNode = (CUgraphNode)g->nodes[at];
  return rc;
}
FC_EXPORT CUresult cuGraphAddMemFreeNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                         size_t numDependencies, CUdeviceptr dptr) {
  FC_LOCKED(fc_add_free_node(phGraphNode, hGraph, dependencies, numDependencies, dptr));
}

/* ---- kernel, empty and child graph nodes --------------------------------------------- */

CUresult fc_graph_add_kernel(fc_graph_t *g, const size_t *deps, size_t ndeps, const fc_kparams_t *k,
                             size_t *out_index) {
  if (!fc_deps_valid(g, deps, ndeps)) return CUDA_ERROR_INVALID_VALUE;
  fc_node_t *n;
  CUresult rc = fc_node_append(g, deps, ndeps, CU_GRAPH_NODE_TYPE_KERNEL, &n);
  if (rc != CUDA_SUCCESS) return rc;
  n->k = *k;
  *out_index = n->index;
  return CUDA_SUCCESS;
}

/* A kernel node's parameters: func, or kern when func is NULL (the CUDA 12
 * form); the context is the function's. A bad function is `bad_func`. */
static CUresult fc_kparams_read(const CUDA_KERNEL_NODE_PARAMS *p, CUresult bad_func, fc_kparams_t *out_k) {
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  /* "kernelParams and extra both non-NULL: CUDA_ERROR_INVALID_VALUE" */
  if (p->kernelParams && p->extra) return CUDA_ERROR_INVALID_VALUE;
  CUfunction f = p->func ? p->func : (CUfunction)p->kern;
  if (!f) return CUDA_ERROR_INVALID_HANDLE; /* neither: the H100 */
  unsigned grid[3] = {p->gridDimX, p->gridDimY, p->gridDimZ};
  unsigned block[3] = {p->blockDimX, p->blockDimY, p->blockDimZ};
  CUresult rc = fc_kernel_config(f, grid, block, p->sharedMemBytes, out_k);
  return rc == CUDA_ERROR_INVALID_HANDLE ? bad_func : rc;
}

/* The CUDA 10 form (no kern, no ctx). */
static CUDA_KERNEL_NODE_PARAMS fc_kparams_v1(const CUDA_KERNEL_NODE_PARAMS_v1 *p) {
  return (CUDA_KERNEL_NODE_PARAMS){.func = p->func,
                                   .gridDimX = p->gridDimX,
                                   .gridDimY = p->gridDimY,
                                   .gridDimZ = p->gridDimZ,
                                   .blockDimX = p->blockDimX,
                                   .blockDimY = p->blockDimY,
                                   .blockDimZ = p->blockDimZ,
                                   .sharedMemBytes = p->sharedMemBytes,
                                   .kernelParams = p->kernelParams,
                                   .extra = p->extra};
}

static CUresult fc_add_kernel_node(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *deps, size_t ndeps,
                                   const CUDA_KERNEL_NODE_PARAMS *p) {
  if (!phGraphNode) return CUDA_ERROR_INVALID_VALUE;
  fc_kparams_t k;
  /* the reference lists CUDA_ERROR_INVALID_VALUE only (unconfirmed) */
  CUresult rc = fc_kparams_read(p, CUDA_ERROR_INVALID_VALUE, &k);
  if (rc != CUDA_SUCCESS) return rc;
  fc_graph_t *g;
  size_t *idx, at;
  if ((rc = fc_node_args(hGraph, deps, ndeps, &g, &idx)) != CUDA_SUCCESS) return rc;
  rc = fc_graph_add_kernel(g, idx, ndeps, &k, &at);
  free(idx);
  if (rc == CUDA_SUCCESS) *phGraphNode = (CUgraphNode)g->nodes[at];
  return rc;
}
FC_EXPORT CUresult cuGraphAddKernelNode_v2(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                           size_t numDependencies, const CUDA_KERNEL_NODE_PARAMS *nodeParams) {
  FC_LOCKED(fc_add_kernel_node(phGraphNode, hGraph, dependencies, numDependencies, nodeParams));
}
FC_EXPORT CUresult cuGraphAddKernelNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                        size_t numDependencies, const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams) {
  CUDA_KERNEL_NODE_PARAMS p;
  if (nodeParams) p = fc_kparams_v1(nodeParams);
  FC_LOCKED(fc_add_kernel_node(phGraphNode, hGraph, dependencies, numDependencies, nodeParams ? &p : NULL));
}

/* A kernel node of some graph, or NULL. */
static fc_node_t *fc_kernel_node(CUgraphNode h) {
  fc_node_t *n = fc_obj_find(FC_K_NODE, h);
  return n && n->type == CU_GRAPH_NODE_TYPE_KERNEL ? n : NULL;
}

static void fc_kparams_write(const fc_kparams_t *k, CUDA_KERNEL_NODE_PARAMS *p) {
  *p = (CUDA_KERNEL_NODE_PARAMS){.func = k->func,
                                 .gridDimX = k->grid[0],
                                 .gridDimY = k->grid[1],
                                 .gridDimZ = k->grid[2],
                                 .blockDimX = k->block[0],
                                 .blockDimY = k->block[1],
                                 .blockDimZ = k->block[2],
                                 .sharedMemBytes = k->shmem};
}

static CUresult fc_kernel_node_get(CUgraphNode hNode, CUDA_KERNEL_NODE_PARAMS *p) {
  fc_node_t *n = fc_kernel_node(hNode);
  if (!n || !p) return CUDA_ERROR_INVALID_VALUE;
  fc_kparams_write(&n->k, p);
  return CUDA_SUCCESS;
}
FC_EXPORT CUresult cuGraphKernelNodeGetParams_v2(CUgraphNode hNode, CUDA_KERNEL_NODE_PARAMS *nodeParams) {
  FC_LOCKED(fc_kernel_node_get(hNode, nodeParams));
}
FC_EXPORT CUresult cuGraphKernelNodeGetParams(CUgraphNode hNode, CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams) {
  CUDA_KERNEL_NODE_PARAMS p;
  CUresult rc = fc_ready();
  if (rc != CUDA_SUCCESS) return rc;
  if (!nodeParams) return CUDA_ERROR_INVALID_VALUE;
  fc_lock();
  rc = fc_kernel_node_get(hNode, &p);
  fc_unlock();
  if (rc == CUDA_SUCCESS) memcpy(nodeParams, &p, sizeof *nodeParams); /* v1: v2's first fields */
  return rc;
}

static CUresult fc_kernel_node_set(CUgraphNode hNode, const CUDA_KERNEL_NODE_PARAMS *p) {
  fc_node_t *n = fc_kernel_node(hNode);
  if (!n) return CUDA_ERROR_INVALID_VALUE;
  fc_kparams_t k;
  /* the reference lists CUDA_ERROR_INVALID_HANDLE here (unconfirmed) */
  CUresult rc = fc_kparams_read(p, CUDA_ERROR_INVALID_HANDLE, &k);
  if (rc == CUDA_SUCCESS) n->k = k;
  return rc;
}
FC_EXPORT CUresult cuGraphKernelNodeSetParams_v2(CUgraphNode hNode, const CUDA_KERNEL_NODE_PARAMS *nodeParams) {
  FC_LOCKED(fc_kernel_node_set(hNode, nodeParams));
}
FC_EXPORT CUresult cuGraphKernelNodeSetParams(CUgraphNode hNode, const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams) {
  CUDA_KERNEL_NODE_PARAMS p;
  if (nodeParams) p = fc_kparams_v1(nodeParams);
  FC_LOCKED(fc_kernel_node_set(hNode, nodeParams ? &p : NULL));
}

static CUresult fc_add_empty_node(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *deps, size_t ndeps) {
  if (!phGraphNode) return CUDA_ERROR_INVALID_VALUE;
  fc_graph_t *g;
  size_t *idx;
  CUresult rc = fc_node_args(hGraph, deps, ndeps, &g, &idx);
  if (rc != CUDA_SUCCESS) return rc;
  fc_node_t *n;
  rc = fc_node_append(g, idx, ndeps, CU_GRAPH_NODE_TYPE_EMPTY, &n);
  free(idx);
  if (rc == CUDA_SUCCESS) *phGraphNode = (CUgraphNode)n;
  return rc;
}
FC_EXPORT CUresult cuGraphAddEmptyNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                       size_t numDependencies) {
  FC_LOCKED(fc_add_empty_node(phGraphNode, hGraph, dependencies, numDependencies));
}

/* Whether `g` or a graph embedded in it has memory nodes. */
static bool fc_graph_has_memory(const fc_graph_t *g) {
  for (size_t i = 0; i < g->n; i++) {
    const fc_node_t *n = g->nodes[i];
    if (n->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC || n->type == CU_GRAPH_NODE_TYPE_MEM_FREE) return true;
    if (n->child && fc_graph_has_memory(n->child)) return true;
  }
  return false;
}

static unsigned fc_graph_depth(const fc_graph_t *g) {
  unsigned d = 0;
  for (size_t i = 0; i < g->n; i++)
    if (g->nodes[i]->child) {
      unsigned c = 1 + fc_graph_depth(g->nodes[i]->child);
      if (c > d) d = c;
    }
  return d;
}

/* Fills `dst` (empty) with a copy of the nodes of `src` (which has no memory
 * nodes), child graphs copied too. */
static CUresult fc_graph_copy_into(fc_graph_t *dst, const fc_graph_t *src) {
  for (size_t i = 0; i < src->n; i++) {
    const fc_node_t *s = src->nodes[i];
    fc_node_t *n;
    CUresult rc = fc_node_append(dst, s->deps, s->ndeps, s->type, &n);
    if (rc != CUDA_SUCCESS) return rc;
    n->k = s->k;
    if (s->child) {
      fc_graph_t *c;
      if ((rc = fc_graph_new(&c)) != CUDA_SUCCESS) return rc;
      c->parent = n;
      n->child = c;
      if ((rc = fc_graph_copy_into(c, s->child)) != CUDA_SUCCESS) return rc;
    }
  }
  return CUDA_SUCCESS;
}

static CUresult fc_add_child_node(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *deps, size_t ndeps,
                                  CUgraph childGraph) {
  fc_graph_t *child = fc_obj_find(FC_K_GRAPH, childGraph);
  if (!phGraphNode || !child) return CUDA_ERROR_INVALID_VALUE;
  /* "If childGraph contains allocation nodes, free nodes, or conditional
   * nodes, this call will return an error": CUDA_ERROR_NOT_SUPPORTED (the H100) */
  if (fc_graph_has_memory(child) || fc_graph_depth(child) >= FC_GRAPH_DEPTH_MAX) return CUDA_ERROR_NOT_SUPPORTED;
  fc_graph_t *g;
  size_t *idx;
  CUresult rc = fc_node_args(hGraph, deps, ndeps, &g, &idx);
  if (rc != CUDA_SUCCESS) return rc;
  fc_graph_t *copy;
  if ((rc = fc_graph_new(&copy)) != CUDA_SUCCESS) {
    free(idx);
    return rc;
  }
  /* cloned before the node joins `g`: a graph may embed a copy of itself */
  if ((rc = fc_graph_copy_into(copy, child)) != CUDA_SUCCESS) {
    fc_graph_discard(copy);
    free(idx);
    return rc;
  }
  fc_node_t *n;
  rc = fc_node_append(g, idx, ndeps, CU_GRAPH_NODE_TYPE_GRAPH, &n);
  free(idx);
  if (rc != CUDA_SUCCESS) {
    fc_graph_discard(copy);
    return rc;
  }
  copy->parent = n;
  n->child = copy;
  *phGraphNode = (CUgraphNode)n;
  return CUDA_SUCCESS;
}
FC_EXPORT CUresult cuGraphAddChildGraphNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                            size_t numDependencies, CUgraph childGraph) {
  FC_LOCKED(fc_add_child_node(phGraphNode, hGraph, dependencies, numDependencies, childGraph));
}

/* The embedded graph itself, not a copy: what is added to it is in the node. */
static CUresult fc_child_graph_get(CUgraphNode hNode, CUgraph *phGraph) {
  fc_node_t *n = fc_obj_find(FC_K_NODE, hNode);
  if (!n || !n->child || !phGraph) return CUDA_ERROR_INVALID_VALUE;
  *phGraph = (CUgraph)n->child;
  return CUDA_SUCCESS;
}
FC_EXPORT CUresult cuGraphChildGraphNodeGetGraph(CUgraphNode hNode, CUgraph *phGraph) {
  FC_LOCKED(fc_child_graph_get(hNode, phGraph));
}

/* "nodes may be NULL, in which case this function will return the number
 * of nodes in numNodes. Otherwise, numNodes entries will be filled in. If
 * numNodes is higher than the actual number of nodes, the remaining entries
 * in nodes will be set to NULL, and the number of nodes actually obtained
 * will be returned in numNodes." */
static CUresult fc_graph_get_nodes(CUgraph hGraph, CUgraphNode *nodes, size_t *numNodes) {
  fc_graph_t *g = fc_obj_find(FC_K_GRAPH, hGraph);
  if (!g || !numNodes) return CUDA_ERROR_INVALID_VALUE;
  if (!nodes) {
    *numNodes = g->n;
    return CUDA_SUCCESS;
  }
  for (size_t i = 0; i < *numNodes; i++) nodes[i] = i < g->n ? (CUgraphNode)g->nodes[i] : NULL;
  if (*numNodes > g->n) *numNodes = g->n;
  return CUDA_SUCCESS;
}
FC_EXPORT CUresult cuGraphGetNodes(CUgraph hGraph, CUgraphNode *nodes, size_t *numNodes) {
  FC_LOCKED(fc_graph_get_nodes(hGraph, nodes, numNodes));
}

static CUresult fc_node_get_type(CUgraphNode hNode, CUgraphNodeType *type) {
  fc_node_t *n = fc_obj_find(FC_K_NODE, hNode);
  if (!n || !type) return CUDA_ERROR_INVALID_VALUE;
  *type = n->type;
  return CUDA_SUCCESS;
}
FC_EXPORT CUresult cuGraphNodeGetType(CUgraphNode hNode, CUgraphNodeType *type) {
  FC_LOCKED(fc_node_get_type(hNode, type));
}

/* What cuGraphAddMemAllocNode (or a captured stream-ordered allocation)
 * made the node of: a pinned allocation on a device, its size and address.
 * The access descriptors are not kept (none returned). Any other node, or
 * none: CUDA_ERROR_INVALID_VALUE (the reference's only error; unconfirmed). */
static CUresult fc_alloc_node_get(CUgraphNode hNode, CUDA_MEM_ALLOC_NODE_PARAMS *out) {
  fc_node_t *n = fc_obj_find(FC_K_NODE, hNode);
  if (!n || n->type != CU_GRAPH_NODE_TYPE_MEM_ALLOC || !n->alloc || !out) return CUDA_ERROR_INVALID_VALUE;
  memset(out, 0, sizeof *out);
  out->poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  out->poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  out->poolProps.location.id = fc_dev_ordinal(n->alloc->dev);
  out->bytesize = n->alloc->size;
  out->dptr = (CUdeviceptr)n->alloc->base;
  return CUDA_SUCCESS;
}
FC_EXPORT CUresult cuGraphMemAllocNodeGetParams(CUgraphNode hNode, CUDA_MEM_ALLOC_NODE_PARAMS *params_out) {
  FC_LOCKED(fc_alloc_node_get(hNode, params_out));
}

/* ---- executable graphs ------------------------------------------------------------- */

/* Appends the nodes of `g` to x[0..*n), pre-order: a child graph node, then
 * its embedded graph's nodes. */
static CUresult fc_flatten(const fc_graph_t *g, fc_xnode_t **x, size_t *n, size_t *cap) {
  for (size_t i = 0; i < g->n; i++) {
    fc_node_t *node = g->nodes[i];
    fc_xnode_t *grown = tsr_array_grow(*x, cap, *n + 1, sizeof **x, 16);
    if (!grown) return CUDA_ERROR_OUT_OF_MEMORY;
    *x = grown;
    (*x)[(*n)++] =
        (fc_xnode_t){.node = node, .type = node->type, .count = node->child ? node->child->n : 0, .k = node->k};
    if (node->child) {
      CUresult rc = fc_flatten(node->child, x, n, cap);
      if (rc != CUDA_SUCCESS) return rc;
    }
  }
  return CUDA_SUCCESS;
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
  e->ntop = g->n;
  if ((rc = fc_flatten(g, &e->x, &e->nx, &e->capx)) != CUDA_SUCCESS || !fc_obj_add(FC_K_EXEC, e)) {
    free(e->x);
    free(e);
    return rc != CUDA_SUCCESS ? rc : CUDA_ERROR_OUT_OF_MEMORY;
  }
  fc_graph_ref(g);
  *phGraphExec = (CUgraphExec)e;
  return CUDA_SUCCESS;
}
FC_EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph, unsigned long long flags) {
  FC_LOCKED(fc_instantiate(phGraphExec, hGraph, flags));
}

/* CUDA 10's signature, kept by cuGraphInstantiate and cuGraphInstantiate_v2
 * (what cuGetProcAddress("cuGraphInstantiate") gives at CUDA 11.0 and up on
 * the H100). No error node or log is ever produced. */
static CUresult fc_instantiate_v1(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode, char *logBuffer,
                                  size_t bufferSize) {
  if (phErrorNode) *phErrorNode = NULL;
  if (logBuffer && bufferSize > 0) logBuffer[0] = '\0';
  return fc_instantiate(phGraphExec, hGraph, 0);
}
FC_EXPORT CUresult cuGraphInstantiate(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode,
                                      char *logBuffer, size_t bufferSize) {
  FC_LOCKED(fc_instantiate_v1(phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize));
}
FC_EXPORT CUresult cuGraphInstantiate_v2(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode,
                                         char *logBuffer, size_t bufferSize) {
  FC_LOCKED(fc_instantiate_v1(phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize));
}

static CUresult fc_exec_destroy(CUgraphExec hGraphExec);
static CUresult fc_graph_upload(CUgraphExec hGraphExec, CUstream hStream);

/* CUDA 12's form: the flags, an upload stream and the result in one
 * structure. With CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD the new executable
 * graph is uploaded to hUploadStream (NULL: the legacy stream, or the
 * per-thread one through the _ptsz entry); if that fails no executable
 * graph is left (unconfirmed). DEVICE_LAUNCH with AUTO_FREE_ON_LAUNCH is
 * refused ("cannot be used in conjunction"; the code is unconfirmed). */
static CUresult fc_instantiate_params(CUgraphExec *phGraphExec, CUgraph hGraph, CUDA_GRAPH_INSTANTIATE_PARAMS *p,
                                      bool ptsz) {
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  p->hErrNode_out = NULL;
  p->result_out = CUDA_GRAPH_INSTANTIATE_ERROR;
  const cuuint64_t both = CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH | CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH;
  if ((p->flags & both) == both) return CUDA_ERROR_INVALID_VALUE;
  CUresult rc = fc_instantiate(phGraphExec, hGraph, p->flags);
  if (rc != CUDA_SUCCESS) return rc;
  if (p->flags & CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD) {
    rc = fc_graph_upload(*phGraphExec, ptsz ? fc_ptsz(p->hUploadStream) : p->hUploadStream);
    if (rc != CUDA_SUCCESS) {
      fc_exec_destroy(*phGraphExec);
      return rc;
    }
  }
  p->result_out = CUDA_GRAPH_INSTANTIATE_SUCCESS;
  return CUDA_SUCCESS;
}
FC_EXPORT CUresult cuGraphInstantiateWithParams(CUgraphExec *phGraphExec, CUgraph hGraph,
                                                CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams) {
  FC_LOCKED(fc_instantiate_params(phGraphExec, hGraph, instantiateParams, false));
}
FC_EXPORT CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec *phGraphExec, CUgraph hGraph,
                                                     CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams) {
  FC_LOCKED(fc_instantiate_params(phGraphExec, hGraph, instantiateParams, true));
}

static CUresult fc_exec_destroy(CUgraphExec hGraphExec) {
  fc_exec_t *e = fc_obj_find(FC_K_EXEC, hGraphExec);
  if (!e) return CUDA_ERROR_INVALID_VALUE; /* NULL (the H100) */
  fc_obj_remove(FC_K_EXEC, e);
  fc_graph_unref(e->graph);
  free(e->x);
  free(e);
  return CUDA_SUCCESS;
}
FC_EXPORT CUresult cuGraphExecDestroy(CUgraphExec hGraphExec) { FC_LOCKED(fc_exec_destroy(hGraphExec)); }

/* hNode: a kernel node of the graph the executable graph was made from (or
 * of a graph embedded in it). */
static CUresult fc_exec_kernel_set(CUgraphExec hGraphExec, CUgraphNode hNode, const CUDA_KERNEL_NODE_PARAMS *p) {
  fc_exec_t *e = fc_obj_find(FC_K_EXEC, hGraphExec);
  if (!e || !hNode) return CUDA_ERROR_INVALID_VALUE;
  fc_xnode_t *x = NULL;
  for (size_t i = 0; i < e->nx && !x; i++)
    if ((CUgraphNode)e->x[i].node == hNode && e->x[i].type == CU_GRAPH_NODE_TYPE_KERNEL) x = &e->x[i];
  if (!x) return CUDA_ERROR_INVALID_VALUE;
  fc_kparams_t k;
  CUresult rc = fc_kparams_read(p, CUDA_ERROR_INVALID_VALUE, &k); /* INVALID_VALUE only: unconfirmed */
  if (rc == CUDA_SUCCESS) x->k = k;
  return rc;
}
FC_EXPORT CUresult cuGraphExecKernelNodeSetParams_v2(CUgraphExec hGraphExec, CUgraphNode hNode,
                                                     const CUDA_KERNEL_NODE_PARAMS *nodeParams) {
  FC_LOCKED(fc_exec_kernel_set(hGraphExec, hNode, nodeParams));
}
FC_EXPORT CUresult cuGraphExecKernelNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                                  const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams) {
  CUDA_KERNEL_NODE_PARAMS p;
  if (nodeParams) p = fc_kparams_v1(nodeParams);
  FC_LOCKED(fc_exec_kernel_set(hGraphExec, hNode, nodeParams ? &p : NULL));
}

/* Pairs the executable graph's nodes with `g`'s in the order they were
 * added (the docs' rules, by that pairing): the same number of nodes
 * directly in each (else TOPOLOGY_CHANGED, errorNode NULL), the same kinds
 * (NODE_TYPE_CHANGED), the same dependencies (TOPOLOGY_CHANGED, errorNode
 * and errorFromNode from `g`), recursively in child graphs. Memory nodes
 * cannot be updated (NOT_SUPPORTED; unconfirmed). On success the kernels'
 * parameters are `g`'s. */
static CUresult fc_exec_update(CUgraphExec hGraphExec, CUgraph hGraph, CUgraphExecUpdateResultInfo *info) {
  if (!info) return CUDA_ERROR_INVALID_VALUE;
  *info = (CUgraphExecUpdateResultInfo){.result = CU_GRAPH_EXEC_UPDATE_ERROR};
  fc_exec_t *e = fc_obj_find(FC_K_EXEC, hGraphExec);
  fc_graph_t *g = fc_obj_find(FC_K_GRAPH, hGraph);
  if (!e || !g) return CUDA_ERROR_INVALID_VALUE;
  if (g->n != e->ntop) {
    info->result = CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
    return CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
  }
  fc_xnode_t *x = NULL;
  size_t nx = 0, capx = 0;
  CUresult rc = fc_flatten(g, &x, &nx, &capx);
  if (rc != CUDA_SUCCESS) {
    free(x);
    return rc;
  }
  CUgraphExecUpdateResult result = CU_GRAPH_EXEC_UPDATE_SUCCESS;
  /* the counts are checked before each child graph is walked, so the two
   * flattened lists stay aligned */
  for (size_t i = 0; i < e->nx && i < nx && result == CU_GRAPH_EXEC_UPDATE_SUCCESS; i++) {
    const fc_xnode_t *a = &e->x[i], *b = &x[i];
    info->errorNode = (CUgraphNode)b->node;
    if (a->type != b->type) {
      result = CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED;
    } else if (a->node->ndeps != b->node->ndeps) {
      result = CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
    } else if (a->type == CU_GRAPH_NODE_TYPE_GRAPH && a->count != b->count) {
      result = CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
    } else if (a->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC || a->type == CU_GRAPH_NODE_TYPE_MEM_FREE) {
      result = CU_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED;
    } else {
      for (size_t d = 0; d < a->node->ndeps && result == CU_GRAPH_EXEC_UPDATE_SUCCESS; d++)
        if (a->node->deps[d] != b->node->deps[d]) {
          result = CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
          info->errorFromNode = (CUgraphNode)b->node->graph->nodes[b->node->deps[d]];
        }
    }
  }
  if (result == CU_GRAPH_EXEC_UPDATE_SUCCESS && nx != e->nx) result = CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
  if (result == CU_GRAPH_EXEC_UPDATE_SUCCESS) {
    for (size_t i = 0; i < nx; i++)
      if (x[i].type == CU_GRAPH_NODE_TYPE_KERNEL) e->x[i].k = x[i].k;
    info->errorNode = NULL;
  }
  free(x);
  info->result = result;
  return result == CU_GRAPH_EXEC_UPDATE_SUCCESS ? CUDA_SUCCESS : CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
}
FC_EXPORT CUresult cuGraphExecUpdate_v2(CUgraphExec hGraphExec, CUgraph hGraph,
                                        CUgraphExecUpdateResultInfo *resultInfo) {
  FC_LOCKED(fc_exec_update(hGraphExec, hGraph, resultInfo));
}
/* CUDA 10.2's form: the error node and the result apart. */
FC_EXPORT CUresult cuGraphExecUpdate(CUgraphExec hGraphExec, CUgraph hGraph, CUgraphNode *hErrorNode_out,
                                     CUgraphExecUpdateResult *updateResult_out) {
  CUgraphExecUpdateResultInfo info;
  CUresult rc = fc_ready();
  if (rc != CUDA_SUCCESS) return rc;
  if (!hErrorNode_out || !updateResult_out) return CUDA_ERROR_INVALID_VALUE;
  fc_lock();
  rc = fc_exec_update(hGraphExec, hGraph, &info);
  fc_unlock();
  *hErrorNode_out = info.errorNode;
  *updateResult_out = info.result;
  return rc;
}

/* ---- launches ----------------------------------------------------------------------- */

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

/* Launching into a capturing stream is not emulated (the real driver may
 * capture it as a child graph): CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, and
 * the capture is invalidated (unconfirmed). */
static CUresult fc_graph_launch(CUgraphExec hGraphExec, CUstream hStream) {
  fc_exec_t *e = fc_obj_find(FC_K_EXEC, hGraphExec);
  if (!e) return CUDA_ERROR_INVALID_VALUE; /* NULL (the H100) */
  fc_stream_t *s;
  CUresult rc = fc_stream_get(hStream, &s);
  if (rc != CUDA_SUCCESS) return rc;
  struct fc_capture *cap;
  if ((rc = fc_capture_submit(s, &cap)) != CUDA_SUCCESS) return rc;
  if (cap) {
    fc_capture_invalidate(s);
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  /* "If any allocations created by hGraphExec remain unfreed ... the launch
   * will fail with CUDA_ERROR_INVALID_VALUE" (the H100 too); memory nodes
   * are never in child graphs */
  for (size_t i = 0; i < e->nx; i++) {
    fc_alloc_t *a = e->x[i].node->alloc;
    if (!a || !a->live) continue;
    if (!(e->flags & CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH)) return CUDA_ERROR_INVALID_VALUE;
  }
  for (size_t i = 0; i < e->nx; i++) {
    fc_alloc_t *a = e->x[i].node->alloc;
    if (a && a->live) fc_graph_alloc_freed(a); /* auto free on launch */
  }
  uint64_t ns = 0;
  for (size_t i = 0; i < e->nx; i++) {
    fc_node_t *n = e->x[i].node;
    if (e->x[i].type == CU_GRAPH_NODE_TYPE_KERNEL) {
      ns += e->x[i].k.ns;
      if (ns > FC_WORK_NS_MAX) ns = FC_WORK_NS_MAX;
    } else if (n->alloc) {
      if ((rc = fc_graph_take(n->alloc->dev, n->alloc->size)) != CUDA_SUCCESS) {
        /* out of memory: undo what this launch allocated */
        for (size_t j = 0; j < i; j++) {
          fc_alloc_t *a = e->x[j].node->alloc;
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
  fc_timeline_run(s, ns); /* its kernels, one after another */
  return CUDA_SUCCESS;
}
/* "Uses memory cached by stream to back the allocations owned by
 * hGraphExec": the device's graph memory cache grows, now, by what the
 * executable graph's allocations that are not live lack (charged to the
 * device, out of memory if it cannot), and the launches that follow take
 * from it without growing it. No kernel runs. Into a capturing stream:
 * CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, the capture invalidated, as a
 * launch. The model is the reference's sentence, not a measurement
 * (unconfirmed). */
static CUresult fc_graph_upload(CUgraphExec hGraphExec, CUstream hStream) {
  fc_exec_t *e = fc_obj_find(FC_K_EXEC, hGraphExec);
  if (!e) return CUDA_ERROR_INVALID_VALUE;
  fc_stream_t *s;
  CUresult rc = fc_stream_get(hStream, &s);
  if (rc != CUDA_SUCCESS) return rc;
  struct fc_capture *cap;
  if ((rc = fc_capture_submit(s, &cap)) != CUDA_SUCCESS) return rc;
  if (cap) {
    fc_capture_invalidate(s);
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  uint64_t need[FAKE_CUDA_MAX_DEVICES] = {0};
  for (size_t i = 0; i < e->nx; i++) {
    fc_alloc_t *a = e->x[i].node->alloc;
    if (a && !a->live) need[a->dev] += a->size;
  }
  for (int dev = 0; dev < FAKE_CUDA_MAX_DEVICES; dev++) {
    uint64_t avail = g_fc.graph_reserved[dev] - g_fc.graph_used[dev];
    if (need[dev] <= avail) continue;
    if ((rc = fc_charge(dev, need[dev] - avail)) != CUDA_SUCCESS) return rc;
    g_fc.graph_reserved[dev] += need[dev] - avail;
  }
  return CUDA_SUCCESS;
}
FC_EXPORT CUresult cuGraphUpload(CUgraphExec hGraphExec, CUstream hStream) {
  FC_LOCKED(fc_graph_upload(hGraphExec, hStream));
}
FC_EXPORT CUresult cuGraphUpload_ptsz(CUgraphExec hGraphExec, CUstream hStream) {
  FC_LOCKED(fc_graph_upload(hGraphExec, fc_ptsz(hStream)));
}

FC_EXPORT CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream) {
  FC_LOCKED(fc_graph_launch(hGraphExec, hStream));
}
FC_EXPORT CUresult cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream) {
  FC_LOCKED(fc_graph_launch(hGraphExec, fc_ptsz(hStream)));
}

/* ---- the graph memory cache -------------------------------------------------------- */

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
    case CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT: *(cuuint64_t *)value = g_fc.graph_reserved[phys]; break;
    default: return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}
FC_EXPORT CUresult cuDeviceGetGraphMemAttribute(CUdevice device, CUgraphMem_attribute attr, void *value) {
  FC_LOCKED(fc_graph_mem_attr(device, attr, value));
}
