/* rt/ops.h: the builtin operators' arithmetic, one definition for the host
 * (the CPU backend, the tests' reference) and the device (kernel.cu): the
 * scalar functions, f16/bf16 conversions by their bits, and the element
 * loops of a task over its descriptor. Everything computes in f32, as
 * PyTorch does for these types on the GPU.
 *
 * Compiled as C11 (static inline) or as CUDA (__host__ __device__). The
 * JIT expressions (rt/expr.h) call tsr_rt_f_<name>; the builtin operators
 * are the same functions. */
#ifndef TESSERA_RT_OPS_H
#define TESSERA_RT_OPS_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "rt/desc.h"

#ifdef __CUDACC__
#define TSR_RT_FN static __host__ __device__ __forceinline__
#else
#define TSR_RT_FN static inline
#endif

/* ---- scalar functions ------------------------------------------------- */

#include "rt/scalar.h"

/* One builtin elementwise operator on values in f32. */
TSR_RT_FN float tsr_rt_apply(uint32_t op, float a, float b, float s0, float s1) {
  switch (op) {
    case TSR_RT_OP_ADD: return a + b;
    case TSR_RT_OP_SUB: return a - b;
    case TSR_RT_OP_MUL: return a * b;
    case TSR_RT_OP_DIV: return a / b;
    case TSR_RT_OP_MAXIMUM: return tsr_rt_f_maximum(a, b);
    case TSR_RT_OP_MINIMUM: return tsr_rt_f_minimum(a, b);
    case TSR_RT_OP_POW: return powf(a, b);
    case TSR_RT_OP_RELU: return tsr_rt_f_relu(a);
    case TSR_RT_OP_SIGMOID: return tsr_rt_f_sigmoid(a);
    case TSR_RT_OP_TANH: return tanhf(a);
    case TSR_RT_OP_EXP: return expf(a);
    case TSR_RT_OP_LOG: return logf(a);
    case TSR_RT_OP_SQRT: return sqrtf(a);
    case TSR_RT_OP_ABS: return fabsf(a);
    case TSR_RT_OP_SIN: return sinf(a);
    case TSR_RT_OP_COS: return cosf(a);
    case TSR_RT_OP_GELU: return tsr_rt_f_gelu(a);
    case TSR_RT_OP_HARDSIGMOID: return tsr_rt_f_hardsigmoid(a);
    case TSR_RT_OP_HARDSWISH: return tsr_rt_f_hardswish(a);
    case TSR_RT_OP_LEAKY_RELU: return tsr_rt_f_leaky_relu(a, s0);
    case TSR_RT_OP_HARDTANH: return tsr_rt_f_clamp(a, s0, s1);
    case TSR_RT_OP_ELU: return tsr_rt_f_elu(a, s0);
    case TSR_RT_OP_SOFTPLUS: return tsr_rt_f_softplus(a);
    case TSR_RT_OP_CLAMP: return tsr_rt_f_clamp(a, s0, s1);
    case TSR_RT_OP_CLAMP_MIN: return tsr_rt_f_maximum(a, s0);
    case TSR_RT_OP_CLAMP_MAX: return tsr_rt_f_minimum(a, s0);
    case TSR_RT_OP_NEG: return -a;
    case TSR_RT_OP_RECIPROCAL: return tsr_rt_f_reciprocal(a);
    case TSR_RT_OP_RSQRT: return tsr_rt_f_rsqrt(a);
    case TSR_RT_OP_SQUARE: return a * a;
    case TSR_RT_OP_EXP2: return exp2f(a);
    case TSR_RT_OP_LOG1P: return log1pf(a);
    case TSR_RT_OP_EXPM1: return expm1f(a);
    case TSR_RT_OP_SILU: return tsr_rt_f_silu(a);
    case TSR_RT_OP_MISH: return tsr_rt_f_mish(a);
    case TSR_RT_OP_LERP: return tsr_rt_f_lerp(a, b, s0);
    case TSR_RT_OP_EQ: return a == b ? 1.f : 0.f;
    case TSR_RT_OP_NE: return a != b ? 1.f : 0.f;
    case TSR_RT_OP_LT: return a < b ? 1.f : 0.f;
    case TSR_RT_OP_LE: return a <= b ? 1.f : 0.f;
    case TSR_RT_OP_GT: return a > b ? 1.f : 0.f;
    case TSR_RT_OP_GE: return a >= b ? 1.f : 0.f;
    case TSR_RT_OP_AXPBY: return s0 * a + s1 * b;
    default: return a; /* COPY */
  }
}

/* Any builtin elementwise operator, the ternary ones included. */
TSR_RT_FN float tsr_rt_apply3(uint32_t op, float a, float b, float c, float s0, float s1) {
  switch (op) {
    case TSR_RT_OP_ADDCMUL: return tsr_rt_f_addcmul(a, b, c, s0);
    case TSR_RT_OP_ADDCDIV: return tsr_rt_f_addcdiv(a, b, c, s0);
    case TSR_RT_OP_LERP_T: return tsr_rt_f_lerp(a, b, c);
    case TSR_RT_OP_WHERE: return tsr_rt_f_where(a, b, c);
    case TSR_RT_OP_CLAMP_T: return tsr_rt_f_clamp(a, b, c);
    case TSR_RT_OP_AXPBYZ: return s0 * a + s1 * b * c;
    case TSR_RT_OP_ADAM_UPDATE: return a + s0 * b / (sqrtf(c) + s1);
    default: return tsr_rt_apply(op, a, b, s0, s1);
  }
}

/* ---- f16 and bf16, by their bits (round to nearest even) -------------- */

TSR_RT_FN uint32_t tsr_rt_f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
TSR_RT_FN float tsr_rt_bits_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}
TSR_RT_FN float tsr_rt_bf16_to_f32(uint16_t h) { return tsr_rt_bits_f32((uint32_t)h << 16); }
TSR_RT_FN uint16_t tsr_rt_f32_to_bf16(float f) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  /* the device's own conversion (round to nearest even, as below): one
   * instruction instead of the bit arithmetic, in every loop it is inlined in */
  uint16_t h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
#endif
  uint32_t u = tsr_rt_f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}
TSR_RT_FN float tsr_rt_f16_to_f32(uint16_t h) {
#ifdef __CUDA_ARCH__
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
#endif
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  if (exp == 0x1f) return tsr_rt_bits_f32(sign | 0x7f800000u | (man << 13));
  if (exp == 0) {
    if (!man) return tsr_rt_bits_f32(sign);
    /* subnormal: value = man x 2^-24 */
    float v = (float)man * 5.9604644775390625e-8f;
    return sign ? -v : v;
  }
  return tsr_rt_bits_f32(sign | ((exp + 112u) << 23) | (man << 13));
}
TSR_RT_FN uint16_t tsr_rt_f32_to_f16(float f) {
#ifdef __CUDA_ARCH__
  uint16_t h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
#endif
  uint32_t u = tsr_rt_f32_bits(f);
  uint32_t sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);  /* NaN */
  if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* overflow: inf */
  if (a < 0x38800000u) {                                   /* subnormal or zero */
    if (a < 0x33000000u) return (uint16_t)sign;            /* below half the least */
    uint32_t e = a >> 23, m = (a & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126u - e; /* 14 .. 24 */
    uint32_t r = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (r & 1u))) r++;
    return (uint16_t)(sign | r);
  }
  uint32_t r = a - 0x38000000u; /* rebias 127 -> 15 */
  r += 0xfffu + ((r >> 13) & 1u);
  return (uint16_t)(sign | (r >> 13));
}

TSR_RT_FN int tsr_rt_dtype_bytes(uint32_t dtype) { return dtype == TSR_RT_F32 ? 4 : dtype == TSR_RT_BOOL ? 1 : 2; }

TSR_RT_FN float tsr_rt_load(const void *base, int64_t i, uint32_t dtype) {
  if (dtype == TSR_RT_F32) return ((const float *)base)[i];
  if (dtype == TSR_RT_BOOL) return ((const uint8_t *)base)[i] ? 1.f : 0.f;
  uint16_t h = ((const uint16_t *)base)[i];
  return dtype == TSR_RT_BF16 ? tsr_rt_bf16_to_f32(h) : tsr_rt_f16_to_f32(h);
}
TSR_RT_FN void tsr_rt_store(void *base, int64_t i, uint32_t dtype, float v) {
  if (dtype == TSR_RT_F32)
    ((float *)base)[i] = v;
  else if (dtype == TSR_RT_BOOL)
    ((uint8_t *)base)[i] = v != 0.f; /* NaN too, as a cast to bool */
  else
    ((uint16_t *)base)[i] = dtype == TSR_RT_BF16 ? tsr_rt_f32_to_bf16(v) : tsr_rt_f32_to_f16(v);
}

/* The offsets of element `i` (row-major over sizes) in the first `n`
 * operands (out, in0, ...). */
TSR_RT_FN void tsr_rt_offsets_n(const tsr_rt_layout_t *l, uint32_t ndim, uint64_t i, int64_t *off, int n) {
  for (int k = 0; k < n; k++) off[k] = 0;
  for (int d = (int)ndim - 1; d >= 0; d--) {
    int64_t sz = l->sizes[d];
    int64_t c = sz > 1 ? (int64_t)(i % (uint64_t)sz) : 0;
    if (sz > 1) i /= (uint64_t)sz;
    for (int k = 0; k < n; k++) off[k] += c * l->strides[k][d];
  }
}

/* Input k of a task at element offset `off`: a number (imm) or a load. */
TSR_RT_FN float tsr_rt_input(const tsr_rt_desc_t *t, unsigned k, int64_t off) {
  if (t->imm & (1u << k)) return tsr_rt_bits_f32((uint32_t)t->ptr[1 + k]);
  return tsr_rt_load((const void *)(uintptr_t)t->ptr[1 + k], off, t->dtype[1 + k]);
}

/* Elementwise element `i` of a task (the output's i-th element in
 * row-major order). */
TSR_RT_FN void tsr_rt_element(const tsr_rt_desc_t *t, const tsr_rt_layout_t *l, uint64_t i) {
  int64_t off[4] = {0, 0, 0, 0};
  unsigned nin = t->nin;
  if (t->flags & TSR_RT_DESC_CONTIG)
    off[0] = off[1] = off[2] = off[3] = (int64_t)i;
  else
    tsr_rt_offsets_n(l, t->ndim, i, off, 1 + (int)nin);
  float a = tsr_rt_input(t, 0, off[1]);
  float b = nin > 1 ? tsr_rt_input(t, 1, off[2]) : 0.f;
  float c = nin > 2 ? tsr_rt_input(t, 2, off[3]) : 0.f;
  tsr_rt_store((void *)(uintptr_t)t->ptr[0], off[0], t->dtype[0],
               tsr_rt_apply3(t->op, a, b, c, t->scalar[0], t->scalar[1]));
}

/* Item k of a group descriptor (TSR_RT_DESC_GROUP) as a contiguous task
 * of its own: its operands at the group's bases plus the item's offsets
 * (the slot's layout read as int32 elements). */
TSR_RT_FN void tsr_rt_group_item(const tsr_rt_desc_t *g, const tsr_rt_layout_t *l, uint64_t k, tsr_rt_desc_t *d) {
  const int32_t *off = (const int32_t *)(const void *)l;
  unsigned nops = 1u + g->nin;
  *d = *g;
  d->flags = TSR_RT_DESC_CONTIG;
  d->rnumel = 0;
  for (unsigned r = 0; r < nops; r++)
    if (!(r && (g->imm & (1u << (r - 1))))) /* a number stays itself */
      d->ptr[r] = g->ptr[r] + (uint64_t)((int64_t)off[k * nops + r] * tsr_rt_dtype_bytes(g->dtype[r]));
}

/* Reductions: the sum of output element `o` over the reduced elements
 * r_begin, r_begin + r_step, ... (a thread's share); *out_off gets the
 * output's offset. */
TSR_RT_FN float tsr_rt_reduce_part(const tsr_rt_desc_t *t, const tsr_rt_layout_t *l, uint64_t o, uint64_t r_begin,
                                   uint64_t r_step, int64_t *out_off) {
  int64_t base = 0, oo = 0;
  uint64_t q = o;
  for (int d = (int)t->ndim - 1; d >= 0; d--) {
    if (t->reduce_mask & (1u << d)) continue;
    int64_t n = l->sizes[d];
    int64_t k = (int64_t)(q % (uint64_t)n);
    q /= (uint64_t)n;
    base += k * l->strides[1][d];
    oo += k * l->strides[0][d];
  }
  *out_off = oo;
  float acc = 0.f;
  const void *in = (const void *)(uintptr_t)t->ptr[1];
  if ((t->reduce_mask & (t->reduce_mask - 1)) == 0) {
    /* one reduced dim (sum over dim=-1 and the like): a stride, no division */
    int d = 0;
    while (d < (int)t->ndim - 1 && !(t->reduce_mask & (1u << d))) d++;
    int64_t s = l->strides[1][d];
    for (uint64_t r = r_begin; r < t->rnumel; r += r_step) acc += tsr_rt_load(in, base + (int64_t)r * s, t->dtype[1]);
    return acc;
  }
  for (uint64_t r = r_begin; r < t->rnumel; r += r_step) {
    uint64_t p = r;
    int64_t off = base;
    for (int d = (int)t->ndim - 1; d >= 0; d--) {
      if (!(t->reduce_mask & (1u << d))) continue;
      int64_t n = l->sizes[d];
      off += (int64_t)(p % (uint64_t)n) * l->strides[1][d];
      p /= (uint64_t)n;
    }
    acc += tsr_rt_load(in, off, t->dtype[1]);
  }
  return acc;
}

#endif
