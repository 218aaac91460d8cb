/* The interpreter's programs (rt/prog.h): every function the parser
 * emits, random expressions, against the host evaluation of the same
 * expression (tsr_rt_expr_eval, in double), and the refusals. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "reference.h"
#include "rt/ops.h"
#include "rt/prog.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static void agree(const char *text) {
  tsr_rt_expr_t *e = NULL;
  tsr_status_t st = tsr_rt_expr_parse(text, &e);
  cr_assert_null(st, "%s: %s", text, st ? tsr_status_message(st) : "");
  tsr_rt_insn_t prog[TSR_RT_PROG_MAX];
  size_t n = 0;
  st = tsr_rt_prog_build(e, prog, TSR_RT_PROG_MAX, &n);
  cr_assert_null(st, "%s: %s", text, st ? tsr_status_message(st) : "");
  cr_assert_eq(prog[n - 1].op, TSR_RT_POP_END);
  for (int k = 0; k < 200; k++) {
    float in[4];
    double ind[4];
    for (int i = 0; i < 4; i++) in[i] = (float)tsr_test_urand(&rng, -3, 3), ind[i] = in[i];
    float got = tsr_rt_prog_eval(prog, in[0], in[1], in[2], in[3]);
    double want = tsr_rt_expr_eval(e, ind);
    cr_assert((isnan(got) && isnan(want)) || fabs(got - want) <= 1e-4 * fmax(1, fabs(want)),
              "%s at (%g, %g, %g, %g): %.9g, want %.9g", text, in[0], in[1], in[2], in[3], got, want);
  }
  tsr_rt_expr_free(e);
}

Test(rt_prog, every_function_runs_as_its_host_evaluation) {
  const char *texts[] = {"relu(A)",
                         "sigmoid(A)",
                         "tanh(A)",
                         "exp(A)",
                         "log(abs(A) + 1)",
                         "sqrt(abs(A))",
                         "abs(A)",
                         "sin(A)",
                         "cos(A)",
                         "neg(A)",
                         "-A",
                         "gelu(A)",
                         "hardsigmoid(A)",
                         "hardswish(A)",
                         "softplus(A * 10)",
                         "A + B",
                         "A - B",
                         "A * B",
                         "A / (abs(B) + 1)",
                         "abs(A) ** B",
                         "pow(abs(A) + 0.5, B)",
                         "max(A, B)",
                         "min(A, 0)",
                         "maximum(A, B)",
                         "minimum(A, B)",
                         "leaky_relu(A, 0.1)",
                         "elu(A, 0.8)",
                         "clamp_min(A, -1)",
                         "clamp_max(A, 1)",
                         "clamp(A, -1, B)",
                         "hardtanh(A, -0.5, 0.5)",
                         "A * B + C",
                         "sigmoid(A) * (B - 0.5)",
                         "max(A, 0) + clamp(B, -1, 1)",
                         "A * 0.5 + B - sigmoid(C) * D",
                         "2 ** -A",
                         "-A ** 2",
                         "((A + B) * (C - D)) / (1 + abs(A * B * C * D))"};
  for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) agree(texts[i]);
}

Test(rt_prog, deep_and_long_expressions) {
  /* a chain of 60 terms (tall on one side), and nesting 60 deep */
  char buf[4096];
  size_t o = 0;
  o += (size_t)snprintf(buf + o, sizeof(buf) - o, "A");
  for (int i = 0; i < 60; i++) o += (size_t)snprintf(buf + o, sizeof(buf) - o, " + %d * B", i % 7); /* 241 nodes */
  agree(buf);
  o = 0;
  for (int i = 0; i < 60; i++) o += (size_t)snprintf(buf + o, sizeof(buf) - o, "(A + ");
  o += (size_t)snprintf(buf + o, sizeof(buf) - o, "B");
  for (int i = 0; i < 60; i++) o += (size_t)snprintf(buf + o, sizeof(buf) - o, ")");
  agree(buf);
}

Test(rt_prog, refusals) {
  tsr_rt_insn_t prog[TSR_RT_PROG_MAX];
  tsr_status_t st = tsr_rt_prog_build(NULL, prog, TSR_RT_PROG_MAX, NULL);
  cr_assert_not_null(st);
  tsr_status_free(st);
  tsr_rt_expr_t *e = NULL;
  cr_assert_null(tsr_rt_expr_parse("A + 1", &e));
  st = tsr_rt_prog_build(e, prog, 8, NULL); /* no room */
  cr_assert_not_null(st);
  cr_assert_eq(tsr_status_code(st), TSR_INVALID_ARGUMENT);
  tsr_status_free(st);
  tsr_rt_expr_free(e);
}
