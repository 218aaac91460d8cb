/* reference.h: the builtin operators in float64, written apart from the
 * runtime's own arithmetic (rt/scalar.h), for the tests that check it:
 * tests/unit/rt/test_runtime.c (CPU backend) and tests/gpu/rt/rt_gpu.c. */
#ifndef TESSERA_TEST_RT_REFERENCE_H
#define TESSERA_TEST_RT_REFERENCE_H

#include <math.h>

#include "tessera/rt.h"

/* a uniform double in [lo, hi) from a xorshift state */
static inline double tsr_test_urand(uint64_t *state, double lo, double hi) {
  *state ^= *state << 13;
  *state ^= *state >> 7;
  *state ^= *state << 17;
  return lo + (hi - lo) * (double)(*state >> 11) / 9007199254740992.0;
}

static inline double tsr_test_ref(tsr_rt_op_t op, double a, double b, double s0, double s1) {
  switch (op) {
    case TSR_RT_OP_ADD: return a + b;
    case TSR_RT_OP_SUB: return a - b;
    case TSR_RT_OP_MUL: return a * b;
    case TSR_RT_OP_DIV: return a / b;
    case TSR_RT_OP_MAXIMUM: return a > b ? a : b;
    case TSR_RT_OP_MINIMUM: return a < b ? a : b;
    case TSR_RT_OP_POW: return pow(a, b);
    case TSR_RT_OP_RELU: return a > 0 ? a : 0;
    case TSR_RT_OP_SIGMOID: return 1 / (1 + exp(-a));
    case TSR_RT_OP_TANH: return tanh(a);
    case TSR_RT_OP_EXP: return exp(a);
    case TSR_RT_OP_LOG: return log(a);
    case TSR_RT_OP_SQRT: return sqrt(a);
    case TSR_RT_OP_ABS: return fabs(a);
    case TSR_RT_OP_SIN: return sin(a);
    case TSR_RT_OP_COS: return cos(a);
    case TSR_RT_OP_GELU: return 0.5 * a * (1 + erf(a / sqrt(2.0)));
    case TSR_RT_OP_HARDSIGMOID: return fmin(fmax(a / 6 + 0.5, 0), 1);
    case TSR_RT_OP_HARDSWISH: return a * fmin(fmax(a / 6 + 0.5, 0), 1);
    case TSR_RT_OP_LEAKY_RELU: return a > 0 ? a : a * s0;
    case TSR_RT_OP_HARDTANH:
    case TSR_RT_OP_CLAMP: return fmin(fmax(a, s0), s1);
    case TSR_RT_OP_ELU: return a > 0 ? a : s0 * (exp(a) - 1);
    case TSR_RT_OP_SOFTPLUS: return a > 20 ? a : log1p(exp(a));
    case TSR_RT_OP_CLAMP_MIN: return fmax(a, s0);
    case TSR_RT_OP_CLAMP_MAX: return fmin(a, s0);
    case TSR_RT_OP_NEG: return -a;
    case TSR_RT_OP_RECIPROCAL: return 1 / a;
    case TSR_RT_OP_RSQRT: return 1 / sqrt(a);
    case TSR_RT_OP_SQUARE: return a * a;
    case TSR_RT_OP_EXP2: return exp2(a);
    case TSR_RT_OP_LOG1P: return log1p(a);
    case TSR_RT_OP_EXPM1: return expm1(a);
    case TSR_RT_OP_SILU: return a / (1 + exp(-a));
    case TSR_RT_OP_MISH: return a * tanh(a > 20 ? a : log1p(exp(a)));
    case TSR_RT_OP_LERP: return a + s0 * (b - a);
    case TSR_RT_OP_EQ: return a == b;
    case TSR_RT_OP_NE: return a != b;
    case TSR_RT_OP_LT: return a < b;
    case TSR_RT_OP_LE: return a <= b;
    case TSR_RT_OP_GT: return a > b;
    case TSR_RT_OP_GE: return a >= b;
    case TSR_RT_OP_AXPBY: return s0 * a + s1 * b;
    default: return a;
  }
}

/* The ternary operators (and the others, with c unused). */
static inline double tsr_test_ref3(tsr_rt_op_t op, double a, double b, double c, double s0, double s1) {
  switch (op) {
    case TSR_RT_OP_ADDCMUL: return a + s0 * b * c;
    case TSR_RT_OP_ADDCDIV: return a + s0 * (b / c);
    case TSR_RT_OP_LERP_T: return a + c * (b - a);
    case TSR_RT_OP_WHERE: return a != 0 ? b : c;
    case TSR_RT_OP_CLAMP_T: return fmin(fmax(a, b), c);
    case TSR_RT_OP_AXPBYZ: return s0 * a + s1 * b * c;
    case TSR_RT_OP_ADAM_UPDATE: return a + s0 * b / (sqrt(c) + s1);
    default: return tsr_test_ref(op, a, b, s0, s1);
  }
}

/* How many inputs a builtin elementwise operator reads. */
static inline int tsr_test_arity(tsr_rt_op_t op) {
  if (op <= TSR_RT_OP_POW || (op >= TSR_RT_OP_LERP && op <= TSR_RT_OP_GE) || op == TSR_RT_OP_AXPBY) return 2;
  if (op >= TSR_RT_OP_ADDCMUL) return 3;
  return 1;
}
/* Whether its inputs must be positive (logs, roots, powers). */
static inline int tsr_test_positive_only(tsr_rt_op_t op) {
  return op == TSR_RT_OP_LOG || op == TSR_RT_OP_SQRT || op == TSR_RT_OP_POW || op == TSR_RT_OP_RSQRT ||
         op == TSR_RT_OP_LOG1P || op == TSR_RT_OP_ADAM_UPDATE;
}

#endif
