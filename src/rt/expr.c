/* expr.c: JIT operator expressions (see rt/expr.h): the table of the
 * tree's operations, the C locale that numbers are read and printed in, and
 * the tree's accessors. The lexer, parser, printers and evaluator are
 * expr_lex.c, expr_parse.c, expr_print.c and expr_eval.c (rt/expr_internal.h). */
#include <locale.h>
#include <pthread.h>
#include <stdlib.h>

#include "rt/expr_internal.h"

/* ---- operations ---------------------------------------------------------- */

const tsr__rt_op_info_t tsr_rt_expr_ops[TSR__OP_COUNT] = {
    [TSR__OP_INPUT] = {NULL, 0, 0},
    [TSR__OP_CONST] = {NULL, 0, 0},
    [TSR__OP_NEG] = {"neg", '-', 1},
    [TSR__OP_ADD] = {"add", '+', 2},
    [TSR__OP_SUB] = {"sub", '-', 2},
    [TSR__OP_MUL] = {"mul", '*', 2},
    [TSR__OP_DIV] = {"div", '/', 2},
    [TSR__OP_POW] = {"pow", 0, 2},
    [TSR__OP_RELU] = {"relu", 0, 1},
    [TSR__OP_SIGMOID] = {"sigmoid", 0, 1},
    [TSR__OP_TANH] = {"tanh", 0, 1},
    [TSR__OP_EXP] = {"exp", 0, 1},
    [TSR__OP_LOG] = {"log", 0, 1},
    [TSR__OP_SQRT] = {"sqrt", 0, 1},
    [TSR__OP_ABS] = {"abs", 0, 1},
    [TSR__OP_SIN] = {"sin", 0, 1},
    [TSR__OP_COS] = {"cos", 0, 1},
    [TSR__OP_GELU] = {"gelu", 0, 1},
    [TSR__OP_HARDSIGMOID] = {"hardsigmoid", 0, 1},
    [TSR__OP_HARDSWISH] = {"hardswish", 0, 1},
    [TSR__OP_SOFTPLUS] = {"softplus", 0, 1},
    [TSR__OP_MAXIMUM] = {"maximum", 0, 2},
    [TSR__OP_MINIMUM] = {"minimum", 0, 2},
    [TSR__OP_LEAKY_RELU] = {"leaky_relu", 0, 2},
    [TSR__OP_ELU] = {"elu", 0, 2},
    [TSR__OP_CLAMP_MIN] = {"clamp_min", 0, 2},
    [TSR__OP_CLAMP_MAX] = {"clamp_max", 0, 2},
    [TSR__OP_CLAMP] = {"clamp", 0, 3},
    [TSR__OP_HARDTANH] = {"hardtanh", 0, 3},
};

/* ---- numbers in the C locale ------------------------------------------------
 * strtof and printf follow LC_NUMERIC, and a host program may have set a
 * locale whose decimal point is ','; the cache key must not depend on it. */

static pthread_once_t tsr__rt_locale_once = PTHREAD_ONCE_INIT;
static locale_t tsr__rt_locale_c;

static void tsr__rt_locale_init(void) { tsr__rt_locale_c = newlocale(LC_ALL_MASK, "C", (locale_t)0); }

/* The C locale, or (locale_t)0 if it could not be made (out of memory). */
locale_t tsr_rt_expr_c_locale(void) {
  pthread_once(&tsr__rt_locale_once, tsr__rt_locale_init);
  return tsr__rt_locale_c;
}

/* ---- the tree's accessors ------------------------------------------------ */

void tsr_rt_expr_free(tsr_rt_expr_t *expr) { free(expr); }

unsigned tsr_rt_expr_inputs(const tsr_rt_expr_t *expr) { return expr ? expr->inputs : 0; }

size_t tsr_rt_expr_nodes(const tsr_rt_expr_t *expr) { return expr ? expr->count : 0; }
