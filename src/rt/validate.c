/* validate.c: validation of tasks as tsr_rt_submit does it, in full:
 * tensors, operands against each other, and the shape kept as the last
 * validated, which lets a stream of tasks of one shape be checked by their
 * pointers alone. That fast path (tsr_rt_check, tsr_rt_span, the shape's
 * match and spans) runs for every task and is inline in rt/internal.h. */
#include "rt/internal.h"

/* ---- validation ------------------------------------------------------------ */

/* Validates a tensor and gives its span. */
TSR_MUST_USE static tsr_status_t tsr__check_tensor(const tsr_rt_tensor_t *t, const char *name, tsr__span_t *s) {
  if (t->dtype != TSR_RT_F32 && t->dtype != TSR_RT_F16 && t->dtype != TSR_RT_BF16 && t->dtype != TSR_RT_BOOL)
    return tsr_status_make(TSR_INVALID_ARGUMENT, "%s: unsupported dtype %d (f32, f16, bf16 or bool)", name,
                           (int)t->dtype);
  if (t->ndim > TSR_RT_MAX_DIMS)
    return tsr_status_make(TSR_INVALID_ARGUMENT, "%s: %u dims (at most %d)", name, t->ndim, TSR_RT_MAX_DIMS);
  for (uint32_t d = 0; d < t->ndim; d++)
    if ((uint64_t)t->sizes[d] > (UINT64_C(1) << 40))
      return tsr_status_make(TSR_INVALID_ARGUMENT, "%s: size %lld of dim %u is out of range", name,
                             (long long)t->sizes[d], d);
  bool in_range = tsr_rt_span(t, s);
  if (s->numel > (UINT64_C(1) << 40)) return tsr_status_make(TSR_INVALID_ARGUMENT, "%s: more than 2^40 elements", name);
  if (!s->numel) return NULL;
  if (!t->data) return tsr_status_make(TSR_INVALID_ARGUMENT, "%s: null data pointer", name);
  if ((uintptr_t)t->data % (uintptr_t)tsr__rt_esize(t->dtype))
    return tsr_status_make(TSR_INVALID_ARGUMENT, "%s: data pointer not aligned to its element", name);
  if (!in_range) return tsr_status_make(TSR_INVALID_ARGUMENT, "%s: its strides reach outside the address space", name);
  return NULL;
}

bool tsr_rt_same(const tsr_rt_tensor_t *a, const tsr_rt_tensor_t *b) {
  if (a->data != b->data || a->dtype != b->dtype || a->ndim != b->ndim) return false;
  for (uint32_t d = 0; d < a->ndim; d++)
    if (a->sizes[d] != b->sizes[d] || (a->sizes[d] > 1 && a->strides[d] != b->strides[d])) return false;
  return true;
}

static bool tsr__overlap(const tsr__span_t *a, const tsr__span_t *b) {
  return a->numel && b->numel && a->lo < b->hi && b->lo < a->hi;
}

/* Validates a task; span[0] gets out's span, span[1 + i] in[i]'s. */
tsr_status_t tsr_rt_check_task(const tsr_rt_t *rt, const tsr_rt_task_t *k, tsr__span_t *span) {
  int nin = tsr_rt_inputs(rt, k->op);
  if (!nin) return tsr_status_make(TSR_INVALID_ARGUMENT, "unknown operator %d", (int)k->op);
  if (k->imm_mask >> nin)
    return tsr_status_make(TSR_INVALID_ARGUMENT, "imm_mask 0x%x names an input past the %d %s takes", k->imm_mask, nin,
                           tsr_rt_op_name(k->op));
  if (k->imm_mask && tsr_rt_reduce(k->op))
    return tsr_status_make(TSR_INVALID_ARGUMENT, "imm_mask: a reduction's input cannot be a number");
  TSR_RETURN_IF_ERROR(tsr__check_tensor(&k->out, "out", &span[0]));
  static const char *const names[TSR_RT_MAX_INPUTS] = {"in[0]", "in[1]", "in[2]", "in[3]"};
  for (int i = 0; i < nin; i++) {
    if (tsr_rt_imm(k, i)) {
      span[1 + i] = (tsr__span_t){0, 0, 0, true}; /* a number: no bytes */
      continue;
    }
    TSR_RETURN_IF_ERROR(tsr__check_tensor(&k->in[i], names[i], &span[1 + i]));
  }
  for (uint32_t d = 0; d < k->out.ndim; d++)
    if (k->out.sizes[d] > 1 && k->out.strides[d] == 0)
      return tsr_status_make(TSR_INVALID_ARGUMENT, "out: dim %u has stride 0 (its elements overlap)", d);
  if (tsr_rt_reduce(k->op)) {
    const tsr_rt_tensor_t *in = &k->in[0];
    if (k->reduce_mask >> in->ndim)
      return tsr_status_make(TSR_INVALID_ARGUMENT, "reduce_mask 0x%x names dims past in[0]'s %u", k->reduce_mask,
                             in->ndim);
    uint32_t od = 0;
    for (uint32_t d = 0; d < in->ndim; d++) {
      bool red = k->reduce_mask & (1u << d);
      if (red && !k->keepdim) continue;
      int64_t want = red ? 1 : in->sizes[d];
      if (od >= k->out.ndim || k->out.sizes[od] != want)
        return tsr_status_make(TSR_INVALID_ARGUMENT, "out: shape does not match in[0] reduced over 0x%x%s",
                               k->reduce_mask, k->keepdim ? " (keepdim)" : "");
      od++;
    }
    if (od != k->out.ndim)
      return tsr_status_make(TSR_INVALID_ARGUMENT, "out: %u dims, the reduction gives %u", k->out.ndim, od);
    if (tsr__overlap(&span[0], &span[1])) return tsr_status_make(TSR_INVALID_ARGUMENT, "out overlaps in[0]");
    return NULL;
  }
  for (int i = 0; i < nin; i++) {
    const tsr_rt_tensor_t *in = &k->in[i];
    if (tsr_rt_imm(k, i)) continue;
    if (in->ndim != k->out.ndim)
      return tsr_status_make(TSR_INVALID_ARGUMENT, "in[%d] has %u dims, out %u (give broadcast dims size 1)", i,
                             in->ndim, k->out.ndim);
    for (uint32_t d = 0; d < in->ndim; d++)
      if (in->sizes[d] != k->out.sizes[d] && in->sizes[d] != 1)
        return tsr_status_make(TSR_INVALID_ARGUMENT, "in[%d]: size %lld of dim %u does not broadcast to %lld", i,
                               (long long)in->sizes[d], d, (long long)k->out.sizes[d]);
    if (tsr__overlap(&span[1 + i], &span[0]) && !tsr_rt_same(in, &k->out))
      return tsr_status_make(TSR_INVALID_ARGUMENT,
                             "in[%d] overlaps out without being the same tensor (in place is the same tensor)", i);
  }
  return NULL;
}

/* ---- the last shape validated (its fast path: rt/internal.h) -------------- */

/* Remembers a task's shape, validated in full (spans given). */
void tsr_rt_shape_keep(tsr__rt_shape_t *c, const tsr_rt_task_t *k, int nin, const tsr__span_t *sp) {
  c->valid = true;
  c->op = k->op;
  c->imm_mask = k->imm_mask;
  c->reduce_mask = k->reduce_mask;
  c->keepdim = k->keepdim;
  c->nin = nin;
  bool reduce = tsr_rt_reduce(k->op);
  for (int i = 0; i <= nin; i++) {
    const tsr_rt_tensor_t *t = tsr__rt_operand(k, i);
    if (i && tsr_rt_imm(k, i - 1)) {
      /* a number: no bytes, nothing to check */
      memset(&c->t[i], 0, sizeof(c->t[i]));
      c->numel[i] = 0;
      c->contig[i] = true;
      c->rel_lo[i] = c->rel_hi[i] = 0;
      c->amask[i] = 0;
      c->same[i] = false;
      continue;
    }
    c->t[i] = *t;
    c->t[i].data = NULL;
    uint64_t p = (uint64_t)(uintptr_t)t->data;
    c->numel[i] = sp[i].numel;
    c->contig[i] = sp[i].contig;
    c->rel_lo[i] = sp[i].numel ? (int64_t)(sp[i].lo - p) : 0;
    c->rel_hi[i] = sp[i].numel ? (int64_t)(sp[i].hi - p) : 0;
    c->amask[i] = (uint64_t)tsr__rt_esize(t->dtype) - 1;
    /* the same tensor as out, but for its pointer (a reduction's input never is) */
    bool same = i && !reduce && t->dtype == k->out.dtype && t->ndim == k->out.ndim;
    for (uint32_t d = 0; same && d < t->ndim; d++)
      same = t->sizes[d] == k->out.sizes[d] && (t->sizes[d] <= 1 || t->strides[d] == k->out.strides[d]);
    c->same[i] = same;
  }
}
