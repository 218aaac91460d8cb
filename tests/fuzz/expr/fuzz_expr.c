/* fuzz_expr.c: libFuzzer target for the JIT operators' expression parser
 * (src/rt/expr*.c): every input, as `len` bytes, goes through
 * tsr_rt_expr_parse_n. It must answer a status or an expression, never
 * crash (ASan, UBSan). Beyond the sanitizers, for what parses (rt/expr.h):
 *  - nodes are within 1..TSR_RT_EXPR_MAX_NODES and the inputs are never 0;
 *  - the canonical text fits TSR_RT_EXPR_MAX_TEXT, parses again, and gives
 *    the same canonical text and the same node count (a fixed point);
 *  - the CUDA text fits 2 * TSR_RT_EXPR_MAX_TEXT;
 *  - evaluation answers (any double, NaN included) without touching more
 *    than its four inputs.
 * A refusal hands out no expression. Built and run by run.sh (registered
 * with ctest as fuzz.expr). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt/expr.h"

#include "../check.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
  tsr_rt_expr_t *e = (tsr_rt_expr_t *)1;
  tsr_status_t st = tsr_rt_expr_parse_n((const char *)data, size, &e);
  if (st) {
    FUZZ_CHECK(e == NULL);
    FUZZ_CHECK(tsr_status_message(st) != NULL);
    tsr_status_free(st);
    return 0;
  }
  FUZZ_CHECK(e != NULL);
  size_t nodes = tsr_rt_expr_nodes(e);
  FUZZ_CHECK(nodes >= 1 && nodes <= TSR_RT_EXPR_MAX_NODES);
  FUZZ_CHECK(tsr_rt_expr_inputs(e) != 0 && tsr_rt_expr_inputs(e) <= 15);
  static char canon[TSR_RT_EXPR_MAX_TEXT + 1], again[TSR_RT_EXPR_MAX_TEXT + 1], cuda[2 * TSR_RT_EXPR_MAX_TEXT + 1];
  size_t n = tsr_rt_expr_canonical(e, canon, sizeof(canon));
  FUZZ_CHECK(n <= TSR_RT_EXPR_MAX_TEXT);
  FUZZ_CHECK(tsr_rt_expr_canonical(e, NULL, 0) == n);
  FUZZ_CHECK(tsr_rt_expr_cuda(e, cuda, sizeof(cuda)) <= 2 * TSR_RT_EXPR_MAX_TEXT);
  double in[4] = {0.5, -2, 3, 1e-3};
  (void)tsr_rt_expr_eval(e, in);
  tsr_rt_expr_t *f = NULL;
  st = tsr_rt_expr_parse(canon, &f);
  if (st) fprintf(stderr, "fuzz_expr: canonical text '%s' does not parse: %s\n", canon, tsr_status_message(st));
  FUZZ_CHECK(st == NULL);
  FUZZ_CHECK(tsr_rt_expr_canonical(f, again, sizeof(again)) == n && strcmp(canon, again) == 0);
  FUZZ_CHECK(tsr_rt_expr_nodes(f) == nodes);
  FUZZ_CHECK(tsr_rt_expr_inputs(f) == tsr_rt_expr_inputs(e));
  tsr_rt_expr_free(f);
  tsr_rt_expr_free(e);
  return 0;
}
