/* expr_eval.c: the evaluator of JIT operator expressions (see rt/expr.h):
 * the tree in double on the host, with PyTorch's semantics. */
#include <math.h>

#include "rt/expr_internal.h"

/* ---- evaluation ------------------------------------------------------------ */

/* PyTorch's maximum and minimum: NaN if either side is NaN. */
static double tsr__rt_maximum(double x, double y) {
  if (isnan(x)) return x;
  if (isnan(y)) return y;
  return x > y ? x : y;
}

static double tsr__rt_minimum(double x, double y) {
  if (isnan(x)) return x;
  if (isnan(y)) return y;
  return x < y ? x : y;
}

/* torch.clamp: min(max(x, lo), hi), so hi wins when lo > hi. */
static double tsr__rt_clamp(double x, double lo, double hi) { return tsr__rt_minimum(tsr__rt_maximum(x, lo), hi); }

static double tsr__rt_hardsigmoid(double x) { return tsr__rt_clamp(x / 6.0 + 0.5, 0.0, 1.0); }

double tsr_rt_expr_eval(const tsr_rt_expr_t *expr, const double in[4]) {
  /* the parser makes 1 to TSR_RT_EXPR_MAX_NODES nodes */
  if (!expr || !in || expr->count == 0 || expr->count > TSR_RT_EXPR_MAX_NODES) return NAN;
  double v[TSR_RT_EXPR_MAX_NODES];
  for (size_t i = 0; i < expr->count; i++) {
    const tsr__rt_node_t *n = &expr->nodes[i];
    double x = 0, y = 0, z = 0;
    switch (tsr_rt_expr_ops[n->op].arity) {
      case 3: z = v[n->kid[2]]; /* fall through */
      case 2: y = v[n->kid[1]]; /* fall through */
      case 1: x = v[n->kid[0]]; break;
      default: break;
    }
    double r;
    switch ((tsr__rt_op_t)n->op) {
      case TSR__OP_INPUT: r = in[n->input]; break;
      case TSR__OP_CONST: r = (double)n->value; break;
      case TSR__OP_NEG: r = -x; break;
      case TSR__OP_ADD: r = x + y; break;
      case TSR__OP_SUB: r = x - y; break;
      case TSR__OP_MUL: r = x * y; break;
      case TSR__OP_DIV: r = x / y; break;
      case TSR__OP_POW: r = pow(x, y); break;
      case TSR__OP_RELU: r = isnan(x) ? x : (x > 0 ? x : 0.0); break;
      case TSR__OP_SIGMOID: r = 1.0 / (1.0 + exp(-x)); break;
      case TSR__OP_TANH: r = tanh(x); break;
      case TSR__OP_EXP: r = exp(x); break;
      case TSR__OP_LOG: r = log(x); break;
      case TSR__OP_SQRT: r = sqrt(x); break;
      case TSR__OP_ABS: r = fabs(x); break;
      case TSR__OP_SIN: r = sin(x); break;
      case TSR__OP_COS: r = cos(x); break;
      case TSR__OP_GELU: r = 0.5 * x * (1.0 + erf(x * M_SQRT1_2)); break;
      case TSR__OP_HARDSIGMOID: r = tsr__rt_hardsigmoid(x); break;
      case TSR__OP_HARDSWISH: r = x * tsr__rt_hardsigmoid(x); break;
      case TSR__OP_SOFTPLUS: r = x > 20.0 ? x : log1p(exp(x)); break;
      case TSR__OP_MAXIMUM:
      case TSR__OP_CLAMP_MIN: r = tsr__rt_maximum(x, y); break;
      case TSR__OP_MINIMUM:
      case TSR__OP_CLAMP_MAX: r = tsr__rt_minimum(x, y); break;
      case TSR__OP_LEAKY_RELU: r = x > 0 ? x : x * y; break;
      case TSR__OP_ELU: r = x > 0 ? x : y * expm1(x); break;
      case TSR__OP_CLAMP:
      case TSR__OP_HARDTANH: r = tsr__rt_clamp(x, y, z); break;
      default: r = NAN; break; /* unreachable: the parser makes only the ops above */
    }
    v[i] = r;
  }
  return v[expr->count - 1];
}
