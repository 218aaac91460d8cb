/* kernel.cu: libtessera-rt's persistent kernel. One block per lane; the
 * block takes its lane's tasks in order from the ring in pinned host
 * memory (rt/desc.h) and runs them with all its threads.
 *
 * Reading the ring crosses PCIe (about a microsecond a round trip), so a
 * block does not fetch one descriptor at a time: thread 0 reads the lane's
 * posted count (one word, one round trip: an idle block polls only that,
 * never a descriptor line the host may be writing), every thread then
 * copies a part of up to TSR__BATCH (64) whole descriptors into shared
 * memory (one more), and the layouts of those that are not contiguous (one
 * more, only when there are some); the block then runs that batch back to
 * back. A dependent chain submitted together costs two round trips per 64
 * tasks.
 *
 * Between two tasks of a batch there is one barrier (the next task may
 * read what the last wrote; a barrier makes a block's global writes
 * visible to the block), except before a FOLLOW task (rt/desc.h: the host
 * found that every byte stays with one thread; tsr__run). Completion
 * is published once a batch: thread 0 fences and writes the lane's count
 * of done tasks in device memory (for blocks that wait on this lane) and
 * in the host's mapped copy (for wait and flush). A task that waits on another lane first publishes what its
 * own lane has done, so two lanes waiting on each other always see each
 * other's finished work. An idle block sleeps with __nanosleep, backing
 * off from 64 ns to 2 us.
 *
 * Idle exit: a kernel that never ends would hold every later cuMemFree
 * (cudaFree, torch.cuda.empty_cache) of its context for ever, since a free
 * waits for the whole device. So a block idle for idle_ns joins a count of
 * idle blocks, and when every block has joined the kernel ends; a block
 * that finds work before that leaves the count (a CAS that fails once the
 * count is full: then the grid is committed to end). The host relaunches
 * the kernel when it finds it ended with work pending (cuda.c); a new
 * kernel starts each lane after its last done task.
 *
 * Parking: while the grid lives, its blocks hold every SM, and a kernel of
 * the application that does not fit beside them waits for its end (a
 * 64x64 cuBLAS GEMM waited the whole 200 us idle time on the H200). The
 * host sets the park bit in every lane's posted word (rt/desc.h,
 * tsr_rt_park) before such work; an idle block that reads it joins the
 * idle count at once, so the grid ends as soon as every lane has run what
 * was posted. */
#include <stdint.h>

#include "rt/desc.h"
#include "rt/ops.h"

/* descriptors a block copies at once (32 before: a chain of 10,000 steps
 * took 5.5 ms with 64 against 6.1-7.0 with 32 on the H200, 2026-11-26) */
#define TSR__BATCH 64

/* JIT operators: a generation of the kernel compiled by NVRTC (rt/jit.c)
 * defines TSR_RT_JIT and gets rt/jit_ops.h, the operators of its time and
 * tsr_rt_jit_dispatch over their slots; the kernel nvcc builds has none. */
#if defined(TSR_RT_JIT_LINKED)
/* a generation linked by nvJitLink: the operators are another module's */
extern "C" __device__ float tsr_rt_jit_dispatch(unsigned slot, float a, float b, float c, float d);
#elif defined(TSR_RT_JIT)
#include "rt/jit_ops.h"
#else
/* the kernel nvcc builds: JIT operators interpreted (rt/prog.h) */
#define TSR__INTERPRET 1
#include "rt/prog.h"
#endif

struct tsr__params_t {
  const tsr_rt_desc_t *desc;
  const tsr_rt_layout_t *layout;
  unsigned long long *done_host;
  const unsigned long long *posted; /* host-mapped: descriptors whole, per lane */
  unsigned long long *done_dev;
  unsigned *idle; /* blocks idle past idle_ns; zeroed before each launch */
  unsigned long long *ended; /* host-mapped: the launch that ended idle */
  unsigned long long *prof;  /* per lane, 8 words: batches, tasks, then cycles
                              * fetching, running, waiting, publishing */
  const void *progs; /* JIT operators' programs, TSR_RT_PROG_MAX instructions a slot (rt/prog.h) */
  unsigned slots, lanes;
  unsigned long long idle_ns, launch;
};

static __device__ __forceinline__ unsigned long long tsr__now_ns(void) {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

static __device__ __forceinline__ unsigned long long tsr__ld_acquire_sys(const unsigned long long *p) {
  unsigned long long v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
static __device__ __forceinline__ unsigned long long tsr__ld_acquire_gpu(const unsigned long long *p) {
  unsigned long long v;
  asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
static __device__ __forceinline__ void tsr__st_release_gpu(unsigned long long *p, unsigned long long v) {
  asm volatile("st.release.gpu.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
static __device__ __forceinline__ void tsr__st_release_sys(unsigned long long *p, unsigned long long v) {
  asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

/* The operators short enough to get a loop of their own (the others, long
 * math functions, share one loop with the operator chosen at run time). */
#define TSR__SHORT_OPS(X)                                                                                        \
  X(TSR_RT_OP_ADD) X(TSR_RT_OP_SUB) X(TSR_RT_OP_MUL) X(TSR_RT_OP_DIV) X(TSR_RT_OP_MAXIMUM) X(TSR_RT_OP_MINIMUM)  \
  X(TSR_RT_OP_RELU) X(TSR_RT_OP_SIGMOID) X(TSR_RT_OP_SQRT) X(TSR_RT_OP_ABS) X(TSR_RT_OP_HARDSIGMOID)            \
  X(TSR_RT_OP_HARDSWISH) X(TSR_RT_OP_LEAKY_RELU) X(TSR_RT_OP_HARDTANH) X(TSR_RT_OP_CLAMP) X(TSR_RT_OP_CLAMP_MIN) \
  X(TSR_RT_OP_CLAMP_MAX) X(TSR_RT_OP_COPY)

/* Elementwise, all operands contiguous, f32 and 16-byte aligned: float4,
 * one loop per operator (the operator a constant: a task runs a few
 * compact instructions, not a switch inlined four times an element), and
 * the loads of four float4 issued before their stores, so a thread waits
 * for memory once per four. Loading ahead of storing is safe: an input is
 * the output itself or disjoint from it (the host refuses partial
 * overlap), and a thread's indices are distinct. */
template <unsigned OP>
static __device__ __forceinline__ float4 tsr__apply4(float4 x, float4 y, float s0, float s1) {
  return make_float4(tsr_rt_apply(OP, x.x, y.x, s0, s1), tsr_rt_apply(OP, x.y, y.y, s0, s1),
                     tsr_rt_apply(OP, x.z, y.z, s0, s1), tsr_rt_apply(OP, x.w, y.w, s0, s1));
}

template <unsigned OP>
static __device__ void tsr__vec4_loop(const tsr_rt_desc_t *t) {
  float4 *o = (float4 *)t->ptr[0];
  const float4 *a = (const float4 *)t->ptr[1], *b = (const float4 *)t->ptr[2];
  const float s0 = t->scalar[0], s1 = t->scalar[1];
  const float4 zero = make_float4(0.f, 0.f, 0.f, 0.f);
  const uint64_t n4 = t->numel / 4, nt = blockDim.x;
  uint64_t i = threadIdx.x;
  for (; i + 3 * nt < n4; i += 4 * nt) {
    float4 x[4], y[4];
#pragma unroll
    for (int k = 0; k < 4; k++) {
      x[k] = a[i + k * nt];
      y[k] = b ? b[i + k * nt] : zero;
    }
#pragma unroll
    for (int k = 0; k < 4; k++) o[i + k * nt] = tsr__apply4<OP>(x[k], y[k], s0, s1);
  }
  for (; i < n4; i += nt) o[i] = tsr__apply4<OP>(a[i], b ? b[i] : zero, s0, s1);
}

/* f16 or bf16 throughout (DT), 8-byte aligned: four halves (a uint2) at a
 * time, computed in f32. */
template <unsigned DT>
static __device__ __forceinline__ float tsr__h2f(uint32_t h) {
  return DT == TSR_RT_BF16 ? tsr_rt_bf16_to_f32((uint16_t)h) : tsr_rt_f16_to_f32((uint16_t)h);
}
template <unsigned DT>
static __device__ __forceinline__ uint32_t tsr__f2h(float f) {
  return DT == TSR_RT_BF16 ? tsr_rt_f32_to_bf16(f) : tsr_rt_f32_to_f16(f);
}
template <unsigned DT>
static __device__ __forceinline__ float4 tsr__h4_load(uint2 v) {
  return make_float4(tsr__h2f<DT>(v.x & 0xffffu), tsr__h2f<DT>(v.x >> 16), tsr__h2f<DT>(v.y & 0xffffu),
                     tsr__h2f<DT>(v.y >> 16));
}
template <unsigned DT>
static __device__ __forceinline__ uint2 tsr__h4_store(float4 f) {
  return make_uint2(tsr__f2h<DT>(f.x) | tsr__f2h<DT>(f.y) << 16, tsr__f2h<DT>(f.z) | tsr__f2h<DT>(f.w) << 16);
}

/* The operator at run time (a switch an element): two loops in all, since
 * an instance per operator and dtype made the kernel 4x larger and its
 * NVRTC compile 20x longer; the memory access is what vectorizing buys. */
static __device__ __forceinline__ float4 tsr__apply4_rt(unsigned op, float4 x, float4 y, float s0, float s1) {
  return make_float4(tsr_rt_apply(op, x.x, y.x, s0, s1), tsr_rt_apply(op, x.y, y.y, s0, s1),
                     tsr_rt_apply(op, x.z, y.z, s0, s1), tsr_rt_apply(op, x.w, y.w, s0, s1));
}

/* A run of REG tasks (rt/desc.h): a REG task and the FOLLOW tasks after it
 * in the batch, with no barrier between them. Thread t handles float4 t,
 * t + threads, ... (V of them at most: V = 1 when the tasks' numel fits
 * one float4 a thread) and keeps what it stored last in registers (v, with
 * its address fout). Within the run every byte stays with one thread, so
 * what a thread stored is still what memory holds: an input that is the
 * last task's out is taken from v instead of being loaded (a load of an
 * address the thread just stored waits for the store). The other inputs
 * are loaded before any store, as in tsr__vec4_loop.
 *
 * A step is bound by one warp's latency through it, not by memory (a step
 * that loads nothing cost as much as one that loads an input), so a step
 * is written for few instructions and few branches: the descriptor's
 * fields read at once, the loads and the store shared by every operator,
 * one switch on the operator around the arithmetic alone. By the kernel's
 * counters (2026-11-27, H200 and H100 alike), a step of `x = x + y` took
 * 0.305 us and one of the five-operator chain 0.400 with an instance of
 * the whole loop per operator that checked four float4 slots a step, and
 * take 0.193 and 0.242 this way. Reading the next step's fields during
 * this step's loads was slower (0.239 and 0.273, H100): its branch and
 * moves cost more than the shared-memory latency they hid.
 * Returns the index in the batch of the run's last task. */
template <unsigned V>
static __device__ __forceinline__ unsigned tsr__run(const tsr_rt_desc_t *batch, unsigned s, unsigned k) {
  const uint64_t n4 = batch[s].numel / 4, nt = blockDim.x;
  const float4 zero = make_float4(0.f, 0.f, 0.f, 0.f);
  float4 v[V];
  uint64_t fout = 0;
  for (;;) {
    const tsr_rt_desc_t *t = &batch[s];
    const unsigned op = t->op;
    const uint64_t o = t->ptr[0], a = t->ptr[1], b = t->ptr[2];
    const float s0 = t->scalar[0], s1 = t->scalar[1];
    const bool more = s + 1 < k && (batch[s + 1].flags & TSR_RT_DESC_FOLLOW);
    const bool fa = fout && a == fout, fb = fout && b == fout;
    float4 x[V], y[V];
#pragma unroll
    for (unsigned j = 0; j < V; j++) {
      const uint64_t i = threadIdx.x + j * nt;
      if (i < n4) {
        x[j] = fa ? v[j] : ((const float4 *)a)[i];
        y[j] = fb ? v[j] : b ? ((const float4 *)b)[i] : zero;
      }
    }
    switch (op) {
#if !defined(TSR_RT_JIT) || defined(TSR_RT_JIT_LINKED)
#define TSR__RUN(OPC)                                                                                              \
  case OPC:                                                                                                        \
    _Pragma("unroll") for (unsigned j = 0; j < V; j++) v[j] = tsr__apply4<OPC>(x[j], y[j], s0, s1);               \
    break;
      TSR__SHORT_OPS(TSR__RUN)
#undef TSR__RUN
#endif
    /* the long math operators: the operator at run time (every operator
     * in a generation compiled whole by NVRTC, whose compile time an
     * instance per operator multiplies, as in tsr__group) */
    default:
#pragma unroll
      for (unsigned j = 0; j < V; j++) v[j] = tsr__apply4_rt(op, x[j], y[j], s0, s1);
      break;
    }
#pragma unroll
    for (unsigned j = 0; j < V; j++) {
      const uint64_t i = threadIdx.x + j * nt;
      if (i < n4) ((float4 *)o)[i] = v[j];
    }
    fout = o;
    if (!more) return s;
    s++;
  }
}

static __device__ void tsr__vec4_loop_rt(const tsr_rt_desc_t *t) {
  float4 *o = (float4 *)t->ptr[0];
  const float4 *a = (const float4 *)t->ptr[1], *b = (const float4 *)t->ptr[2];
  const unsigned op = t->op;
  const float s0 = t->scalar[0], s1 = t->scalar[1];
  const float4 zero = make_float4(0.f, 0.f, 0.f, 0.f);
  const uint64_t n4 = t->numel / 4, nt = blockDim.x;
  for (uint64_t i = threadIdx.x; i < n4; i += nt) o[i] = tsr__apply4_rt(op, a[i], b ? b[i] : zero, s0, s1);
}

template <unsigned DT>
static __device__ void tsr__half4_loop(const tsr_rt_desc_t *t) {
  uint2 *o = (uint2 *)t->ptr[0];
  const uint2 *a = (const uint2 *)t->ptr[1], *b = (const uint2 *)t->ptr[2];
  const unsigned op = t->op;
  const float s0 = t->scalar[0], s1 = t->scalar[1];
  const float4 zero = make_float4(0.f, 0.f, 0.f, 0.f);
  const uint64_t n4 = t->numel / 4, nt = blockDim.x;
  for (uint64_t i = threadIdx.x; i < n4; i += nt)
    o[i] = tsr__h4_store<DT>(tsr__apply4_rt(op, tsr__h4_load<DT>(a[i]), b ? tsr__h4_load<DT>(b[i]) : zero, s0, s1));
}

/* The vector path a contiguous task can take: its dtype when every operand
 * has it and is aligned to four elements (16 bytes for f32, 8 for a half);
 * else 0 (element by element). */
static __device__ __forceinline__ unsigned tsr__vec_kind(const tsr_rt_desc_t *t) {
  unsigned d = t->dtype[0];
  if (d == TSR_RT_BOOL) return 0;
  uint64_t bits = t->ptr[0];
  for (unsigned k = 0; k < t->nin; k++) {
    if ((t->imm >> k) & 1u) continue; /* a number: no memory */
    if (t->dtype[1 + k] != d) return 0;
    bits |= t->ptr[1 + k];
  }
  if ((t->imm || t->nin > 2) && d != TSR_RT_F32) return 0; /* the general loop below is f32's */
  uint64_t align = d == TSR_RT_F32 ? 15 : 7;
  return (bits & align) == 0 ? d : 0;
}

/* Input k of a general float4 loop: its float4s, or a number broadcast
 * (p NULL, c the number four times). */
struct tsr__in4 {
  const float4 *p;
  float4 c;
};
static __device__ __forceinline__ void tsr__in4_init(tsr__in4 *in, const tsr_rt_desc_t *t, uint64_t base_bytes_off[3]) {
  for (unsigned k = 0; k < 3; k++) {
    if (k < t->nin && ((t->imm >> k) & 1u)) {
      float v = __uint_as_float((unsigned)t->ptr[1 + k]);
      in[k].p = nullptr;
      in[k].c = make_float4(v, v, v, v);
    } else {
      in[k].p = k < t->nin ? (const float4 *)(t->ptr[1 + k] + base_bytes_off[k]) : nullptr;
      in[k].c = make_float4(0.f, 0.f, 0.f, 0.f);
    }
  }
}
static __device__ __forceinline__ float4 tsr__get4(const tsr__in4 &in, uint64_t i) { return in.p ? in.p[i] : in.c; }
static __device__ __forceinline__ float4 tsr__apply4_3(unsigned op, float4 x, float4 y, float4 z, float s0, float s1) {
  return make_float4(tsr_rt_apply3(op, x.x, y.x, z.x, s0, s1), tsr_rt_apply3(op, x.y, y.y, z.y, s0, s1),
                     tsr_rt_apply3(op, x.z, y.z, z.z, s0, s1), tsr_rt_apply3(op, x.w, y.w, z.w, s0, s1));
}

/* f32, contiguous, 16-byte aligned, with numbers among the inputs or three
 * inputs: float4 loads, the operator at run time. */
static __device__ void tsr__vec4_loop_gen(const tsr_rt_desc_t *t, float4 *o, uint64_t off_bytes[3]) {
  tsr__in4 in[3];
  tsr__in4_init(in, t, off_bytes);
  const unsigned op = t->op;
  const float s0 = t->scalar[0], s1 = t->scalar[1];
  const uint64_t n4 = t->numel / 4, nt = blockDim.x;
  for (uint64_t i = threadIdx.x; i < n4; i += nt)
    o[i] = tsr__apply4_3(op, tsr__get4(in[0], i), tsr__get4(in[1], i), tsr__get4(in[2], i), s0, s1);
}

static __device__ void tsr__contig(const tsr_rt_desc_t *t) {
  uint64_t n = t->numel;
  unsigned tid = threadIdx.x, nt = blockDim.x;
  unsigned kind = tsr__vec_kind(t);
  if (kind == TSR_RT_BF16 || kind == TSR_RT_F16) {
    if (kind == TSR_RT_BF16) tsr__half4_loop<TSR_RT_BF16>(t);
    else tsr__half4_loop<TSR_RT_F16>(t);
    for (uint64_t i = n / 4 * 4 + tid; i < n; i += nt) tsr_rt_element(t, NULL, i);
    return;
  }
  if (kind && (t->imm || t->nin > 2)) {
    uint64_t none[3] = {0, 0, 0};
    tsr__vec4_loop_gen(t, (float4 *)t->ptr[0], none);
    for (uint64_t i = n / 4 * 4 + tid; i < n; i += nt) tsr_rt_element(t, NULL, i);
    return;
  }
  if (kind) {
    switch (t->op) {
#define TSR__VEC(op)                                                                                               \
  case op: tsr__vec4_loop<op>(t); break;
      TSR__SHORT_OPS(TSR__VEC)
#undef TSR__VEC
    /* pow, tanh, exp, log, sin, cos, gelu, elu, softplus: long math
     * functions, one loop with the operator at run time (an instance each,
     * unrolled, tripled the kernel's NVRTC compile) */
    default: tsr__vec4_loop_rt(t); break;
    }
    for (uint64_t i = n / 4 * 4 + tid; i < n; i += nt) tsr_rt_element(t, NULL, i);
    return;
  }
  for (uint64_t i = tid; i < n; i += nt) tsr_rt_element(t, NULL, i);
}

/* A group (TSR_RT_DESC_GROUP, rt/desc.h): rnumel items, each a
 * contiguous task at the group's bases plus its offsets. The host starts a
 * new descriptor at any item that overlaps what another writes, so the
 * items run with no barrier and no order among them. GROUP_VEC (f32,
 * every item 16-byte aligned): thread t takes float4 t, t + threads, ...
 * of every item, loading four items' inputs before it stores their
 * outputs, so a thread waits for memory once per four items. */
template <unsigned OP>
static __device__ void tsr__group_vec4(const tsr_rt_desc_t *t, const int32_t *off) {
  const unsigned nops = 1u + t->nin;
  const bool two = t->nin > 1;
  const float s0 = t->scalar[0], s1 = t->scalar[1];
  const float4 zero = make_float4(0.f, 0.f, 0.f, 0.f);
  const uint64_t n4 = t->numel / 4, nt = blockDim.x, items = t->rnumel;
  for (uint64_t i = threadIdx.x; i < n4; i += nt) {
    uint64_t k = 0;
    for (; k + 4 <= items; k += 4) {
      float4 x[4], y[4];
#pragma unroll
      for (unsigned u = 0; u < 4; u++) {
        const int32_t *o = off + (k + u) * nops;
        x[u] = ((const float4 *)(t->ptr[1] + (int64_t)o[1] * 4))[i];
        y[u] = two ? ((const float4 *)(t->ptr[2] + (int64_t)o[2] * 4))[i] : zero;
      }
#pragma unroll
      for (unsigned u = 0; u < 4; u++)
        ((float4 *)(t->ptr[0] + (int64_t)off[(k + u) * nops] * 4))[i] =
            OP ? tsr__apply4<OP>(x[u], y[u], s0, s1) : tsr__apply4_rt(t->op, x[u], y[u], s0, s1);
    }
    for (; k < items; k++) {
      const int32_t *o = off + k * nops;
      float4 x = ((const float4 *)(t->ptr[1] + (int64_t)o[1] * 4))[i];
      float4 y = two ? ((const float4 *)(t->ptr[2] + (int64_t)o[2] * 4))[i] : zero;
      ((float4 *)(t->ptr[0] + (int64_t)o[0] * 4))[i] =
          OP ? tsr__apply4<OP>(x, y, s0, s1) : tsr__apply4_rt(t->op, x, y, s0, s1);
    }
  }
}

static __device__ void tsr__jit(const tsr_rt_desc_t *t, const tsr_rt_layout_t *l, const void *progs, void *prog_sm);

static __device__ void tsr__group(const tsr_rt_desc_t *t, const tsr_rt_layout_t *l, const void *progs,
                                  void *prog_sm) {
  if ((t->flags & TSR_RT_DESC_GROUP_VEC) && (t->imm || t->nin > 2)) {
    /* numbers among the inputs, or three: item by item, float4 loops */
    const int32_t *off = (const int32_t *)(const void *)l;
    const unsigned nops = 1u + t->nin;
    for (uint64_t k = 0; k < t->rnumel; k++) {
      const int32_t *o = off + k * nops;
      uint64_t ob[3];
      for (unsigned r = 0; r < 3; r++) ob[r] = r < t->nin ? (uint64_t)((int64_t)o[1 + r] * 4) : 0;
      tsr__vec4_loop_gen(t, (float4 *)(t->ptr[0] + (int64_t)o[0] * 4), ob);
    }
    return;
  }
  if (t->flags & TSR_RT_DESC_GROUP_VEC) {
    const int32_t *off = (const int32_t *)(const void *)l;
#if defined(TSR_RT_JIT) && !defined(TSR_RT_JIT_LINKED)
    tsr__group_vec4<0>(t, off); /* a generation compiled whole: one instance */
#else
    switch (t->op) {
#define TSR__GROUP(op)                                                                                             \
  case op: tsr__group_vec4<op>(t, off); break;
      TSR__SHORT_OPS(TSR__GROUP)
#undef TSR__GROUP
    default: tsr__group_vec4<0>(t, off); break;
    }
#endif
    return;
  }
  for (uint64_t k = 0; k < t->rnumel; k++) {
    tsr_rt_desc_t d;
    tsr_rt_group_item(t, l, k, &d);
    if (d.op >= TSR_RT_DESC_JIT) tsr__jit(&d, l, progs, prog_sm);
    else tsr__contig(&d);
  }
}

/* A JIT operator, elementwise over up to four inputs: its generation's
 * machine code, or (the kernel nvcc builds) its program, copied into shared
 * memory past the L1 (a slot's program is rewritten when the slot is
 * reused), then interpreted. */
static __device__ void tsr__jit(const tsr_rt_desc_t *t, const tsr_rt_layout_t *l, const void *progs, void *prog_sm) {
  int n = 1 + t->nin;
  unsigned slot = t->op - TSR_RT_DESC_JIT;
#if defined(TSR__INTERPRET)
  tsr_rt_insn_t *prog = (tsr_rt_insn_t *)prog_sm;
  {
    const uint2 *src = (const uint2 *)progs + (size_t)slot * TSR_RT_PROG_MAX;
    __syncthreads(); /* the last task's program may still be read */
    for (unsigned i = threadIdx.x; i < TSR_RT_PROG_MAX; i += blockDim.x) ((uint2 *)prog)[i] = __ldcg(src + i);
    __syncthreads();
  }
#define tsr_rt_jit_dispatch(s, a, b, c, d) tsr_rt_prog_eval(prog, a, b, c, d)
#else
  (void)progs, (void)prog_sm;
#endif
  for (uint64_t i = threadIdx.x; i < t->numel; i += blockDim.x) {
    int64_t off[TSR_RT_DESC_OPERANDS];
    if (t->flags & TSR_RT_DESC_CONTIG)
      for (int k = 0; k < n; k++) off[k] = (int64_t)i;
    else
      tsr_rt_offsets_n(l, t->ndim, i, off, n);
    float in[4] = {0.f, 0.f, 0.f, 0.f};
    for (int k = 1; k < n; k++) in[k - 1] = tsr_rt_input(t, (unsigned)(k - 1), off[k]);
    tsr_rt_store((void *)t->ptr[0], off[0], t->dtype[0], tsr_rt_jit_dispatch(slot, in[0], in[1], in[2], in[3]));
  }
#if defined(TSR__INTERPRET)
#undef tsr_rt_jit_dispatch
  (void)slot;
#endif
}

static __device__ void tsr__reduce(const tsr_rt_desc_t *t, const tsr_rt_layout_t *l, float *red) {
  unsigned tid = threadIdx.x, nt = blockDim.x;
  float scale = t->op == TSR_RT_OP_MEAN ? t->scalar[0] : 1.f;
  if (t->numel == 1) {
    /* one output: the block shares its inputs, then a tree */
    int64_t off;
    float v = tsr_rt_reduce_part(t, l, 0, tid, nt, &off);
    for (int s = 16; s > 0; s >>= 1) v += __shfl_down_sync(0xffffffffu, v, s);
    if ((tid & 31) == 0) red[tid >> 5] = v;
    __syncthreads();
    if (tid < 32) {
      v = tid < nt / 32 ? red[tid] : 0.f;
      for (int s = 16; s > 0; s >>= 1) v += __shfl_down_sync(0xffffffffu, v, s);
      if (tid == 0) tsr_rt_store((void *)t->ptr[0], off, t->dtype[0], v * scale);
    }
    return;
  }
  if (t->rnumel >= 64) {
    /* a warp an output: its 32 threads share the inputs, then shuffle */
    for (uint64_t o = tid >> 5; o < t->numel; o += nt >> 5) {
      int64_t off;
      float v = tsr_rt_reduce_part(t, l, o, tid & 31, 32, &off);
      for (int s = 16; s > 0; s >>= 1) v += __shfl_down_sync(0xffffffffu, v, s);
      if ((tid & 31) == 0) tsr_rt_store((void *)t->ptr[0], off, t->dtype[0], v * scale);
    }
    return;
  }
  for (uint64_t o = tid; o < t->numel; o += nt) {
    int64_t off;
    float v = tsr_rt_reduce_part(t, l, o, 0, 1, &off);
    tsr_rt_store((void *)t->ptr[0], off, t->dtype[0], v * scale);
  }
}

/* Publishes that the lane has done its tasks up to n: for blocks that wait
 * on it (device memory) and, with `host`, for the host. Once a batch, and
 * before any wait on another lane (so two lanes waiting on each other
 * always see each other's finished work). */
static __device__ __forceinline__ void tsr__publish(const tsr__params_t &p, unsigned lane, unsigned long long n,
                                                    bool host) {
  __threadfence();
  tsr__st_release_gpu(p.done_dev + (size_t)lane * TSR_RT_DONE_STRIDE, n);
  if (host) tsr__st_release_sys(p.done_host + (size_t)lane * TSR_RT_DONE_STRIDE, n);
}

extern "C" __global__ void tsr_rt_persistent(tsr__params_t p) {
  /* copied in as uint4: 16-byte aligned (a linked generation places shared
   * variables where their types alone allow) */
  __shared__ __align__(16) tsr_rt_desc_t batch[TSR__BATCH];
  __shared__ __align__(16) tsr_rt_layout_t layouts[TSR__BATCH];
  __shared__ float red[32];
#if defined(TSR__INTERPRET)
  __shared__ __align__(16) tsr_rt_insn_t prog_sm[TSR_RT_PROG_MAX];
#else
  __shared__ float prog_sm[1];
#endif
  __shared__ unsigned count, strided;
  __shared__ unsigned long long start_n;
  __shared__ int leave;
  const unsigned lane = blockIdx.x, tid = threadIdx.x, nt = blockDim.x;
  const tsr_rt_desc_t *ring = p.desc + (size_t)lane * p.slots;
  const tsr_rt_layout_t *lring = p.layout + (size_t)lane * p.slots;
  unsigned sleep_ns = 64;
  if (tid == 0) start_n = tsr__ld_acquire_gpu(p.done_dev + (size_t)lane * TSR_RT_DONE_STRIDE) + 1;
  __syncthreads();
  unsigned long long idle_since = 0;
  bool parked = false; /* thread 0: the lane's posted word carried the park bit */
  const unsigned long long *posted = p.posted + (size_t)lane * TSR_RT_DONE_STRIDE;
  /* thread 0's counters (tsr_rt_stats), kept across launches */
  unsigned long long *prof = p.prof + (size_t)lane * 8, pr[6] = {0, 0, 0, 0, 0, 0};
  if (tid == 0)
    for (int i = 0; i < 6; i++) pr[i] = prof[i];
  for (unsigned long long n = start_n;;) {
    long long c0 = clock64();
    /* thread 0: how many descriptors are whole, in one read across PCIe */
    if (tid == 0) {
      unsigned long long whole = tsr__ld_acquire_sys(posted);
      parked = (whole & TSR_RT_POSTED_PARK) != 0;
      whole &= ~TSR_RT_POSTED_PARK;
      count = whole < n ? 0u : whole - n + 1 >= TSR__BATCH ? TSR__BATCH : (unsigned)(whole - n + 1);
    }
    __syncthreads();
    unsigned k = count;
    if (k > 0) {
      /* every thread copies (past the L1: a slot is rewritten each lap of
       * the ring), so the batch crosses PCIe in one round trip */
      for (unsigned w = tid; w < k * 8; w += nt) {
        unsigned s = w / 8, part = w % 8;
        ((uint4 *)&batch[s])[part] = __ldcv((const uint4 *)&ring[(n + s - 1) & (p.slots - 1)] + part);
      }
      if (tid == 0) strided = 0;
      __syncthreads();
      /* the layouts of the tasks that need one, in one more */
      for (unsigned s = tid; s < k; s += nt)
        if (!(batch[s].flags & TSR_RT_DESC_CONTIG)) atomicOr(&strided, 1u);
      __syncthreads();
      if (strided)
        for (unsigned w = tid; w < k * (sizeof(tsr_rt_layout_t) / 16); w += nt) {
          unsigned s = w / (sizeof(tsr_rt_layout_t) / 16), part = w % (sizeof(tsr_rt_layout_t) / 16);
          if (!(batch[s].flags & TSR_RT_DESC_CONTIG))
            ((uint4 *)&layouts[s])[part] = __ldcv((const uint4 *)&lring[(n + s - 1) & (p.slots - 1)] + part);
        }
      __syncthreads();
      pr[0]++;
      pr[2] += clock64() - c0;
    }
    if (k == 0) {
      if (tid == 0) {
        __nanosleep(sleep_ns);
        unsigned long long t = tsr__now_ns();
        if (!idle_since) idle_since = t;
        leave = 0;
        /* idle for idle_ns, or the host asked this launch to make room
         * for other kernels now (tsr_rt_park) */
        if (t - idle_since >= p.idle_ns || parked) {
          /* join the idle blocks; wait until all have (then end) or work comes */
          atomicAdd(p.idle, 1u);
          for (;;) {
            if (atomicAdd(p.idle, 0u) >= p.lanes) {
              leave = 1;
              break;
            }
            if ((tsr__ld_acquire_sys(posted) & ~TSR_RT_POSTED_PARK) >= n) {
              unsigned c = atomicAdd(p.idle, 0u);
              bool out = false;
              while (c < p.lanes) {
                unsigned seen = atomicCAS(p.idle, c, c - 1);
                if (seen == c) {
                  out = true;
                  break;
                }
                c = seen;
              }
              if (!out) leave = 1; /* the grid is committed to end: the host relaunches */
              break;
            }
            __nanosleep(2048);
          }
          idle_since = 0;
          /* the host's doorbell looks here before it asks the driver */
          if (leave) tsr__st_release_sys(p.ended, p.launch);
        }
      }
      sleep_ns = sleep_ns < 2048 ? sleep_ns * 2 : 2048;
      __syncthreads();
      if (leave) return;
      continue;
    }
    sleep_ns = 64;
    idle_since = 0;
    bool stop = false;
    long long c1 = clock64(), waited = 0;
    const unsigned long long n0 = n;
    for (unsigned s = 0; s < k; s++, n++) {
      const tsr_rt_desc_t *t = &batch[s];
      if (t->flags & TSR_RT_DESC_STOP) {
        stop = true;
        break;
      }
      if (t->flags & TSR_RT_DESC_SWITCH) {
        /* the end of this generation in this lane: counted done, the next
         * generation starts after it */
        if (tid == 0) tsr__publish(p, lane, n, true);
        return;
      }
      if (t->nwait) {
        if (tid == 0) {
          long long w0 = clock64();
          tsr__publish(p, lane, n - 1, false);
          for (unsigned w = 0; w < t->nwait; w++) {
            const unsigned long long *d = p.done_dev + (size_t)t->wait_lane[w] * TSR_RT_DONE_STRIDE;
            unsigned ns = 32;
            while (!tsr_rt_reached(tsr__ld_acquire_gpu(d), t->wait_seq[w])) {
              __nanosleep(ns);
              ns = ns < 1024 ? ns * 2 : 1024;
            }
          }
          waited += clock64() - w0;
        }
        __syncthreads();
      }
      if (t->flags & TSR_RT_DESC_GROUP) tsr__group(t, &layouts[s], p.progs, prog_sm);
      else if (t->op >= TSR_RT_DESC_JIT) tsr__jit(t, &layouts[s], p.progs, prog_sm);
      else if (t->flags & TSR_RT_DESC_REDUCE) tsr__reduce(t, &layouts[s], red);
      else if (t->flags & TSR_RT_DESC_REG) {
        /* this task and the FOLLOW tasks after it in the batch, with no
         * barrier between them (tsr__run) */
        unsigned last = t->numel / 4 <= nt ? tsr__run<1>(batch, s, k) : tsr__run<TSR_RT_REG_VEC>(batch, s, k);
        n += last - s;
        s = last;
      } else if (t->flags & TSR_RT_DESC_CONTIG) tsr__contig(t);
      else
        for (uint64_t i = tid; i < t->numel; i += nt) tsr_rt_element(t, &layouts[s], i);
      /* the next task of the lane may read what this one wrote (a FOLLOW
       * task comes only after a REG one, and the loop above ran those) */
      __syncthreads();
    }
    if (tid == 0) {
      /* the counters first: the publish's fence orders them before the
       * done count the host reads; the publish's own time is stored after
       * it (unordered: a read of the stats may miss the last batch's; left
       * for the next batch to store, it was lost whenever the kernel ended
       * idle after the batch, and a workload of one batch a lane showed
       * 0 us of publishing) */
      long long c2 = clock64();
      pr[1] += n - n0;
      pr[3] += c2 - c1 - waited;
      pr[4] += waited;
      for (int i = 0; i < 6; i++) prof[i] = pr[i];
      tsr__publish(p, lane, n - 1, true); /* n: the next task, or the STOP */
      pr[5] += clock64() - c2;
      prof[5] = pr[5];
    }
    if (stop) return;
  }
}
