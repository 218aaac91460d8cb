/* rt/scalar.h: the scalar functions of the operators, tsr_rt_f_<name>, in
 * PyTorch's semantics (NaN in gives NaN out; clamp is minimum(maximum)).
 * One definition for three compilers: C (rt/ops.h, the CPU backend), nvcc
 * (kernel.cu) and NVRTC, which gets this file's text (embedded in the
 * library, rt/jit.c) ahead of a JIT operator's source. So it includes
 * nothing and uses only the float math functions all three know; the
 * includer defines TSR_RT_FN. */
#ifndef TESSERA_RT_SCALAR_H
#define TESSERA_RT_SCALAR_H

TSR_RT_FN float tsr_rt_f_relu(float x) { return x > 0.f ? x : (x != x ? x : 0.f); }
TSR_RT_FN float tsr_rt_f_sigmoid(float x) { return 1.f / (1.f + expf(-x)); }
TSR_RT_FN float tsr_rt_f_tanh(float x) { return tanhf(x); }
TSR_RT_FN float tsr_rt_f_exp(float x) { return expf(x); }
TSR_RT_FN float tsr_rt_f_log(float x) { return logf(x); }
TSR_RT_FN float tsr_rt_f_sqrt(float x) { return sqrtf(x); }
TSR_RT_FN float tsr_rt_f_abs(float x) { return fabsf(x); }
TSR_RT_FN float tsr_rt_f_sin(float x) { return sinf(x); }
TSR_RT_FN float tsr_rt_f_cos(float x) { return cosf(x); }
TSR_RT_FN float tsr_rt_f_neg(float x) { return -x; }
TSR_RT_FN float tsr_rt_f_gelu(float x) { return 0.5f * x * (1.f + erff(x * 0.70710678118654752f)); }
TSR_RT_FN float tsr_rt_f_maximum(float a, float b) { return a != a || b != b ? a + b : (a > b ? a : b); }
TSR_RT_FN float tsr_rt_f_minimum(float a, float b) { return a != a || b != b ? a + b : (a < b ? a : b); }
/* PyTorch's clamp: minimum(maximum(x, lo), hi), a NaN anywhere gives NaN,
 * and lo > hi gives hi */
TSR_RT_FN float tsr_rt_f_clamp(float x, float lo, float hi) { return tsr_rt_f_minimum(tsr_rt_f_maximum(x, lo), hi); }
TSR_RT_FN float tsr_rt_f_hardsigmoid(float x) { return tsr_rt_f_clamp(x / 6.f + 0.5f, 0.f, 1.f); }
TSR_RT_FN float tsr_rt_f_hardswish(float x) { return x * tsr_rt_f_hardsigmoid(x); }
TSR_RT_FN float tsr_rt_f_softplus(float x) { return x > 20.f ? x : log1pf(expf(x)); }
TSR_RT_FN float tsr_rt_f_add(float a, float b) { return a + b; }
TSR_RT_FN float tsr_rt_f_sub(float a, float b) { return a - b; }
TSR_RT_FN float tsr_rt_f_mul(float a, float b) { return a * b; }
TSR_RT_FN float tsr_rt_f_div(float a, float b) { return a / b; }
TSR_RT_FN float tsr_rt_f_pow(float a, float b) { return powf(a, b); }
TSR_RT_FN float tsr_rt_f_max(float a, float b) { return tsr_rt_f_maximum(a, b); }
TSR_RT_FN float tsr_rt_f_min(float a, float b) { return tsr_rt_f_minimum(a, b); }
TSR_RT_FN float tsr_rt_f_leaky_relu(float x, float slope) { return x > 0.f ? x : x * slope; }
TSR_RT_FN float tsr_rt_f_elu(float x, float alpha) { return x > 0.f ? x : alpha * expm1f(x); }
TSR_RT_FN float tsr_rt_f_clamp_min(float x, float lo) { return tsr_rt_f_maximum(x, lo); }
TSR_RT_FN float tsr_rt_f_clamp_max(float x, float hi) { return tsr_rt_f_minimum(x, hi); }
TSR_RT_FN float tsr_rt_f_hardtanh(float x, float lo, float hi) { return tsr_rt_f_clamp(x, lo, hi); }
TSR_RT_FN float tsr_rt_f_reciprocal(float x) { return 1.f / x; }
TSR_RT_FN float tsr_rt_f_rsqrt(float x) { return 1.f / sqrtf(x); }
TSR_RT_FN float tsr_rt_f_square(float x) { return x * x; }
TSR_RT_FN float tsr_rt_f_exp2(float x) { return exp2f(x); }
TSR_RT_FN float tsr_rt_f_log1p(float x) { return log1pf(x); }
TSR_RT_FN float tsr_rt_f_expm1(float x) { return expm1f(x); }
/* PyTorch's: x / (1 + exp(-x)), and x * tanh(softplus(x)) with its threshold */
TSR_RT_FN float tsr_rt_f_silu(float x) { return x / (1.f + expf(-x)); }
TSR_RT_FN float tsr_rt_f_mish(float x) { return x * tanhf(tsr_rt_f_softplus(x)); }
/* PyTorch's lerp: the form that is exact at its end, by the weight's size */
TSR_RT_FN float tsr_rt_f_lerp(float a, float b, float w) {
  return fabsf(w) < 0.5f ? a + w * (b - a) : b - (b - a) * (1.f - w);
}
TSR_RT_FN float tsr_rt_f_addcmul(float a, float b, float c, float value) { return a + value * b * c; }
TSR_RT_FN float tsr_rt_f_addcdiv(float a, float b, float c, float value) { return a + value * (b / c); }
TSR_RT_FN float tsr_rt_f_where(float c, float a, float b) { return c != 0.f ? a : b; }

#endif
