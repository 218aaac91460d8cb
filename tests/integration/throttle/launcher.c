/* launcher.c: kernel launches through the driver API against the CI's
 * driver double, whose kernels take time (a name ending in _<N>us runs N us
 * per wave): what throttle.sh measures a compute share with.
 *
 *   launcher --kernel NAME [--blocks N] [--threads N] [--seconds T]
 *            [--path launch|ex|coop|graph|ptsz] [--capture-first N]
 *
 * Launches NAME in a loop for T seconds (default 3), at most 8 in flight
 * (a synchronize every 8), through cuLaunchKernel (launch),
 * cuLaunchKernelEx (ex), cuLaunchCooperativeKernel (coop),
 * cuLaunchKernel_ptsz on the per-thread stream (ptsz), or a CUDA graph of 8
 * launches captured from a stream (graph). --capture-first N captures N
 * launches into a graph that is never launched before the loop (they must
 * not be charged). --workers N: N threads, each on a stream of its own,
 * launch the plain loop at once (one lease's bucket, cost table and
 * measurements shared by all of them); the rate is their sum. Prints "rate=<kernels/s> kernels=<n> max_launch_us=<us>"
 * over the seconds after the first. */
#include <cuda.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHECK(call)                                                \
  do {                                                             \
    CUresult r_ = (call);                                          \
    if (r_ != CUDA_SUCCESS) {                                      \
      fprintf(stderr, "launcher: %s: error %d\n", #call, (int)r_); \
      exit(1);                                                     \
    }                                                              \
  } while (0)

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static const char ptx[] =
    ".version 8.0\n.target sm_90\n.address_size 64\n"
    ".visible .entry spin_1000us() { ret; }\n"
    ".visible .entry spin_250us() { ret; }\n"
    ".visible .entry spin_4000us() { ret; }\n"
    ".visible .entry ncclDevKernel_AllReduce_Sum_f32_RING_LL_1000us() { ret; }\n"
    ".visible .entry memcpy_kernel_1000us() { ret; }\n";

/* --workers: each thread's loop; kernels completed after the first second
 * are added to `counted` */
static struct {
  CUcontext ctx;
  CUfunction f;
  unsigned blocks, threads;
  double t0, seconds;
  atomic_long counted;
} work;

static void *worker(void *arg) {
  (void)arg;
  CUstream s;
  if (cuCtxSetCurrent(work.ctx) != CUDA_SUCCESS || cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS)
    return (void *)1;
  while (now_s() < work.t0 + work.seconds) {
    for (int k = 0; k < 8; k++)
      if (cuLaunchKernel(work.f, work.blocks, 1, 1, work.threads, 1, 1, 0, s, NULL, NULL) != CUDA_SUCCESS)
        return (void *)1;
    if (cuStreamSynchronize(s) != CUDA_SUCCESS) return (void *)1;
    if (now_s() >= work.t0 + 1) atomic_fetch_add(&work.counted, 8);
  }
  return NULL;
}

int main(int argc, char **argv) {
  const char *kernel = NULL, *path = "launch";
  unsigned blocks = 132, threads = 256;
  double seconds = 3;
  int capture_first = 0, workers = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--kernel"))
      kernel = argv[i + 1];
    else if (!strcmp(argv[i], "--blocks"))
      blocks = (unsigned)atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--threads"))
      threads = (unsigned)atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--seconds"))
      seconds = atof(argv[i + 1]);
    else if (!strcmp(argv[i], "--path"))
      path = argv[i + 1];
    else if (!strcmp(argv[i], "--capture-first"))
      capture_first = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--workers"))
      workers = atoi(argv[i + 1]);
    else {
      fprintf(stderr, "launcher: unknown option %s\n", argv[i]);
      return 2;
    }
  }
  if (!kernel || seconds <= 1) {
    fprintf(stderr, "usage: launcher --kernel NAME [--blocks N] [--threads N] [--seconds T>1] [--path P]\n");
    return 2;
  }
  CUdevice dev;
  CUcontext ctx;
  CUmodule mod;
  CUfunction f;
  CUstream s;
  CHECK(cuInit(0));
  CHECK(cuDeviceGet(&dev, 0));
  CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CHECK(cuCtxSetCurrent(ctx));
  CHECK(cuModuleLoadData(&mod, ptx));
  CHECK(cuModuleGetFunction(&f, mod, kernel));
  CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  if (workers > 1) {
    work.ctx = ctx;
    work.f = f;
    work.blocks = blocks;
    work.threads = threads;
    work.seconds = seconds;
    work.t0 = now_s();
    pthread_t t[64];
    int n = workers < 64 ? workers : 64;
    for (int i = 0; i < n; i++)
      if (pthread_create(&t[i], NULL, worker, NULL) != 0) return 1;
    bool ok = true;
    for (int i = 0; i < n; i++) {
      void *r;
      pthread_join(t[i], &r);
      ok = ok && !r;
    }
    if (!ok) {
      fprintf(stderr, "launcher: a worker's launch failed\n");
      return 1;
    }
    long k = atomic_load(&work.counted);
    printf("rate=%.1f kernels=%ld\n", k / (now_s() - work.t0 - 1), k);
    return 0;
  }
  for (int i = 0; i < capture_first; i += 8) {
    CUgraph g;
    CHECK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    for (int k = 0; k < 8 && i + k < capture_first; k++)
      CHECK(cuLaunchKernel(f, blocks, 1, 1, threads, 1, 1, 0, s, NULL, NULL));
    CHECK(cuStreamEndCapture(s, &g));
    CHECK(cuGraphDestroy(g));
  }
  CUgraphExec exec = NULL;
  bool graph = !strcmp(path, "graph");
  if (graph) {
    CUgraph g;
    CHECK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    for (int k = 0; k < 8; k++) CHECK(cuLaunchKernel(f, blocks, 1, 1, threads, 1, 1, 0, s, NULL, NULL));
    CHECK(cuStreamEndCapture(s, &g));
    CHECK(cuGraphInstantiate(&exec, g, 0));
  }
  /* the per-thread stream's entry, as a runtime built for it asks for it */
  CUresult (*launch_ptsz)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
                          void **, void **) = NULL;
  CHECK(cuGetProcAddress("cuLaunchKernel", (void **)&launch_ptsz, 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
                         NULL));
  CUlaunchConfig cfg = {.gridDimX = blocks,
                        .gridDimY = 1,
                        .gridDimZ = 1,
                        .blockDimX = threads,
                        .blockDimY = 1,
                        .blockDimZ = 1,
                        .hStream = s};
  double t0 = now_s(), counted_from = 0, max_launch = 0;
  long kernels = 0, launches = 0;
  bool counting = false; /* from the first synchronize one second in */
  for (;;) {
    if (now_s() >= t0 + seconds) break;
    int batch = graph ? 1 : 8;
    for (int k = 0; k < batch; k++) {
      double a = now_s();
      if (graph)
        CHECK(cuGraphLaunch(exec, s));
      else if (!strcmp(path, "ex"))
        CHECK(cuLaunchKernelEx(&cfg, f, NULL, NULL));
      else if (!strcmp(path, "coop"))
        CHECK(cuLaunchCooperativeKernel(f, blocks, 1, 1, threads, 1, 1, 0, s, NULL));
      else if (!strcmp(path, "ptsz"))
        CHECK(launch_ptsz(f, blocks, 1, 1, threads, 1, 1, 0, NULL, NULL, NULL));
      else
        CHECK(cuLaunchKernel(f, blocks, 1, 1, threads, 1, 1, 0, s, NULL, NULL));
      double b = now_s();
      launches++;
      if (counting && b - a > max_launch) max_launch = b - a;
    }
    CHECK(!strcmp(path, "ptsz") ? cuStreamSynchronize(CU_STREAM_PER_THREAD) : cuStreamSynchronize(s));
    double t = now_s();
    if (counting) {
      kernels += 8;
    } else if (t >= t0 + 1) {
      counting = true;
      counted_from = t;
    }
  }
  double span = now_s() - counted_from;
  printf("rate=%.1f kernels=%ld launches=%ld max_launch_us=%.0f\n", kernels / span, kernels, launches,
         max_launch * 1e6);
  return 0;
}
