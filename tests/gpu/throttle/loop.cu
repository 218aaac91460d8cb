/* loop.cu: a compute-bound kernel launched in a loop, for throttle.sh: its
 * completed kernels per second are the throughput a compute share holds
 * back. CUDA runtime API, so it reaches the driver the way PyTorch does
 * (through the entry points cudart asks cuGetProcAddress for).
 *
 *   throttle_loop --info
 *       prints "sms=N coop=0|1 name=..." for device 0 and exits
 *   throttle_loop --blocks N --threads N --calibrate-ms D
 *       picks the work K that makes one kernel take about D ms natively
 *       (device events, median of 5), prints "work=K kernel_ms=T", exits
 *   throttle_loop --blocks N --threads N --work K [--mode plain|graph|coop]
 *                 [--kernel spin|nccl]   (nccl: the same work, named like
 *                 an NCCL kernel, plain mode)
 *                 [--seconds T] [--start-at UNIX_S]
 *       launches for T seconds (default 10) from UNIX_S (CLOCK_REALTIME,
 *       seconds; default: at once, after a warm-up), at most 8 kernels in
 *       flight: plain and coop launch 8 kernels (cudaLaunchKernel,
 *       cudaLaunchCooperativeKernel) and synchronize the stream; graph
 *       captures 8 launches into a CUDA graph once and launches it
 *       (cudaGraphLaunch), synchronizing after each. Prints
 *       "sec=<i> kernels=<n>" as each second ends, then
 *       "rate=<kernels/s> cv=<stddev/mean> max_launch_us=.. p50_launch_us=..
 *        p99_launch_us=.. launches=.. kernels=.. late_ms=..".
 *
 * A second's count is read off the completed count at whole seconds,
 * interpolated linearly between the synchronizations around it: counted
 * only at synchronizations, a share that lets 100 kernels through a second
 * would swing by one batch of 8 (8%) from second to second for nothing.
 * rate and cv are over seconds 2..T: the first second holds the start
 * (a bucket's burst, the shim learning a kernel's cost). A launch's time is
 * the host call alone, where a share's wait lands. Errors: one line on
 * stderr, exit 1 (2: usage). */
#include <cuda_runtime.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <algorithm>
#include <vector>

#define LOOP_BATCH 8 /* kernels in flight at most; also the graph's launches */

#define LOOP_CHECK(call)                                                                     \
  do {                                                                                       \
    cudaError_t e_ = (call);                                                                 \
    if (e_ != cudaSuccess) {                                                                 \
      fprintf(stderr, "throttle_loop: %s: %s (%s)\n", #call, cudaGetErrorName(e_), cudaGetErrorString(e_)); \
      exit(1);                                                                               \
    }                                                                                        \
  } while (0)

/* FMA chains on registers: 4 independent ones per thread keep each SM's
 * pipelines full with a single block of 256 threads. The result is written
 * once, so the compiler cannot drop the work. */
__device__ __forceinline__ void tsr_throttle_body(float *out, long long work) {
  float a = threadIdx.x * 1e-3f, b = blockIdx.x * 1e-3f, c = 0.5f, d = 0.25f;
  for (long long k = 0; k < work; k++) {
    a = fmaf(a, 0.9999f, 1e-4f);
    b = fmaf(b, 0.9999f, 1e-4f);
    c = fmaf(c, 0.9999f, 1e-4f);
    d = fmaf(d, 0.9999f, 1e-4f);
  }
  out[(size_t)blockIdx.x * blockDim.x + threadIdx.x] = a + b + c + d;
}
extern "C" __global__ void tsr_throttle_spin(float *out, long long work) { tsr_throttle_body(out, work); }
/* The same work under a name like NCCL's (2.19+): the shim lets kernels so
 * named through uncharged (--kernel nccl). */
extern "C" __global__ void ncclDevKernel_AllReduce_Sum_f32_RING_LL(float *out, long long work) {
  tsr_throttle_body(out, work);
}

typedef enum { LOOP_PLAIN, LOOP_GRAPH, LOOP_COOP } loop_mode_t;

typedef struct {
  unsigned blocks, threads;
  long long work;
  loop_mode_t mode;
  bool nccl; /* --kernel nccl: launch the NCCL-named kernel (plain mode) */
  double seconds, start_at, calibrate_ms;
  bool info;
} loop_opts_t;

static double loop_now(clockid_t clk) {
  struct timespec ts;
  clock_gettime(clk, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- options --------------------------------------------------------------- */

static int loop_usage(void) {
  fprintf(stderr,
          "usage: throttle_loop --info\n"
          "       throttle_loop --blocks N --threads N --calibrate-ms D\n"
          "       throttle_loop --blocks N --threads N --work K [--mode plain|graph|coop] [--kernel spin|nccl]\n"
          "                     [--seconds T] [--start-at UNIX_SECONDS]\n");
  return 2;
}

static bool loop_parse_num(const char *opt, const char *text, double lo, double hi, double *out) {
  char *end = NULL;
  errno = 0;
  double v = text ? strtod(text, &end) : 0;
  if (!text || !*text || !end || *end || errno || !(v >= lo && v <= hi)) {
    fprintf(stderr, "throttle_loop: %s wants a number from %g to %g, not '%s'\n", opt, lo, hi, text ? text : "");
    return false;
  }
  *out = v;
  return true;
}

static bool loop_parse_args(int argc, char **argv, loop_opts_t *out) {
  memset(out, 0, sizeof(*out));
  out->mode = LOOP_PLAIN;
  out->seconds = 10;
  double blocks = 0, threads = 256, work = 0;
  for (int i = 1; i < argc; i++) {
    const char *opt = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
    bool ok = true;
    if (strcmp(opt, "--info") == 0) {
      out->info = true;
      continue;
    }
    if (strcmp(opt, "--blocks") == 0) ok = loop_parse_num(opt, val, 1, 1 << 24, &blocks);
    else if (strcmp(opt, "--threads") == 0) ok = loop_parse_num(opt, val, 1, 1024, &threads);
    else if (strcmp(opt, "--work") == 0) ok = loop_parse_num(opt, val, 1, 1e12, &work);
    else if (strcmp(opt, "--seconds") == 0) ok = loop_parse_num(opt, val, 2, 3600, &out->seconds);
    else if (strcmp(opt, "--start-at") == 0) ok = loop_parse_num(opt, val, 0, 1e11, &out->start_at);
    else if (strcmp(opt, "--calibrate-ms") == 0) ok = loop_parse_num(opt, val, 0.01, 1000, &out->calibrate_ms);
    else if (strcmp(opt, "--kernel") == 0) {
      ok = val && (strcmp(val, "spin") == 0 || strcmp(val, "nccl") == 0);
      if (ok) out->nccl = strcmp(val, "nccl") == 0;
      else fprintf(stderr, "throttle_loop: --kernel is spin or nccl, not '%s'\n", val ? val : "");
    } else if (strcmp(opt, "--mode") == 0) {
      if (val && strcmp(val, "plain") == 0) out->mode = LOOP_PLAIN;
      else if (val && strcmp(val, "graph") == 0) out->mode = LOOP_GRAPH;
      else if (val && strcmp(val, "coop") == 0) out->mode = LOOP_COOP;
      else {
        fprintf(stderr, "throttle_loop: --mode is plain, graph or coop, not '%s'\n", val ? val : "");
        ok = false;
      }
    } else {
      fprintf(stderr, "throttle_loop: unknown option '%s'\n", opt);
      return false;
    }
    if (!ok) return false;
    i++;
  }
  if ((double)(unsigned)blocks != blocks || (double)(unsigned)threads != threads ||
      (double)(long long)work != work || (double)(int)out->seconds != out->seconds) {
    fprintf(stderr, "throttle_loop: --blocks, --threads, --work and --seconds are whole numbers\n");
    return false;
  }
  out->blocks = (unsigned)blocks;
  out->threads = (unsigned)threads;
  out->work = (long long)work;
  if (!out->info && out->blocks == 0) {
    fprintf(stderr, "throttle_loop: --blocks is needed\n");
    return false;
  }
  if (!out->info && out->calibrate_ms == 0 && out->work == 0) {
    fprintf(stderr, "throttle_loop: --work or --calibrate-ms is needed\n");
    return false;
  }
  return true;
}

/* ---- calibration -------------------------------------------------------------- */

/* Median time of one kernel of `work`, in ms, by device events. */
static double loop_kernel_ms(const loop_opts_t *o, float *out, long long work, cudaStream_t s) {
  cudaEvent_t e0, e1;
  LOOP_CHECK(cudaEventCreate(&e0));
  LOOP_CHECK(cudaEventCreate(&e1));
  float ms[5];
  tsr_throttle_spin<<<o->blocks, o->threads, 0, s>>>(out, work); /* warm: clocks up, module loaded */
  LOOP_CHECK(cudaGetLastError());
  for (int i = 0; i < 5; i++) {
    LOOP_CHECK(cudaEventRecord(e0, s));
    tsr_throttle_spin<<<o->blocks, o->threads, 0, s>>>(out, work);
    LOOP_CHECK(cudaGetLastError());
    LOOP_CHECK(cudaEventRecord(e1, s));
    LOOP_CHECK(cudaEventSynchronize(e1));
    LOOP_CHECK(cudaEventElapsedTime(&ms[i], e0, e1));
  }
  LOOP_CHECK(cudaEventDestroy(e0));
  LOOP_CHECK(cudaEventDestroy(e1));
  std::sort(ms, ms + 5);
  return ms[2];
}

/* The time grows linearly with the work past a few microseconds of fixed
 * cost, so a few proportional steps land within 2%. */
static int loop_calibrate(const loop_opts_t *o, float *out, cudaStream_t s) {
  long long work = 4096;
  double ms = 0;
  for (int step = 0; step < 8; step++) {
    ms = loop_kernel_ms(o, out, work, s);
    if (fabs(ms - o->calibrate_ms) <= 0.02 * o->calibrate_ms || step == 7) break; /* `work` is what was measured */
    double scale = ms > 0 ? o->calibrate_ms / ms : 1000;
    scale = std::min(1000.0, std::max(0.001, scale));
    long long next = (long long)llround((double)work * scale);
    work = std::max(1LL, std::min(next, 1000000000000LL));
  }
  printf("work=%lld kernel_ms=%.4f blocks=%u threads=%u\n", work, ms, o->blocks, o->threads);
  if (fabs(ms - o->calibrate_ms) > 0.1 * o->calibrate_ms) {
    fprintf(stderr, "throttle_loop: could not bring a kernel to %.3f ms (last %.4f ms at work %lld)\n",
            o->calibrate_ms, ms, work);
    return 1;
  }
  return 0;
}

/* ---- the loop ----------------------------------------------------------------- */

/* The completed count at whole seconds, from (time, count) points at each
 * synchronization. */
typedef struct {
  double t_prev, c_prev;       /* the last point */
  double c_at_last_second;     /* the interpolated count at the last whole second */
  int next_second;             /* the next whole second to cross */
  std::vector<double> counts;  /* per second: counts[i] is second i + 1 */
} loop_seconds_t;

static void loop_seconds_add(loop_seconds_t *sec, double t, double c) {
  while (t >= sec->next_second) {
    double at = sec->next_second, f = t > sec->t_prev ? (at - sec->t_prev) / (t - sec->t_prev) : 1;
    double c_at = sec->c_prev + f * (c - sec->c_prev);
    sec->counts.push_back(c_at - sec->c_at_last_second);
    printf("sec=%d kernels=%.1f\n", sec->next_second, c_at - sec->c_at_last_second);
    fflush(stdout);
    sec->c_at_last_second = c_at;
    sec->next_second++;
  }
  sec->t_prev = t;
  sec->c_prev = c;
}

typedef struct {
  const loop_opts_t *o;
  cudaStream_t stream;
  cudaGraphExec_t graph;
  float *out;
} loop_ctx_t;

/* One launch call, timed on the host; returns its kernels. */
static int loop_launch(loop_ctx_t *x, std::vector<float> *launch_us) {
  const loop_opts_t *o = x->o;
  long long work = o->work;
  void *args[] = {&x->out, &work};
  double t0 = loop_now(CLOCK_MONOTONIC);
  cudaError_t e;
  int kernels = 1;
  if (o->mode == LOOP_GRAPH) {
    e = cudaGraphLaunch(x->graph, x->stream);
    kernels = LOOP_BATCH;
  } else if (o->mode == LOOP_COOP) {
    e = cudaLaunchCooperativeKernel((const void *)tsr_throttle_spin, dim3(o->blocks), dim3(o->threads), args, 0,
                                    x->stream);
  } else {
    const void *k = o->nccl ? (const void *)ncclDevKernel_AllReduce_Sum_f32_RING_LL : (const void *)tsr_throttle_spin;
    e = cudaLaunchKernel(k, dim3(o->blocks), dim3(o->threads), args, 0, x->stream);
  }
  double t1 = loop_now(CLOCK_MONOTONIC);
  if (e != cudaSuccess) {
    fprintf(stderr, "throttle_loop: launch: %s (%s)\n", cudaGetErrorName(e), cudaGetErrorString(e));
    exit(1);
  }
  if (launch_us) launch_us->push_back((float)((t1 - t0) * 1e6));
  return kernels;
}

/* One batch: 8 kernels (one graph) launched, then the stream synchronized. */
static int loop_batch(loop_ctx_t *x, std::vector<float> *launch_us) {
  int kernels = 0;
  while (kernels < LOOP_BATCH) kernels += loop_launch(x, launch_us);
  LOOP_CHECK(cudaStreamSynchronize(x->stream));
  return kernels;
}

static double loop_pct(const std::vector<float> &sorted, double pct) {
  if (sorted.empty()) return 0;
  size_t rank = (size_t)ceil(sorted.size() * pct / 100.0);
  return sorted[rank ? rank - 1 : 0];
}

static int loop_run(const loop_opts_t *o, float *out, cudaStream_t stream) {
  loop_ctx_t x;
  x.o = o;
  x.stream = stream;
  x.graph = NULL;
  x.out = out;
  if (o->mode == LOOP_COOP) {
    int coop = 0, per_sm = 0, sms = 0;
    LOOP_CHECK(cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, 0));
    LOOP_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    LOOP_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, tsr_throttle_spin, (int)o->threads, 0));
    if (!coop || (long long)per_sm * sms < o->blocks) {
      fprintf(stderr, "throttle_loop: --mode coop: %u blocks cannot all be resident (%d per SM x %d SMs, coop %d)\n",
              o->blocks, per_sm, sms, coop);
      return 1;
    }
  }
  if (o->mode == LOOP_GRAPH) {
    /* captured once: the launches inside are recorded, not run */
    cudaGraph_t g;
    LOOP_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < LOOP_BATCH; i++) {
      tsr_throttle_spin<<<o->blocks, o->threads, 0, stream>>>(out, o->work);
      LOOP_CHECK(cudaGetLastError());
    }
    LOOP_CHECK(cudaStreamEndCapture(stream, &g));
    LOOP_CHECK(cudaGraphInstantiate(&x.graph, g, 0));
    LOOP_CHECK(cudaGraphDestroy(g));
  }
  /* warm-up: module loading and the first launches out of the numbers */
  for (int i = 0; i < 2; i++) loop_batch(&x, NULL);
  double late_ms = 0;
  if (o->start_at > 0) {
    double wait = o->start_at - loop_now(CLOCK_REALTIME);
    if (wait > 0) {
      struct timespec ts = {.tv_sec = (time_t)wait, .tv_nsec = (long)((wait - floor(wait)) * 1e9)};
      while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
      }
    } else {
      late_ms = -wait * 1e3; /* the caller's start instant passed during set-up */
    }
  }
  std::vector<float> launch_us;
  launch_us.reserve((size_t)(o->seconds * 4096));
  loop_seconds_t sec;
  sec.t_prev = sec.c_prev = sec.c_at_last_second = 0;
  sec.next_second = 1;
  double t0 = loop_now(CLOCK_MONOTONIC), total = 0, t = 0;
  while (sec.next_second <= (int)o->seconds) {
    total += loop_batch(&x, &launch_us);
    t = loop_now(CLOCK_MONOTONIC) - t0;
    loop_seconds_add(&sec, t, total);
  }
  if (x.graph) LOOP_CHECK(cudaGraphExecDestroy(x.graph));
  LOOP_CHECK(cudaGetLastError());

  double sum = 0, sq = 0;
  size_t n = sec.counts.size() - 1; /* the first second dropped */
  for (size_t i = 1; i < sec.counts.size(); i++) sum += sec.counts[i];
  double mean = sum / (double)n;
  for (size_t i = 1; i < sec.counts.size(); i++) sq += (sec.counts[i] - mean) * (sec.counts[i] - mean);
  double cv = n > 1 && mean > 0 ? sqrt(sq / (double)(n - 1)) / mean : 0;
  std::sort(launch_us.begin(), launch_us.end());
  printf("rate=%.2f cv=%.4f max_launch_us=%.1f p50_launch_us=%.2f p99_launch_us=%.1f launches=%zu kernels=%.0f "
         "seconds=%.3f late_ms=%.0f\n",
         mean, cv, launch_us.empty() ? 0.0 : (double)launch_us.back(), loop_pct(launch_us, 50),
         loop_pct(launch_us, 99), launch_us.size(), total, t, late_ms);
  return 0;
}

int main(int argc, char **argv) {
  loop_opts_t o;
  if (argc < 2 || !loop_parse_args(argc, argv, &o)) return loop_usage();
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    fprintf(stderr, "throttle_loop: no CUDA device: %s\n", e != cudaSuccess ? cudaGetErrorName(e) : "none found");
    return 1;
  }
  LOOP_CHECK(cudaSetDevice(0));
  if (o.info) {
    cudaDeviceProp p;
    LOOP_CHECK(cudaGetDeviceProperties(&p, 0));
    printf("sms=%d coop=%d name=%s\n", p.multiProcessorCount, p.cooperativeLaunch, p.name);
    return 0;
  }
  float *out;
  cudaStream_t stream;
  LOOP_CHECK(cudaMalloc(&out, (size_t)o.blocks * o.threads * sizeof(float)));
  LOOP_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  int rc = o.calibrate_ms > 0 ? loop_calibrate(&o, out, stream) : loop_run(&o, out, stream);
  LOOP_CHECK(cudaStreamDestroy(stream));
  LOOP_CHECK(cudaFree(out));
  return rc;
}
