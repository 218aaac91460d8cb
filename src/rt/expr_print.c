/* expr_print.c: the printers of JIT operator expressions (see rt/expr.h):
 * the canonical text and the CUDA C expression, numbers in the C locale. */
#include <locale.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt/expr_internal.h"

/* ---- printing ------------------------------------------------------------- */

/* Writes the shortest "%g" text of `f` that strtof reads back as `f` and
 * returns its length: of the precisions that read back (9 digits always
 * do), the one with the shortest text, so 100 is "100", not "1e+02". A
 * function of the float alone, as the canonical text needs. Runs in the C
 * locale (the caller switches to it). */
static size_t tsr__rt_format_float(float f, char buf[32]) {
  size_t best = 0;
  for (int digits = 1; digits <= 9; digits++) {
    char text[32];
    int len = snprintf(text, sizeof(text), "%.*g", digits, (double)f);
    if (len <= 0 || strtof(text, NULL) != f) continue;
    if (best == 0 || (size_t)len < best) {
      memcpy(buf, text, (size_t)len + 1);
      best = (size_t)len;
    }
  }
  return best;
}

typedef struct tsr__rt_out_s {
  char *buf;
  size_t cap;
  size_t len; /* of the whole text, written or not */
} tsr__rt_out_t;

static void tsr__rt_put(tsr__rt_out_t *o, const char *s, size_t n) {
  if (o->cap > 0 && o->len < o->cap - 1) {
    size_t room = o->cap - 1 - o->len;
    memcpy(o->buf + o->len, s, n < room ? n : room);
  }
  o->len += n;
}

static void tsr__rt_puts(tsr__rt_out_t *o, const char *s) { tsr__rt_put(o, s, strlen(s)); }

/* Prints node i and its subtree; recurses at most TSR_RT_EXPR_MAX_DEPTH deep
 * (the tree's height). */
static void tsr__rt_print(const tsr_rt_expr_t *e, size_t i, bool cuda, tsr__rt_out_t *o) {
  const tsr__rt_node_t *n = &e->nodes[i];
  const tsr__rt_op_info_t *info = &tsr_rt_expr_ops[n->op];
  if (n->op == TSR__OP_INPUT) {
    char c = (char)((cuda ? 'a' : 'A') + n->input);
    tsr__rt_put(o, &c, 1);
  } else if (n->op == TSR__OP_CONST) {
    char num[32];
    size_t len = tsr__rt_format_float(n->value, num);
    tsr__rt_put(o, num, len);
    if (cuda) {
      /* "1f" is not a C literal; "1.0f" is. */
      if (!memchr(num, '.', len) && !memchr(num, 'e', len)) tsr__rt_puts(o, ".0");
      tsr__rt_puts(o, "f");
    }
  } else if (info->infix && info->arity == 2) {
    char op[4] = {' ', info->infix, ' ', '\0'};
    tsr__rt_puts(o, "(");
    tsr__rt_print(e, n->kid[0], cuda, o);
    if (cuda)
      tsr__rt_puts(o, op);
    else
      tsr__rt_put(o, &info->infix, 1);
    tsr__rt_print(e, n->kid[1], cuda, o);
    tsr__rt_puts(o, ")");
  } else if (info->infix && cuda) { /* neg: a sign in CUDA, neg(x) in the canonical text */
    tsr__rt_puts(o, "(-");
    tsr__rt_print(e, n->kid[0], cuda, o);
    tsr__rt_puts(o, ")");
  } else {
    if (cuda) tsr__rt_puts(o, "tsr_rt_f_");
    tsr__rt_puts(o, info->name);
    tsr__rt_puts(o, "(");
    for (unsigned k = 0; k < info->arity; k++) {
      if (k > 0) tsr__rt_puts(o, cuda ? ", " : ",");
      tsr__rt_print(e, n->kid[k], cuda, o);
    }
    tsr__rt_puts(o, ")");
  }
}

static size_t tsr__rt_print_all(const tsr_rt_expr_t *expr, bool cuda, char *buf, size_t cap) {
  tsr__rt_out_t o = {buf, cap, 0};
  if (expr) {
    /* Numbers print in the C locale; without one (out of memory at the
     * first use), in the process's. */
    locale_t c = tsr_rt_expr_c_locale();
    locale_t old = c != (locale_t)0 ? uselocale(c) : (locale_t)0;
    tsr__rt_print(expr, expr->count - 1, cuda, &o);
    if (old != (locale_t)0) uselocale(old);
  }
  if (cap > 0) buf[o.len < cap ? o.len : cap - 1] = '\0';
  return o.len;
}

size_t tsr_rt_expr_canonical(const tsr_rt_expr_t *expr, char *buf, size_t cap) {
  return tsr__rt_print_all(expr, false, buf, cap);
}

size_t tsr_rt_expr_cuda(const tsr_rt_expr_t *expr, char *buf, size_t cap) {
  return tsr__rt_print_all(expr, true, buf, cap);
}
