/* unit.fakecuda_graphs: kernel, empty and child graph nodes; an executable
 * graph keeps the kernel parameters it was instantiated with, runs its
 * kernels (child graphs included) one after another, and takes new ones
 * from cuGraphExecKernelNodeSetParams and cuGraphExecUpdate, which refuses a
 * graph of another shape as the real driver does. */
#include <dlfcn.h>
#include <string.h>

#include "fc_time.h"

static CUDA_KERNEL_NODE_PARAMS kparams(CUfunction f, unsigned grid, unsigned threads) {
  CUDA_KERNEL_NODE_PARAMS p;
  memset(&p, 0, sizeof p);
  p.func = f;
  p.gridDimX = grid;
  p.gridDimY = p.gridDimZ = 1;
  p.blockDimX = threads;
  p.blockDimY = p.blockDimZ = 1;
  return p;
}

/* The simulated milliseconds of one launch of `e`. */
static float graph_ms(const fc_kernels_t *k, CUgraphExec e) {
  CUstream s;
  CUevent a, b;
  CU_OK(cuStreamCreate(&s, 0));
  CU_OK(cuEventCreate(&a, 0));
  CU_OK(cuEventCreate(&b, 0));
  fc_measure_begin(k, s, a);
  CU_OK(cuGraphLaunch(e, s));
  CU_OK(cuEventRecord(b, s));
  float ms = fc_elapsed(a, b);
  CU_OK(cuStreamDestroy(s));
  return ms;
}

static CUgraphNodeType type_of(CUgraphNode n) {
  CUgraphNodeType t = (CUgraphNodeType)99;
  CU_OK(cuGraphNodeGetType(n, &t));
  return t;
}

Test(graphs, kernel_nodes) {
  fc_start("8GiB", "0");
  fc_kernels_t k = fc_kernels();
  CUgraph g;
  CU_OK(cuGraphCreate(&g, 0));
  CUDA_KERNEL_NODE_PARAMS p = kparams(k.spin2ms, 4, 64), bad, got;
  CUgraphNode k1, k2, x;
  CU_OK(cuGraphAddKernelNode(&k1, g, NULL, 0, &p));
  cr_assert_eq(type_of(k1), CU_GRAPH_NODE_TYPE_KERNEL);
  CU_OK(cuGraphAddKernelNode(&k2, g, &k1, 1, &p));
  CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuGraphAddKernelNode(&x, g, NULL, 0, NULL));
  bad = p;
  bad.gridDimX = 0;
  CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuGraphAddKernelNode(&x, g, NULL, 0, &bad));
  bad = p;
  bad.blockDimX = 2048;
  CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuGraphAddKernelNode(&x, g, NULL, 0, &bad));
  bad = p;
  bad.func = NULL;
  CU_EXPECT(CUDA_ERROR_INVALID_HANDLE, cuGraphAddKernelNode(&x, g, NULL, 0, &bad));
  bad = p;
  bad.func = NULL;
  bad.kern = (CUkernel)k.spin20ms; /* the CUDA 12 form: kern when func is NULL */
  CU_OK(cuGraphAddKernelNode(&x, g, NULL, 0, &bad));
  CUgraphNode dup[2] = {k1, k1};
  CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuGraphAddKernelNode(&x, g, dup, 2, &p));
  CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuGraphAddKernelNode(&x, g, NULL, 1, &p));
  CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuGraphAddKernelNode(&x, NULL, NULL, 0, &p));
  CU_OK(cuGraphKernelNodeGetParams(k1, &got));
  cr_assert(got.func == k.spin2ms && got.gridDimX == 4 && got.blockDimX == 64 && got.gridDimY == 1);
  cr_assert(got.kernelParams == NULL && got.extra == NULL, "arguments are not kept");
  p.gridDimX = 8;
  CU_OK(cuGraphKernelNodeSetParams(k1, &p));
  CU_OK(cuGraphKernelNodeGetParams(k1, &got));
  cr_assert_eq(got.gridDimX, 8);
  bad = p;
  bad.func = (CUfunction)&got;
  CU_EXPECT(CUDA_ERROR_INVALID_HANDLE, cuGraphKernelNodeSetParams(k1, &bad));
  CU_OK(cuGraphKernelNodeGetParams(k1, &got));
  cr_assert_eq(got.gridDimX, 8, "a refused set changes nothing");
  CUgraphNode en;
  CU_OK(cuGraphAddEmptyNode(&en, g, &k2, 1));
  cr_assert_eq(type_of(en), CU_GRAPH_NODE_TYPE_EMPTY);
  CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuGraphKernelNodeGetParams(en, &got));
  CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuGraphKernelNodeSetParams(en, &p));
  CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuGraphNodeGetType(NULL, &(CUgraphNodeType){0}));
  /* the CUDA 10 entries (no kern, no ctx) */
  typedef CUresult (*add_v1_t)(CUgraphNode *, CUgraph, const CUgraphNode *, size_t, const CUDA_KERNEL_NODE_PARAMS_v1 *);
  add_v1_t add_v1 = (add_v1_t)dlsym(RTLD_DEFAULT, "cuGraphAddKernelNode");
  CUresult (*get_v1)(CUgraphNode, CUDA_KERNEL_NODE_PARAMS_v1 *) =
      (CUresult(*)(CUgraphNode, CUDA_KERNEL_NODE_PARAMS_v1 *))dlsym(RTLD_DEFAULT, "cuGraphKernelNodeGetParams");
  cr_assert(add_v1 && get_v1);
  CUDA_KERNEL_NODE_PARAMS_v1 p1 = {
      .func = k.plain, .gridDimX = 3, .gridDimY = 1, .gridDimZ = 1, .blockDimX = 32, .blockDimY = 1, .blockDimZ = 1};
  CU_OK(add_v1(&x, g, &en, 1, &p1));
  CUDA_KERNEL_NODE_PARAMS_v1 g1;
  CU_OK(get_v1(x, &g1));
  cr_assert(g1.func == k.plain && g1.gridDimX == 3);
  /* nodes, in the order they were added */
  CUgraphNode nodes[8];
  size_t n = 0;
  CU_OK(cuGraphGetNodes(g, NULL, &n));
  cr_assert_eq(n, 5);
  n = 2;
  CU_OK(cuGraphGetNodes(g, nodes, &n));
  cr_assert(n == 2 && nodes[0] == k1 && nodes[1] == k2);
  n = 8;
  memset(nodes, 0xff, sizeof nodes);
  CU_OK(cuGraphGetNodes(g, nodes, &n));
  cr_assert(n == 5 && nodes[3] == en && nodes[4] == x && nodes[5] == NULL && nodes[7] == NULL);
  CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuGraphGetNodes(g, nodes, NULL));
  CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuGraphGetNodes(NULL, nodes, &n));
}

/* A child graph node holds a copy of the graph it was given, and hands out
 * that copy itself. */
Test(graphs, child_graphs) {
  fc_start("8GiB", "0");
  fc_kernels_t k = fc_kernels();
  CUgraph g, child, emb = NULL, mem;
  CUgraphNode cn, x, k1;
  CUDA_KERNEL_NODE_PARAMS p = kparams(k.spin2ms, 1, 32);
  CU_OK(cuGraphCreate(&g, 0));
  CU_OK(cuGraphCreate(&child, 0));
  CU_OK(cuGraphAddKernelNode(&k1, child, NULL, 0, &p));
  CU_OK(cuGraphAddChildGraphNode(&cn, g, NULL, 0, child));
  cr_assert_eq(type_of(cn), CU_GRAPH_NODE_TYPE_GRAPH);
  CU_OK(cuGraphAddKernelNode(&x, child, NULL, 0, &p)); /* after the copy: not in it */
  CU_OK(cuGraphChildGraphNodeGetGraph(cn, &emb));
  cr_assert(emb != NULL && emb != child);
  size_t n = 0;
  CU_OK(cuGraphGetNodes(emb, NULL, &n));
  cr_assert_eq(n, 1);
  CU_OK(cuGraphAddKernelNode(&x, emb, NULL, 0, &p)); /* into the node's own graph: in it */
  CU_OK(cuGraphGetNodes(emb, NULL, &n));
  cr_assert_eq(n, 2);
  CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuGraphChildGraphNodeGetGraph(x, &emb));
  CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuGraphDestroy(emb)); /* the node owns it */
  CU_OK(cuGraphDestroy(child));
  /* memory nodes stay out of child graphs */
  CUDA_MEM_ALLOC_NODE_PARAMS ap;
  memset(&ap, 0, sizeof ap);
  ap.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  ap.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  ap.bytesize = 2 * MiB;
  CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuGraphAddMemAllocNode(&x, emb, NULL, 0, &ap));
  CU_OK(cuGraphCreate(&mem, 0));
  CU_OK(cuGraphAddMemAllocNode(&x, mem, NULL, 0, &ap));
  CU_EXPECT(CUDA_ERROR_NOT_SUPPORTED, cuGraphAddChildGraphNode(&x, g, NULL, 0, mem));
  CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuGraphAddChildGraphNode(&x, g, NULL, 0, NULL));
  /* a graph may embed a copy of itself; nested copies run too */
  CU_OK(cuGraphAddChildGraphNode(&x, g, &cn, 1, g));
  CU_OK(cuGraphGetNodes(g, NULL, &n));
  cr_assert_eq(n, 2);
  CUgraphExec e;
  CU_OK(cuGraphInstantiate(&e, g, 0));
  FC_EXPECT_MS(graph_ms(&k, e), 4 * 2.0); /* cn: 2 kernels; its copy in x: 2 more */
  /* the embedded graph's handle goes with its graph */
  CU_OK(cuGraphDestroy(g));
  CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuGraphGetNodes(emb, NULL, &n));
  FC_EXPECT_MS(graph_ms(&k, e), 8.0); /* the executable graph keeps what it runs */
  CU_OK(cuGraphExecDestroy(e));
}

/* A launch runs the kernels of the executable graph as they were when it was
 * instantiated (or set on it since), one after another. */
Test(graphs, instantiation_copies_kernel_parameters) {
  fc_start("8GiB", "0");
  fc_kernels_t k = fc_kernels();
  CUgraph g;
  CUgraphNode k1, k2, en;
  CUDA_KERNEL_NODE_PARAMS p = kparams(k.spin2ms, 1, 64);
  CU_OK(cuGraphCreate(&g, 0));
  CU_OK(cuGraphAddKernelNode(&k1, g, NULL, 0, &p));
  CU_OK(cuGraphAddEmptyNode(&en, g, &k1, 1));
  p.gridDimX = 132 * 32 + 1; /* two waves */
  CU_OK(cuGraphAddKernelNode(&k2, g, &en, 1, &p));
  CUgraphExec e;
  CU_OK(cuGraphInstantiate(&e, g, 0));
  FC_EXPECT_MS(graph_ms(&k, e), 2.0 + 4.0);
  /* editing the graph does not reach the executable graph */
  CUDA_KERNEL_NODE_PARAMS q = kparams(k.spin20ms, 1, 64);
  CU_OK(cuGraphKernelNodeSetParams(k1, &q));
  CU_OK(cuGraphAddKernelNode(&en, g, NULL, 0, &q));
  FC_EXPECT_MS(graph_ms(&k, e), 6.0);
  /* setting it on the executable graph does, and not on the graph */
  CU_OK(cuGraphExecKernelNodeSetParams(e, k2, &q));
  FC_EXPECT_MS(graph_ms(&k, e), 2.0 + 20.0);
  CUDA_KERNEL_NODE_PARAMS got;
  CU_OK(cuGraphKernelNodeGetParams(k2, &got));
  cr_assert_eq(got.func, k.spin2ms);
  CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuGraphExecKernelNodeSetParams(e, en, &q)); /* added later */
  CUgraphNode empty = NULL;
  CUgraphNode nodes[2];
  size_t n = 2;
  CU_OK(cuGraphGetNodes(g, nodes, &n));
  empty = nodes[1];
  CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuGraphExecKernelNodeSetParams(e, empty, &q)); /* not a kernel */
  q.gridDimX = 0;
  CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuGraphExecKernelNodeSetParams(e, k2, &q));
  FC_EXPECT_MS(graph_ms(&k, e), 22.0);
  CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuGraphExecKernelNodeSetParams(NULL, k2, &q));
}

/* graph_like: k1, k2 after k1, an empty node (or a kernel) after k2, a
 * child graph of one kernel after that; `k2_root` drops k2's dependency. */
static CUgraph graph_like(const fc_kernels_t *k, unsigned grid, bool kernel_for_empty, bool k2_root) {
  CUgraph g, child;
  CUgraphNode k1, k2, mid, cn, x;
  CUDA_KERNEL_NODE_PARAMS p = kparams(k->spin2ms, grid, 64);
  CU_OK(cuGraphCreate(&g, 0));
  CU_OK(cuGraphCreate(&child, 0));
  CU_OK(cuGraphAddKernelNode(&x, child, NULL, 0, &p));
  CU_OK(cuGraphAddKernelNode(&k1, g, NULL, 0, &p));
  CU_OK(cuGraphAddKernelNode(&k2, g, k2_root ? NULL : &k1, k2_root ? 0 : 1, &p));
  if (kernel_for_empty)
    CU_OK(cuGraphAddKernelNode(&mid, g, &k2, 1, &p));
  else
    CU_OK(cuGraphAddEmptyNode(&mid, g, &k2, 1));
  CU_OK(cuGraphAddChildGraphNode(&cn, g, &mid, 1, child));
  CU_OK(cuGraphDestroy(child));
  return g;
}

Test(graphs, exec_update) {
  fc_start("8GiB", "0");
  fc_kernels_t k = fc_kernels();
  CUgraph g = graph_like(&k, 1, false, false);
  CUgraphExec e;
  CU_OK(cuGraphInstantiate(&e, g, 0));
  FC_EXPECT_MS(graph_ms(&k, e), 3 * 2.0);
  CUgraphExecUpdateResultInfo info;
  /* the same shape, two waves a kernel: taken */
  CUgraph same = graph_like(&k, 132 * 32 + 1, false, false);
  memset(&info, 0xff, sizeof info);
  CU_OK(cuGraphExecUpdate(e, same, &info));
  cr_assert_eq(info.result, CU_GRAPH_EXEC_UPDATE_SUCCESS);
  cr_assert_null(info.errorNode);
  FC_EXPECT_MS(graph_ms(&k, e), 3 * 4.0);
  /* a node more */
  CUgraphNode x;
  CUDA_KERNEL_NODE_PARAMS p = kparams(k.spin20ms, 1, 64);
  CU_OK(cuGraphAddKernelNode(&x, same, NULL, 0, &p));
  memset(&info, 0xff, sizeof info);
  CU_EXPECT(CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, cuGraphExecUpdate(e, same, &info));
  cr_assert_eq(info.result, CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED);
  cr_assert_null(info.errorNode);
  FC_EXPECT_MS(graph_ms(&k, e), 12.0); /* unchanged */
  /* a kernel where the empty node was */
  CUgraph other = graph_like(&k, 1, true, false);
  CU_EXPECT(CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, cuGraphExecUpdate(e, other, &info));
  cr_assert_eq(info.result, CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED);
  CUgraphNode nodes[4];
  size_t n = 4;
  CU_OK(cuGraphGetNodes(other, nodes, &n));
  cr_assert_eq(info.errorNode, nodes[2], "the node of the new graph");
  /* other dependencies */
  CUgraph deps = graph_like(&k, 1, false, true);
  CU_EXPECT(CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, cuGraphExecUpdate(e, deps, &info));
  cr_assert_eq(info.result, CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED);
  n = 4;
  CU_OK(cuGraphGetNodes(deps, nodes, &n));
  cr_assert_eq(info.errorNode, nodes[1]);
  /* a child graph of another size */
  CUgraph bigger = graph_like(&k, 1, false, false);
  CUgraph emb;
  n = 4;
  CU_OK(cuGraphGetNodes(bigger, nodes, &n));
  CU_OK(cuGraphChildGraphNodeGetGraph(nodes[3], &emb));
  CU_OK(cuGraphAddKernelNode(&x, emb, NULL, 0, &p));
  CU_EXPECT(CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, cuGraphExecUpdate(e, bigger, &info));
  cr_assert_eq(info.result, CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED);
  FC_EXPECT_MS(graph_ms(&k, e), 12.0);
  /* a child graph's kernel is updated too */
  CUgraph slow = graph_like(&k, 1, false, false);
  n = 4;
  CU_OK(cuGraphGetNodes(slow, nodes, &n));
  CU_OK(cuGraphChildGraphNodeGetGraph(nodes[3], &emb));
  n = 1;
  CU_OK(cuGraphGetNodes(emb, nodes, &n));
  CU_OK(cuGraphKernelNodeSetParams(nodes[0], &p));
  CU_OK(cuGraphExecUpdate(e, slow, &info));
  FC_EXPECT_MS(graph_ms(&k, e), 2.0 + 2.0 + 20.0);
  /* bad arguments */
  CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuGraphExecUpdate(e, NULL, &info));
  cr_assert_eq(info.result, CU_GRAPH_EXEC_UPDATE_ERROR);
  CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuGraphExecUpdate(NULL, slow, &info));
  CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuGraphExecUpdate(e, slow, NULL));
  /* the CUDA 10.2 entry */
  CUresult (*update_v1)(CUgraphExec, CUgraph, CUgraphNode *, CUgraphExecUpdateResult *) = (CUresult(*)(
      CUgraphExec, CUgraph, CUgraphNode *, CUgraphExecUpdateResult *))dlsym(RTLD_DEFAULT, "cuGraphExecUpdate");
  cr_assert_not_null(update_v1);
  CUgraphNode err = NULL;
  CUgraphExecUpdateResult result;
  CU_EXPECT(CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, update_v1(e, other, &err, &result));
  cr_assert_eq(result, CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED);
  cr_assert_not_null(err);
  CU_OK(update_v1(e, g, &err, &result));
  cr_assert_eq(result, CU_GRAPH_EXEC_UPDATE_SUCCESS);
  FC_EXPECT_MS(graph_ms(&k, e), 6.0);
}

/* Memory nodes cannot be updated (unconfirmed); launches with them still
 * charge as before, and time their kernels. */
Test(graphs, memory_nodes_with_kernels) {
  fc_start("8GiB", "0");
  fc_kernels_t k = fc_kernels();
  CUgraph g;
  CUgraphNode a, kn, f;
  CU_OK(cuGraphCreate(&g, 0));
  CUDA_MEM_ALLOC_NODE_PARAMS ap;
  memset(&ap, 0, sizeof ap);
  ap.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  ap.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  ap.bytesize = 64 * MiB;
  CU_OK(cuGraphAddMemAllocNode(&a, g, NULL, 0, &ap));
  CUDA_KERNEL_NODE_PARAMS p = kparams(k.spin2ms, 1, 64);
  CU_OK(cuGraphAddKernelNode(&kn, g, &a, 1, &p));
  CU_OK(cuGraphAddMemFreeNode(&f, g, &kn, 1, ap.dptr));
  CUgraphExec e;
  CU_OK(cuGraphInstantiate(&e, g, 0));
  FC_EXPECT_MS(graph_ms(&k, e), 2.0);
  cr_assert_eq(fc_used(), 64 * MiB, "the graph cache keeps what the launch freed");
  CUgraphExecUpdateResultInfo info;
  CU_EXPECT(CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, cuGraphExecUpdate(e, g, &info));
  cr_assert_eq(info.result, CU_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED);
  cr_assert_eq(info.errorNode, a);
}

/* An allocation node reads back as it was made: explicitly, or captured
 * from a stream-ordered allocation; any other node is INVALID_VALUE. */
Test(graphs, alloc_node_params_read_back) {
  fc_start("8GiB", "0");
  CUgraph g;
  CUgraphNode a, empty;
  CU_OK(cuGraphCreate(&g, 0));
  CUDA_MEM_ALLOC_NODE_PARAMS ap, got;
  memset(&ap, 0, sizeof ap);
  ap.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  ap.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  ap.bytesize = 3 * MiB;
  CU_OK(cuGraphAddMemAllocNode(&a, g, NULL, 0, &ap));
  CU_OK(cuGraphAddEmptyNode(&empty, g, &a, 1));
  CU_OK(cuGraphMemAllocNodeGetParams(a, &got));
  cr_assert_eq(got.bytesize, 3 * MiB);
  cr_assert_eq(got.dptr, ap.dptr);
  cr_assert_eq(got.poolProps.location.type, CU_MEM_LOCATION_TYPE_DEVICE);
  cr_assert_eq(got.poolProps.location.id, 0);
  CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuGraphMemAllocNodeGetParams(empty, &got));
  CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuGraphMemAllocNodeGetParams(NULL, &got));
  CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuGraphMemAllocNodeGetParams(a, NULL));
  /* captured */
  CUstream s;
  CUdeviceptr p;
  CUgraph cg;
  CU_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CU_OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CU_OK(cuMemAllocAsync(&p, 5 * MiB, s));
  CU_OK(cuStreamEndCapture(s, &cg));
  CUgraphNode n;
  size_t count = 1;
  CU_OK(cuGraphGetNodes(cg, &n, &count));
  cr_assert_eq(count, 1);
  CU_OK(cuGraphMemAllocNodeGetParams(n, &got));
  cr_assert_eq(got.bytesize, 5 * MiB);
  cr_assert_eq(got.dptr, p);
}

/* An upload grows the graph memory cache by what the graph's allocations
 * lack, once; the launch after it takes nothing more. Instantiating with
 * CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD uploads; past the device's memory the
 * upload is out of memory and no executable graph is left. */
Test(graphs, upload_takes_the_memory_a_launch_would) {
  fc_start("1GiB", "0");
  CUstream s;
  CU_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUDA_MEM_ALLOC_NODE_PARAMS ap;
  memset(&ap, 0, sizeof ap);
  ap.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  ap.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  ap.bytesize = 256 * MiB;
  CUgraph g;
  CUgraphNode a;
  CUgraphExec e;
  CU_OK(cuGraphCreate(&g, 0));
  CU_OK(cuGraphAddMemAllocNode(&a, g, NULL, 0, &ap));
  CU_OK(cuGraphInstantiateWithFlags(&e, g, 0));
  cr_assert_eq(fc_used(), 0, "an instantiation takes nothing");
  CU_OK(cuGraphUpload(e, s));
  cr_assert_eq(fc_used(), 256 * MiB);
  CU_OK(cuGraphUpload(e, s));
  cr_assert_eq(fc_used(), 256 * MiB, "a second upload finds the cache ready");
  CU_OK(cuGraphLaunch(e, s));
  cr_assert_eq(fc_used(), 256 * MiB, "the launch takes what the upload reserved");
  /* with the upload flag, into another graph: 512 MiB more */
  CUgraph g2;
  CUgraphNode a2;
  CUgraphExec e2;
  CU_OK(cuGraphCreate(&g2, 0));
  ap.bytesize = 512 * MiB;
  CU_OK(cuGraphAddMemAllocNode(&a2, g2, NULL, 0, &ap));
  CUDA_GRAPH_INSTANTIATE_PARAMS ip;
  memset(&ip, 0, sizeof ip);
  ip.flags = CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD;
  ip.hUploadStream = s;
  ip.result_out = CUDA_GRAPH_INSTANTIATE_ERROR;
  CU_OK(cuGraphInstantiateWithParams(&e2, g2, &ip));
  cr_assert_eq(ip.result_out, CUDA_GRAPH_INSTANTIATE_SUCCESS);
  cr_assert_eq(fc_used(), 768 * MiB);
  /* a third, of 900 MiB, finds 512 MiB unused in the cache (the second's,
   * not live) and lacks 388 MiB, which the 1 GiB device does not have */
  CUgraph g3;
  CUgraphNode a3;
  CUgraphExec e3 = NULL;
  CU_OK(cuGraphCreate(&g3, 0));
  ap.bytesize = 900 * MiB;
  CU_OK(cuGraphAddMemAllocNode(&a3, g3, NULL, 0, &ap));
  CU_EXPECT(CUDA_ERROR_OUT_OF_MEMORY, cuGraphInstantiateWithParams(&e3, g3, &ip));
  cr_assert_eq(ip.result_out, CUDA_GRAPH_INSTANTIATE_ERROR);
  cr_assert_eq(fc_used(), 768 * MiB);
  CU_OK(cuGraphInstantiateWithFlags(&e3, g3, 0)); /* none was left: the graph may be instantiated again */
  CU_EXPECT(CUDA_ERROR_OUT_OF_MEMORY, cuGraphUpload(e3, s));
  CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuGraphUpload(NULL, s));
  CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuGraphInstantiateWithParams(&e3, g3, NULL));
}
