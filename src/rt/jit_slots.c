/* jit_slots.c: the JIT operators' slots: an operator registered or
 * replaced (hot swap) gets a physical slot of its own, and a replaced
 * version's slot is freed once the tasks that named it are done. */
#include <stdlib.h>
#include <string.h>

#include "rt/internal.h"

/* ---- JIT operators -------------------------------------------------------- */

/* Frees the slots of replaced versions once every task submitted before
 * the replacement is done (so every task that named them). */
static void tsr__reclaim(tsr_rt_t *rt) {
  for (uint32_t s = 0; s < TSR_RT_JIT_OPS; s++) {
    tsr__rt_slot_t *x = &rt->slots[s];
    if (!x->expr || !x->retired_at) continue;
    bool done = true;
    for (uint32_t lane = 0; done && lane < rt->opt.lanes; lane++) done = tsr__rt_done(rt, lane) >= x->retired_at[lane];
    if (done) {
      tsr_rt_expr_free(x->expr);
      free(x->retired_at);
      memset(x, 0, sizeof(*x));
    }
  }
}

/* Parses `text` into a free slot; *out_slot is it. */
TSR_MUST_USE static tsr_status_t tsr__slot_new(tsr_rt_t *rt, const char *text, uint32_t *out_slot) {
  if (!text) return tsr_status_make(TSR_INVALID_ARGUMENT, "no expression");
  tsr__reclaim(rt);
  uint32_t s = 0;
  while (s < TSR_RT_JIT_OPS && rt->slots[s].expr) s++;
  if (s == TSR_RT_JIT_OPS)
    return tsr_status_make(TSR_RESOURCE_EXHAUSTED,
                           "%d JIT operator versions are in use (replaced ones are freed when their tasks are done)",
                           TSR_RT_JIT_OPS);
  tsr_rt_expr_t *e = NULL;
  TSR_RETURN_IF_ERROR(tsr_status_annotate(tsr_rt_expr_parse(text, &e), "expression '%.80s'", text));
  unsigned mask = tsr_rt_expr_inputs(e), arity = 0;
  while (mask >> arity) arity++;
  rt->slots[s] = (tsr__rt_slot_t){.expr = e, .arity = arity};
  if (rt->be->jit_add) {
    tsr_status_t st = rt->be->jit_add(rt, s);
    if (st) {
      tsr_rt_expr_free(e);
      memset(&rt->slots[s], 0, sizeof(rt->slots[s]));
      return st;
    }
  }
  *out_slot = s;
  return NULL;
}

tsr_status_t tsr_rt_register(tsr_rt_t *rt, const char *expression, tsr_rt_op_t *out_op) {
  if (rt->jit_ops == TSR_RT_JIT_OPS)
    return tsr_status_make(TSR_RESOURCE_EXHAUSTED, "%d JIT operators are registered already", TSR_RT_JIT_OPS);
  uint32_t s;
  TSR_RETURN_IF_ERROR(tsr__slot_new(rt, expression, &s));
  rt->jit_slot[rt->jit_ops] = s;
  *out_op = (tsr_rt_op_t)(TSR_RT_OP_JIT_FIRST + (int)rt->jit_ops++);
  return NULL;
}

tsr_status_t tsr_rt_replace(tsr_rt_t *rt, tsr_rt_op_t op, const char *expression) {
  if (!tsr_rt_jit(op) || (uint32_t)op - TSR_RT_OP_JIT_FIRST >= rt->jit_ops)
    return tsr_status_make(TSR_INVALID_ARGUMENT, "operator %d is not a registered JIT operator", (int)op);
  uint32_t k = (uint32_t)op - TSR_RT_OP_JIT_FIRST, old = rt->jit_slot[k], s;
  TSR_RETURN_IF_ERROR(tsr__slot_new(rt, expression, &s));
  if (rt->slots[s].arity != rt->slots[old].arity) {
    uint32_t a = rt->slots[s].arity, b = rt->slots[old].arity;
    tsr_rt_expr_free(rt->slots[s].expr);
    memset(&rt->slots[s], 0, sizeof(rt->slots[s]));
    return tsr_status_make(TSR_INVALID_ARGUMENT, "the new expression takes %u inputs, the operator %u", a, b);
  }
  uint64_t *at = malloc((size_t)rt->opt.lanes * sizeof(*at));
  if (!at) {
    tsr_rt_expr_free(rt->slots[s].expr);
    memset(&rt->slots[s], 0, sizeof(rt->slots[s]));
    return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory");
  }
  memcpy(at, rt->tail, (size_t)rt->opt.lanes * sizeof(*at));
  /* tasks from now on name the new slot; the old one goes when the tasks
   * before are done */
  rt->jit_slot[k] = s;
  rt->slots[old].retired_at = at;
  tsr__reclaim(rt);
  return NULL;
}
