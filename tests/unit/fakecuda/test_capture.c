/* unit.fakecuda_capture: work on a capturing stream becomes graph nodes that
 * a graph launch runs; what may not be captured says so, as the real driver
 * does (the legacy stream, a synchronize, the legacy stream while a blocking
 * stream captures, another thread ending a global capture). */
#include <dlfcn.h>
#include <pthread.h>

#include "fc_time.h"

static CUstreamCaptureStatus status_of(CUstream s) {
  CUstreamCaptureStatus st = (CUstreamCaptureStatus)99;
  CU_OK(cuStreamIsCapturing(s, &st));
  return st;
}

static size_t node_count(CUgraph g) {
  size_t n = 0;
  CU_OK(cuGraphGetNodes(g, NULL, &n));
  return n;
}

Test(capture, legacy_stream_cannot_capture) {
  fc_start("8GiB", "0");
  CU_EXPECT(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, cuStreamBeginCapture(NULL, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CU_EXPECT(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
            cuStreamBeginCapture(CU_STREAM_LEGACY, CU_STREAM_CAPTURE_MODE_RELAXED));
  cr_assert_eq(status_of(NULL), CU_STREAM_CAPTURE_STATUS_NONE);
  CUstream s;
  CU_OK(cuStreamCreate(&s, 0));
  CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuStreamBeginCapture(s, (CUstreamCaptureMode)3));
  CUgraph g;
  CU_EXPECT(CUDA_ERROR_ILLEGAL_STATE, cuStreamEndCapture(s, &g));
  CU_EXPECT(CUDA_ERROR_INVALID_HANDLE, cuStreamBeginCapture((CUstream)&g, CU_STREAM_CAPTURE_MODE_GLOBAL));
}

/* Kernels captured do not run; the graph they make runs them, one after
 * another, each launch. */
Test(capture, kernels_become_nodes_that_a_launch_runs) {
  fc_start("8GiB", "0");
  fc_kernels_t k = fc_kernels();
  CUstream s;
  CU_OK(cuStreamCreate(&s, 0));
  cr_assert_eq(status_of(s), CU_STREAM_CAPTURE_STATUS_NONE);
  CU_OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  cr_assert_eq(status_of(s), CU_STREAM_CAPTURE_STATUS_ACTIVE);
  CU_EXPECT(CUDA_ERROR_ILLEGAL_STATE, cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CU_OK(cuLaunchKernel(k.spin20ms, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL));
  CU_OK(cuLaunchKernel(k.spin2ms, 132 * 32 + 1, 1, 1, 64, 1, 1, 0, s, NULL, NULL));
  CU_OK(cuLaunchCooperativeKernel(k.spin2ms, 8, 1, 1, 64, 1, 1, 0, s, NULL));
  CU_EXPECT(CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE,
            cuLaunchCooperativeKernel(k.spin2ms, 132 * 32 + 1, 1, 1, 64, 1, 1, 0, s, NULL));
  CUgraph g = NULL;
  CU_OK(cuStreamEndCapture(s, &g));
  cr_assert_not_null(g);
  cr_assert_eq(status_of(s), CU_STREAM_CAPTURE_STATUS_NONE);
  CU_OK(cuStreamQuery(s)); /* nothing ran */
  CUgraphNode nodes[4] = {NULL};
  size_t n = 4;
  CU_OK(cuGraphGetNodes(g, nodes, &n));
  cr_assert_eq(n, 3);
  for (size_t i = 0; i < 3; i++) {
    CUgraphNodeType t;
    CU_OK(cuGraphNodeGetType(nodes[i], &t));
    cr_assert_eq(t, CU_GRAPH_NODE_TYPE_KERNEL);
  }
  CUDA_KERNEL_NODE_PARAMS p;
  CU_OK(cuGraphKernelNodeGetParams(nodes[1], &p));
  cr_assert_eq(p.func, k.spin2ms);
  cr_assert_eq(p.gridDimX, 132 * 32 + 1);
  cr_assert_eq(p.blockDimX, 64);
  CUgraphExec e;
  CU_OK(cuGraphInstantiate(&e, g, 0));
  CUevent a, b;
  CU_OK(cuEventCreate(&a, 0));
  CU_OK(cuEventCreate(&b, 0));
  for (int round = 0; round < 2; round++) {
    fc_measure_begin(&k, s, a);
    CU_OK(cuGraphLaunch(e, s));
    CU_OK(cuEventRecord(b, s));
    FC_EXPECT_MS(fc_elapsed(a, b), 20.0 + 4.0 + 2.0);
  }
}

Test(capture, synchronize_or_query_invalidates) {
  fc_start("8GiB", "0");
  fc_kernels_t k = fc_kernels();
  CUstream s;
  CUgraph g = (CUgraph)1;
  CU_OK(cuStreamCreate(&s, 0));
  CU_OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CU_OK(cuLaunchKernel(k.spin2ms, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL));
  CU_EXPECT(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, cuStreamSynchronize(s));
  cr_assert_eq(status_of(s), CU_STREAM_CAPTURE_STATUS_INVALIDATED);
  CU_EXPECT(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, cuLaunchKernel(k.spin2ms, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL));
  CUdeviceptr p;
  CU_EXPECT(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, cuMemAllocAsync(&p, 1024, s));
  CU_EXPECT(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, cuStreamSynchronize(s));
  CU_EXPECT(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, cuStreamEndCapture(s, &g));
  cr_assert_null(g);
  cr_assert_eq(status_of(s), CU_STREAM_CAPTURE_STATUS_NONE);
  CU_OK(cuStreamSynchronize(s)); /* usable again */
  CU_OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
  CU_EXPECT(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, cuStreamQuery(s));
  CU_EXPECT(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, cuStreamEndCapture(s, &g));
  /* a graph launch into a capture is not emulated: refused, invalidating */
  CUgraph empty;
  CUgraphExec e;
  CU_OK(cuGraphCreate(&empty, 0));
  CU_OK(cuGraphInstantiate(&e, empty, 0));
  CU_OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CU_EXPECT(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, cuGraphLaunch(e, s));
  CU_EXPECT(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, cuStreamEndCapture(s, &g));
}

Test(capture, legacy_stream_while_a_blocking_stream_captures) {
  fc_start("8GiB", "0");
  fc_kernels_t k = fc_kernels();
  CUstream blocking, nonblocking;
  CUgraph g;
  CU_OK(cuStreamCreate(&blocking, 0));
  CU_OK(cuStreamCreate(&nonblocking, CU_STREAM_NON_BLOCKING));
  CU_OK(cuStreamBeginCapture(nonblocking, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CU_OK(cuLaunchKernel(k.plain, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL));
  cr_assert_eq(status_of(NULL), CU_STREAM_CAPTURE_STATUS_NONE);
  CU_OK(cuStreamEndCapture(nonblocking, &g));
  CU_OK(cuStreamBeginCapture(blocking, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CUstreamCaptureStatus st;
  CU_EXPECT(CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, cuStreamIsCapturing(NULL, &st));
  cr_assert_eq(status_of(blocking), CU_STREAM_CAPTURE_STATUS_ACTIVE, "asking does not invalidate");
  CU_EXPECT(CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, cuLaunchKernel(k.plain, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL));
  cr_assert_eq(status_of(blocking), CU_STREAM_CAPTURE_STATUS_INVALIDATED);
  CU_EXPECT(CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, cuStreamSynchronize(NULL));
  CU_EXPECT(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, cuStreamEndCapture(blocking, &g));
  CU_OK(cuStreamSynchronize(NULL));
}

/* Through the per-thread entries NULL is the per-thread default stream,
 * which may capture. */
Test(capture, per_thread_default_stream) {
  fc_start("8GiB", "0");
  fc_kernels_t k = fc_kernels();
  CUresult (*begin)(CUstream, CUstreamCaptureMode) = NULL;
  CUresult (*end)(CUstream, CUgraph *) = NULL;
  CUresult (*launch)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
                     void **, void **) = NULL;
  CUdriverProcAddressQueryResult st;
  cuuint64_t pt = CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
  CU_OK(cuGetProcAddress("cuStreamBeginCapture", (void **)&begin, 13000, pt, &st));
  CU_OK(cuGetProcAddress("cuStreamEndCapture", (void **)&end, 13000, pt, &st));
  CU_OK(cuGetProcAddress("cuLaunchKernel", (void **)&launch, 13000, pt, &st));
  cr_assert_eq((void *)begin, dlsym(RTLD_DEFAULT, "cuStreamBeginCapture_v2_ptsz"));
  CU_OK(begin(NULL, CU_STREAM_CAPTURE_MODE_GLOBAL));
  cr_assert_eq(status_of(CU_STREAM_PER_THREAD), CU_STREAM_CAPTURE_STATUS_ACTIVE);
  CU_OK(launch(k.spin2ms, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL));
  CU_EXPECT(CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, cuLaunchKernel(k.plain, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL));
  CUgraph g = (CUgraph)1;
  CU_EXPECT(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, end(NULL, &g));
  cr_assert_null(g);
  CU_OK(begin(NULL, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CU_OK(launch(k.spin2ms, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL));
  CU_OK(end(CU_STREAM_PER_THREAD, &g));
  cr_assert_eq(node_count(g), 1);
  /* the CUDA 10.0 entry, before modes */
  CUresult (*begin_v1)(CUstream) = (CUresult(*)(CUstream))dlsym(RTLD_DEFAULT, "cuStreamBeginCapture");
  cr_assert_not_null(begin_v1);
  CUstream s;
  CU_OK(cuStreamCreate(&s, 0));
  CU_OK(begin_v1(s));
  cr_assert_eq(status_of(s), CU_STREAM_CAPTURE_STATUS_ACTIVE);
  CU_OK(cuStreamEndCapture(s, &g));
}

typedef struct {
  CUcontext ctx;
  CUstream s;
  CUresult rc;
} end_arg_t;

static void *end_elsewhere(void *p) {
  end_arg_t *a = p;
  CUgraph g;
  cuCtxSetCurrent(a->ctx);
  a->rc = cuStreamEndCapture(a->s, &g);
  return NULL;
}

static CUresult end_from_another_thread(CUcontext c, CUstream s) {
  end_arg_t a = {.ctx = c, .s = s};
  pthread_t t;
  cr_assert_eq(pthread_create(&t, NULL, end_elsewhere, &a), 0);
  pthread_join(t, NULL);
  return a.rc;
}

Test(capture, global_and_thread_local_captures_end_where_they_began) {
  CUcontext c = fc_start("8GiB", "0");
  CUstream s;
  CUgraph g;
  CU_OK(cuStreamCreate(&s, 0));
  CU_OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CU_EXPECT(CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD, end_from_another_thread(c, s));
  CU_OK(cuStreamEndCapture(s, &g));
  CU_OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  CU_EXPECT(CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD, end_from_another_thread(c, s));
  CU_OK(cuStreamEndCapture(s, &g));
  CU_OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
  CU_OK(end_from_another_thread(c, s));
  cr_assert_eq(status_of(s), CU_STREAM_CAPTURE_STATUS_NONE);
}

/* Stream-ordered allocations captured take nothing until the graph runs;
 * then they are graph memory (the cache), as cuGraphAddMemAllocNode's. */
Test(capture, allocations_become_memory_nodes) {
  fc_start("8GiB", "0");
  CUstream s;
  CUgraph g;
  CU_OK(cuStreamCreate(&s, 0));
  CU_OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CUdeviceptr p = 0, q = 0, z = 77;
  CU_OK(cuMemAllocAsync(&p, 64 * MiB, s));
  CUmemoryPool pool;
  CU_OK(cuDeviceGetDefaultMemPool(&pool, 0));
  CU_OK(cuMemAllocFromPoolAsync(&q, 32 * MiB, pool, s));
  CU_OK(cuMemAllocAsync(&z, 0, s));
  cr_assert_eq(z, 0);
  cr_assert(p != 0 && q != 0);
  cr_assert_eq(fc_used(), 0, "captured allocations take nothing");
  CU_OK(cuMemFreeAsync(q, s));
  CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuMemFreeAsync(q, s)); /* twice in one graph */
  CUdeviceptr d;
  CU_OK(cuMemAlloc(&d, MiB));
  CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuMemFreeAsync(d, s)); /* not a graph allocation */
  CU_OK(cuStreamEndCapture(s, &g));
  CUgraphNode nodes[3];
  size_t n = 3;
  CU_OK(cuGraphGetNodes(g, nodes, &n));
  cr_assert_eq(n, 3);
  CUgraphNodeType t[3];
  for (int i = 0; i < 3; i++) CU_OK(cuGraphNodeGetType(nodes[i], &t[i]));
  cr_assert(t[0] == CU_GRAPH_NODE_TYPE_MEM_ALLOC && t[1] == CU_GRAPH_NODE_TYPE_MEM_ALLOC &&
            t[2] == CU_GRAPH_NODE_TYPE_MEM_FREE);
  CU_OK(cuMemFree(d));
  CUgraphExec e;
  CU_OK(cuGraphInstantiate(&e, g, 0));
  cr_assert_eq(fc_used(), 0);
  CU_OK(cuGraphLaunch(e, s));
  cr_assert_eq(fc_used(), 96 * MiB, "the launch takes both, the free gives back to the cache");
  cuuint64_t used = 0;
  CU_OK(cuDeviceGetGraphMemAttribute(0, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, &used));
  cr_assert_eq(used, 64 * MiB);
  CU_OK(cuMemFreeAsync(p, s));
  CU_OK(cuDeviceGraphMemTrim(0));
  cr_assert_eq(fc_used(), 0);
}

/* Capture into an existing graph, after given nodes. */
Test(capture, to_an_existing_graph) {
  fc_start("8GiB", "0");
  fc_kernels_t k = fc_kernels();
  CUstream s;
  CUgraph g, got = NULL, other;
  CUgraphNode root, foreign;
  CU_OK(cuStreamCreate(&s, 0));
  CU_OK(cuGraphCreate(&g, 0));
  CU_OK(cuGraphCreate(&other, 0));
  CU_OK(cuGraphAddEmptyNode(&root, g, NULL, 0));
  CU_OK(cuGraphAddEmptyNode(&foreign, other, NULL, 0));
  CU_EXPECT(CUDA_ERROR_INVALID_VALUE,
            cuStreamBeginCaptureToGraph(s, g, &foreign, NULL, 1, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CU_EXPECT(CUDA_ERROR_INVALID_VALUE,
            cuStreamBeginCaptureToGraph(s, NULL, NULL, NULL, 0, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CUgraphEdgeData odd = {.type = CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC};
  CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuStreamBeginCaptureToGraph(s, g, &root, &odd, 1, CU_STREAM_CAPTURE_MODE_GLOBAL));
  cr_assert_eq(status_of(s), CU_STREAM_CAPTURE_STATUS_NONE, "a refused begin leaves no capture");
  CUgraphEdgeData plain = {0};
  CU_OK(cuStreamBeginCaptureToGraph(s, g, &root, &plain, 1, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CU_OK(cuLaunchKernel(k.spin2ms, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL));
  CU_OK(cuLaunchKernel(k.spin2ms, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL));
  CU_OK(cuStreamEndCapture(s, &got));
  cr_assert_eq(got, g);
  cr_assert_eq(node_count(g), 3);
  CUgraphNode nodes[3];
  size_t n = 3;
  CU_OK(cuGraphGetNodes(g, nodes, &n));
  cr_assert_eq(nodes[0], root);
  CUgraphExec e;
  CU_OK(cuGraphInstantiate(&e, g, 0));
  CUevent a, b;
  CU_OK(cuEventCreate(&a, 0));
  CU_OK(cuEventCreate(&b, 0));
  fc_measure_begin(&k, s, a);
  CU_OK(cuGraphLaunch(e, s));
  CU_OK(cuEventRecord(b, s));
  FC_EXPECT_MS(fc_elapsed(a, b), 4.0);
  CU_OK(cuGraphDestroy(g)); /* still the caller's: destroyed once */
  CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuGraphDestroy(g));
}

/* A stream or context that goes while capturing takes the capture with it. */
Test(capture, stream_destroyed_while_capturing) {
  fc_start("8GiB", "0");
  fc_kernels_t k = fc_kernels();
  CUstream s;
  CU_OK(cuStreamCreate(&s, 0));
  CU_OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CU_OK(cuLaunchKernel(k.spin2ms, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL));
  CU_OK(cuStreamDestroy(s));
  CU_OK(cuStreamSynchronize(NULL));
  CUcontext c;
  CU_OK(cuCtxCreate(&c, NULL, 0, 0));
  CU_OK(cuStreamCreate(&s, 0));
  CU_OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CU_OK(cuStreamBeginCapture(CU_STREAM_PER_THREAD, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CU_OK(cuCtxDestroy(c));
}
