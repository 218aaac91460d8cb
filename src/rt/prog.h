/* rt/prog.h: JIT operators interpreted (the default way to run them on the
 * GPU; docs/runtime.md "JIT operators").
 *
 * An operator's expression (rt/expr.h) becomes a program: its nodes in
 * post-order as instructions of a stack machine (an input or a number
 * pushes; a function pops its arguments and pushes its result; the value
 * left is the result). tsr_rt_prog_build makes it on the host when the
 * operator is registered, and the CUDA backend copies it into the
 * operator's slot of a table in device memory: the operator runs from the
 * next task on, with no compile. The persistent kernel copies a task's
 * program into shared memory and evaluates it per element with the scalar
 * functions of the builtin operators (rt/scalar.h), in float.
 *
 * Compiled generations of the kernel (rt/jit.h) remain, with
 * TESSERA_RT_JIT=compile: they run an operator as machine code, at the cost
 * of a link (about 60-100 ms) or a compile (about 40 s) per new operator. */
#ifndef TESSERA_RT_PROG_H
#define TESSERA_RT_PROG_H

#include <stdint.h>

#define TSR_RT_PROG_MAX 264  /* instructions a program holds, its end included (expressions: 256 nodes) */
#define TSR_RT_PROG_STACK 72 /* values a program's stack holds (expressions: 64 levels) */

typedef enum tsr_rt_pop_e {
  TSR_RT_POP_END = 0,
  TSR_RT_POP_INPUT, /* push input `arg` */
  TSR_RT_POP_CONST, /* push `value` */
  /* one argument */
  TSR_RT_POP_NEG,
  TSR_RT_POP_RELU,
  TSR_RT_POP_SIGMOID,
  TSR_RT_POP_TANH,
  TSR_RT_POP_EXP,
  TSR_RT_POP_LOG,
  TSR_RT_POP_SQRT,
  TSR_RT_POP_ABS,
  TSR_RT_POP_SIN,
  TSR_RT_POP_COS,
  TSR_RT_POP_GELU,
  TSR_RT_POP_HARDSIGMOID,
  TSR_RT_POP_HARDSWISH,
  TSR_RT_POP_SOFTPLUS,
  /* two */
  TSR_RT_POP_ADD,
  TSR_RT_POP_SUB,
  TSR_RT_POP_MUL,
  TSR_RT_POP_DIV,
  TSR_RT_POP_POW,
  TSR_RT_POP_MAXIMUM,
  TSR_RT_POP_MINIMUM,
  TSR_RT_POP_LEAKY_RELU,
  TSR_RT_POP_ELU,
  /* three */
  TSR_RT_POP_CLAMP,
} tsr_rt_pop_t;

typedef struct tsr_rt_insn_s {
  uint8_t op;  /* tsr_rt_pop_t */
  uint8_t arg; /* POP_INPUT: 0..3 */
  uint16_t pad;
  float value; /* POP_CONST */
} tsr_rt_insn_t;

#ifndef __CUDACC__
#include <stddef.h>

#include "rt/expr.h"
#include "tessera/status.h"

/* The program of `expr` into out[0 .. cap) (cap >= TSR_RT_PROG_MAX), ended
 * by TSR_RT_POP_END; *out_n (may be NULL) its instructions with the end. */
TSR_MUST_USE tsr_status_t tsr_rt_prog_build(const tsr_rt_expr_t *expr, tsr_rt_insn_t *out, size_t cap, size_t *out_n);
#endif

/* Evaluation, where TSR_RT_FN and the scalar functions are defined (rt/ops.h). */
#ifdef TSR_RT_FN
TSR_RT_FN float tsr_rt_prog_eval(const tsr_rt_insn_t *p, float a, float b, float c, float d) {
  float st[TSR_RT_PROG_STACK];
  int sp = 0;
  for (int i = 0; i < TSR_RT_PROG_MAX; i++) {
    const tsr_rt_insn_t in = p[i];
    if (in.op == TSR_RT_POP_END) break;
    if (in.op == TSR_RT_POP_INPUT) {
      st[sp++] = in.arg == 0 ? a : in.arg == 1 ? b : in.arg == 2 ? c : d;
      continue;
    }
    if (in.op == TSR_RT_POP_CONST) {
      st[sp++] = in.value;
      continue;
    }
    if (in.op <= TSR_RT_POP_SOFTPLUS) {
      float x = st[sp - 1], r;
      switch (in.op) {
        case TSR_RT_POP_NEG: r = -x; break;
        case TSR_RT_POP_RELU: r = tsr_rt_f_relu(x); break;
        case TSR_RT_POP_SIGMOID: r = tsr_rt_f_sigmoid(x); break;
        case TSR_RT_POP_TANH: r = tsr_rt_f_tanh(x); break;
        case TSR_RT_POP_EXP: r = tsr_rt_f_exp(x); break;
        case TSR_RT_POP_LOG: r = tsr_rt_f_log(x); break;
        case TSR_RT_POP_SQRT: r = tsr_rt_f_sqrt(x); break;
        case TSR_RT_POP_ABS: r = tsr_rt_f_abs(x); break;
        case TSR_RT_POP_SIN: r = tsr_rt_f_sin(x); break;
        case TSR_RT_POP_COS: r = tsr_rt_f_cos(x); break;
        case TSR_RT_POP_GELU: r = tsr_rt_f_gelu(x); break;
        case TSR_RT_POP_HARDSIGMOID: r = tsr_rt_f_hardsigmoid(x); break;
        case TSR_RT_POP_HARDSWISH: r = tsr_rt_f_hardswish(x); break;
        default: r = tsr_rt_f_softplus(x); break;
      }
      st[sp - 1] = r;
      continue;
    }
    if (in.op <= TSR_RT_POP_ELU) {
      float x = st[sp - 2], y = st[sp - 1], r;
      switch (in.op) {
        case TSR_RT_POP_ADD: r = x + y; break;
        case TSR_RT_POP_SUB: r = x - y; break;
        case TSR_RT_POP_MUL: r = x * y; break;
        case TSR_RT_POP_DIV: r = x / y; break;
        case TSR_RT_POP_POW: r = tsr_rt_f_pow(x, y); break;
        case TSR_RT_POP_MAXIMUM: r = tsr_rt_f_maximum(x, y); break;
        case TSR_RT_POP_MINIMUM: r = tsr_rt_f_minimum(x, y); break;
        case TSR_RT_POP_LEAKY_RELU: r = tsr_rt_f_leaky_relu(x, y); break;
        default: r = tsr_rt_f_elu(x, y); break;
      }
      st[--sp - 1] = r;
      continue;
    }
    st[sp - 3] = tsr_rt_f_clamp(st[sp - 3], st[sp - 2], st[sp - 1]);
    sp -= 2;
  }
  return sp > 0 ? st[0] : 0.f;
}
#endif

#endif
