/* names.c: the operators' names (tsr_rt_op_name); what each takes is in
 * rt/internal.h (tsr_rt_inputs). */
#include "rt/internal.h"

static const char *const tsr__op_names[TSR_RT_OP_COUNT_] = {
    [TSR_RT_OP_ADD] = "add",
    [TSR_RT_OP_SUB] = "sub",
    [TSR_RT_OP_MUL] = "mul",
    [TSR_RT_OP_DIV] = "div",
    [TSR_RT_OP_MAXIMUM] = "maximum",
    [TSR_RT_OP_MINIMUM] = "minimum",
    [TSR_RT_OP_POW] = "pow",
    [TSR_RT_OP_RELU] = "relu",
    [TSR_RT_OP_SIGMOID] = "sigmoid",
    [TSR_RT_OP_TANH] = "tanh",
    [TSR_RT_OP_EXP] = "exp",
    [TSR_RT_OP_LOG] = "log",
    [TSR_RT_OP_SQRT] = "sqrt",
    [TSR_RT_OP_ABS] = "abs",
    [TSR_RT_OP_SIN] = "sin",
    [TSR_RT_OP_COS] = "cos",
    [TSR_RT_OP_GELU] = "gelu",
    [TSR_RT_OP_HARDSIGMOID] = "hardsigmoid",
    [TSR_RT_OP_HARDSWISH] = "hardswish",
    [TSR_RT_OP_LEAKY_RELU] = "leaky_relu",
    [TSR_RT_OP_HARDTANH] = "hardtanh",
    [TSR_RT_OP_ELU] = "elu",
    [TSR_RT_OP_SOFTPLUS] = "softplus",
    [TSR_RT_OP_CLAMP] = "clamp",
    [TSR_RT_OP_CLAMP_MIN] = "clamp_min",
    [TSR_RT_OP_CLAMP_MAX] = "clamp_max",
    [TSR_RT_OP_COPY] = "copy",
    [TSR_RT_OP_SUM] = "sum",
    [TSR_RT_OP_MEAN] = "mean",
};

const char *tsr_rt_op_name(tsr_rt_op_t op) {
  if ((int)op >= TSR_RT_OP_JIT_FIRST && (int)op < TSR_RT_OP_JIT_FIRST + TSR_RT_JIT_OPS) return "jit";
  return op > 0 && op < TSR_RT_OP_COUNT_ && tsr__op_names[op] ? tsr__op_names[op] : "?";
}
