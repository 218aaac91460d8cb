/* prog.c: an expression's program for the interpreter (rt/prog.h). */
#include "rt/prog.h"

#include "rt/expr_internal.h"

static int tsr__pop(tsr__rt_op_t op) {
  switch (op) {
    case TSR__OP_NEG: return TSR_RT_POP_NEG;
    case TSR__OP_ADD: return TSR_RT_POP_ADD;
    case TSR__OP_SUB: return TSR_RT_POP_SUB;
    case TSR__OP_MUL: return TSR_RT_POP_MUL;
    case TSR__OP_DIV: return TSR_RT_POP_DIV;
    case TSR__OP_POW: return TSR_RT_POP_POW;
    case TSR__OP_RELU: return TSR_RT_POP_RELU;
    case TSR__OP_SIGMOID: return TSR_RT_POP_SIGMOID;
    case TSR__OP_TANH: return TSR_RT_POP_TANH;
    case TSR__OP_EXP: return TSR_RT_POP_EXP;
    case TSR__OP_LOG: return TSR_RT_POP_LOG;
    case TSR__OP_SQRT: return TSR_RT_POP_SQRT;
    case TSR__OP_ABS: return TSR_RT_POP_ABS;
    case TSR__OP_SIN: return TSR_RT_POP_SIN;
    case TSR__OP_COS: return TSR_RT_POP_COS;
    case TSR__OP_GELU: return TSR_RT_POP_GELU;
    case TSR__OP_HARDSIGMOID: return TSR_RT_POP_HARDSIGMOID;
    case TSR__OP_HARDSWISH: return TSR_RT_POP_HARDSWISH;
    case TSR__OP_SOFTPLUS: return TSR_RT_POP_SOFTPLUS;
    case TSR__OP_MAXIMUM:
    case TSR__OP_CLAMP_MIN: return TSR_RT_POP_MAXIMUM;
    case TSR__OP_MINIMUM:
    case TSR__OP_CLAMP_MAX: return TSR_RT_POP_MINIMUM;
    case TSR__OP_LEAKY_RELU: return TSR_RT_POP_LEAKY_RELU;
    case TSR__OP_ELU: return TSR_RT_POP_ELU;
    case TSR__OP_CLAMP:
    case TSR__OP_HARDTANH: return TSR_RT_POP_CLAMP;
    default: return -1;
  }
}

tsr_status_t tsr_rt_prog_build(const tsr_rt_expr_t *expr, tsr_rt_insn_t *out, size_t cap, size_t *out_n) {
  if (!expr || !out || cap < TSR_RT_PROG_MAX || expr->count == 0 || expr->count >= TSR_RT_PROG_MAX)
    return tsr_status_make(TSR_INVALID_ARGUMENT, "no expression, or no room for its program");
  /* the nodes are in post-order; a stack machine needs each node's
   * children to be the values on top of the stack, in order: checked on a
   * stack of node indices as the program is written */
  uint16_t stack[TSR_RT_PROG_STACK];
  size_t sp = 0;
  for (size_t i = 0; i < expr->count; i++) {
    const tsr__rt_node_t *n = &expr->nodes[i];
    tsr_rt_insn_t in = {0, 0, 0, 0.f};
    unsigned arity = tsr_rt_expr_ops[n->op].arity;
    if (n->op == TSR__OP_INPUT) {
      in.op = TSR_RT_POP_INPUT;
      in.arg = n->input;
    } else if (n->op == TSR__OP_CONST) {
      in.op = TSR_RT_POP_CONST;
      in.value = n->value;
    } else {
      int p = tsr__pop((tsr__rt_op_t)n->op);
      if (p < 0 || arity < 1 || arity > 3 || sp < arity)
        return tsr_status_make(TSR_INTERNAL, "node %zu of the expression has no instruction", i);
      for (unsigned k = 0; k < arity; k++)
        if (stack[sp - arity + k] != n->kid[k])
          return tsr_status_make(TSR_INTERNAL, "node %zu's arguments are not the last values computed", i);
      sp -= arity;
      in.op = (uint8_t)p;
    }
    if (sp == TSR_RT_PROG_STACK) return tsr_status_make(TSR_INVALID_ARGUMENT, "the expression is too deep to run");
    stack[sp++] = (uint16_t)i;
    out[i] = in;
  }
  if (sp != 1) return tsr_status_make(TSR_INTERNAL, "the expression leaves %zu values", sp);
  out[expr->count] = (tsr_rt_insn_t){TSR_RT_POP_END, 0, 0, 0.f};
  if (out_n) *out_n = expr->count + 1;
  return NULL;
}
