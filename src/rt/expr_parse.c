/* expr_parse.c: the parser of JIT operator expressions (see rt/expr.h): a
 * recursive descent over expr_lex.c's tokens with explicit limits, into the
 * tree (rt/expr_internal.h). */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt/expr_internal.h"

/* ---- the parser ------------------------------------------------------------ */

/* Every name a function may be called by: the canonical ones and two
 * aliases. */
static const struct {
  const char *name;
  uint8_t op;
} tsr__rt_functions[] = {
    {"relu", TSR__OP_RELU},
    {"sigmoid", TSR__OP_SIGMOID},
    {"tanh", TSR__OP_TANH},
    {"exp", TSR__OP_EXP},
    {"log", TSR__OP_LOG},
    {"sqrt", TSR__OP_SQRT},
    {"abs", TSR__OP_ABS},
    {"sin", TSR__OP_SIN},
    {"cos", TSR__OP_COS},
    {"gelu", TSR__OP_GELU},
    {"hardsigmoid", TSR__OP_HARDSIGMOID},
    {"hardswish", TSR__OP_HARDSWISH},
    {"softplus", TSR__OP_SOFTPLUS},
    {"neg", TSR__OP_NEG},
    {"maximum", TSR__OP_MAXIMUM},
    {"max", TSR__OP_MAXIMUM},
    {"minimum", TSR__OP_MINIMUM},
    {"min", TSR__OP_MINIMUM},
    {"pow", TSR__OP_POW},
    {"add", TSR__OP_ADD},
    {"sub", TSR__OP_SUB},
    {"mul", TSR__OP_MUL},
    {"div", TSR__OP_DIV},
    {"leaky_relu", TSR__OP_LEAKY_RELU},
    {"elu", TSR__OP_ELU},
    {"clamp_min", TSR__OP_CLAMP_MIN},
    {"clamp_max", TSR__OP_CLAMP_MAX},
    {"clamp", TSR__OP_CLAMP},
    {"hardtanh", TSR__OP_HARDTANH},
};
#define TSR__RT_FUNCTION_COUNT (sizeof(tsr__rt_functions) / sizeof(tsr__rt_functions[0]))

/* The current token for "found ...": quoted, or "the end of the expression". */
static const char *tsr__rt_found(const tsr__rt_parser_t *p, char buf[TSR__RT_QUOTE_MAX + 8]) {
  if (p->tok == TSR__TOK_END) return "the end of the expression";
  char q[TSR__RT_QUOTE_MAX + 4];
  snprintf(buf, TSR__RT_QUOTE_MAX + 8, "'%s'", tsr_rt_expr_quote(p->text + p->at, p->end - p->at, q));
  return buf;
}

/* Opens one level of brackets, signs or exponents at `at`. The parser
 * recurses only through a level, so this bounds its stack too. */
TSR_MUST_USE static tsr_status_t tsr__rt_enter(tsr__rt_parser_t *p, size_t at) {
  if (p->level >= TSR_RT_EXPR_MAX_DEPTH)
    return tsr_rt_expr_fail(at,
                            "nesting deeper than %d levels (parentheses, function arguments, signs "
                            "and ** exponents)",
                            TSR_RT_EXPR_MAX_DEPTH);
  p->level++;
  return NULL;
}

/* Appends `node` (its children already in place) made at `at`. */
TSR_MUST_USE static tsr_status_t tsr__rt_add(tsr__rt_parser_t *p, size_t at, tsr__rt_node_t node, uint16_t *out_index) {
  if (p->count == TSR_RT_EXPR_MAX_NODES)
    return tsr_rt_expr_fail(at, "more than %d nodes (numbers, inputs, signs, operators and calls)",
                            TSR_RT_EXPR_MAX_NODES);
  unsigned height = 0;
  for (unsigned k = 0; k < tsr_rt_expr_ops[node.op].arity; k++) {
    unsigned h = p->nodes[node.kid[k]].height + 1u;
    if (h > height) height = h;
  }
  /* The canonical text nests one bracket per level of the tree, so a taller
   * tree could not be parsed back. */
  if (height > TSR_RT_EXPR_MAX_DEPTH)
    return tsr_rt_expr_fail(at,
                            "operations nest deeper than %d levels (a chain such as A+B+C+... counts "
                            "one level per operator: group it with parentheses)",
                            TSR_RT_EXPR_MAX_DEPTH);
  node.height = (uint8_t)height;
  p->nodes[p->count] = node;
  *out_index = (uint16_t)p->count++;
  return NULL;
}

/* Appends operator `op` of the `nkids` operands `kids`: as many as it takes. */
TSR_MUST_USE static tsr_status_t tsr__rt_add_op(tsr__rt_parser_t *p, size_t at, tsr__rt_op_t op, const uint16_t *kids,
                                                unsigned nkids, uint16_t *out_index) {
  tsr__rt_node_t node = {.op = (uint8_t)op};
  if (nkids != tsr_rt_expr_ops[op].arity || nkids > sizeof(node.kid) / sizeof(node.kid[0]))
    return tsr_status_make(TSR_INTERNAL, "expression parser: operator %d takes %u operands, given %u", (int)op,
                           (unsigned)tsr_rt_expr_ops[op].arity, nkids);
  for (unsigned k = 0; k < nkids; k++) node.kid[k] = kids[k];
  return tsr__rt_add(p, at, node, out_index);
}

TSR_MUST_USE static tsr_status_t tsr__rt_parse_expr(tsr__rt_parser_t *p, uint16_t *out_index);
TSR_MUST_USE static tsr_status_t tsr__rt_parse_unary(tsr__rt_parser_t *p, uint16_t *out_index);

/* The arguments of a function called `name` (len bytes) at `at`, whose '('
 * is the current token. */
TSR_MUST_USE static tsr_status_t tsr__rt_parse_call(tsr__rt_parser_t *p, size_t at, const char *name, int len,
                                                    tsr__rt_op_t op, uint16_t *out_index) {
  unsigned arity = tsr_rt_expr_ops[op].arity;
  uint16_t kids[3];
  char found[TSR__RT_QUOTE_MAX + 8];
  TSR_RETURN_IF_ERROR(tsr__rt_enter(p, p->at));
  TSR_RETURN_IF_ERROR(tsr_rt_expr_lex(p));
  for (unsigned k = 0; k < arity; k++) {
    if (k > 0) {
      if (p->tok == TSR__TOK_RPAREN)
        return tsr_rt_expr_fail(p->at, "%.*s takes %u arguments, found %u", len, name, arity, k);
      if (p->tok != TSR__TOK_COMMA)
        return tsr_rt_expr_fail(p->at, "expected ',' after argument %u of %.*s, found %s", k, len, name,
                                tsr__rt_found(p, found));
      TSR_RETURN_IF_ERROR(tsr_rt_expr_lex(p));
    } else if (p->tok == TSR__TOK_RPAREN) {
      return tsr_rt_expr_fail(p->at, "%.*s takes %u argument%s, found none", len, name, arity, arity == 1 ? "" : "s");
    }
    TSR_RETURN_IF_ERROR(tsr__rt_parse_expr(p, &kids[k]));
  }
  if (p->tok != TSR__TOK_RPAREN)
    return tsr_rt_expr_fail(p->at, "expected ')' after the arguments of %.*s (it takes %u), found %s", len, name, arity,
                            tsr__rt_found(p, found));
  p->level--;
  TSR_RETURN_IF_ERROR(tsr_rt_expr_lex(p));
  return tsr__rt_add_op(p, at, op, kids, arity, out_index);
}

TSR_MUST_USE static tsr_status_t tsr__rt_parse_name(tsr__rt_parser_t *p, uint16_t *out_index) {
  const char *name = p->text + p->at;
  size_t len = p->end - p->at, at = p->at;
  /* Whether a '(' follows decides between "unknown name" and "unknown
   * function"; looked at directly so that a bad byte after it is not
   * reported first. */
  size_t after = tsr_rt_expr_skip_space(p, p->end);
  bool call = after < p->len && p->text[after] == '(';
  if (len == 1 && name[0] >= 'A' && name[0] <= 'D') {
    if (call) return tsr_rt_expr_fail(at, "%c is an input, not a function", name[0]);
    tsr__rt_node_t node = {.op = TSR__OP_INPUT, .input = (uint8_t)(name[0] - 'A')};
    p->inputs |= 1u << node.input;
    TSR_RETURN_IF_ERROR(tsr_rt_expr_lex(p));
    return tsr__rt_add(p, at, node, out_index);
  }
  for (size_t i = 0; i < TSR__RT_FUNCTION_COUNT; i++) {
    if (strlen(tsr__rt_functions[i].name) != len || memcmp(tsr__rt_functions[i].name, name, len)) continue;
    TSR_RETURN_IF_ERROR(tsr_rt_expr_lex(p));
    if (p->tok != TSR__TOK_LPAREN) {
      char found[TSR__RT_QUOTE_MAX + 8];
      return tsr_rt_expr_fail(p->at, "expected '(' after the function name %.*s, found %s", (int)len, name,
                              tsr__rt_found(p, found));
    }
    return tsr__rt_parse_call(p, at, name, (int)len, (tsr__rt_op_t)tsr__rt_functions[i].op, out_index);
  }
  char q[TSR__RT_QUOTE_MAX + 4];
  if (call)
    return tsr_rt_expr_fail(at,
                            "unknown function '%s' (functions: relu, sigmoid, tanh, exp, log, sqrt, "
                            "abs, sin, cos, gelu, hardsigmoid, hardswish, softplus, neg, maximum, max, "
                            "minimum, min, pow, add, sub, mul, div, leaky_relu, elu, clamp_min, "
                            "clamp_max, clamp, hardtanh)",
                            tsr_rt_expr_quote(name, len, q));
  return tsr_rt_expr_fail(at, "unknown name '%s' (inputs are A, B, C, D)", tsr_rt_expr_quote(name, len, q));
}

TSR_MUST_USE static tsr_status_t tsr__rt_parse_primary(tsr__rt_parser_t *p, uint16_t *out_index) {
  char found[TSR__RT_QUOTE_MAX + 8];
  switch (p->tok) {
    case TSR__TOK_NUMBER: {
      tsr__rt_node_t node = {.op = TSR__OP_CONST, .value = p->value};
      size_t at = p->at;
      TSR_RETURN_IF_ERROR(tsr_rt_expr_lex(p));
      return tsr__rt_add(p, at, node, out_index);
    }
    case TSR__TOK_NAME: return tsr__rt_parse_name(p, out_index);
    case TSR__TOK_LPAREN: {
      size_t open = p->at;
      TSR_RETURN_IF_ERROR(tsr__rt_enter(p, open));
      TSR_RETURN_IF_ERROR(tsr_rt_expr_lex(p));
      TSR_RETURN_IF_ERROR(tsr__rt_parse_expr(p, out_index));
      if (p->tok != TSR__TOK_RPAREN)
        return tsr_rt_expr_fail(p->at, "expected ')' to close the '(' at column %zu, found %s", open + 1,
                                tsr__rt_found(p, found));
      p->level--;
      return tsr_rt_expr_lex(p);
    }
    default:
      return tsr_rt_expr_fail(p->at, "expected a number, an input (A, B, C, D), a function or '(', found %s",
                              tsr__rt_found(p, found));
  }
}

TSR_MUST_USE static tsr_status_t tsr__rt_parse_power(tsr__rt_parser_t *p, uint16_t *out_index) {
  uint16_t kids[2] = {0, 0};
  TSR_RETURN_IF_ERROR(tsr__rt_parse_primary(p, &kids[0]));
  if (p->tok != TSR__TOK_POW) {
    *out_index = kids[0];
    return NULL;
  }
  size_t at = p->at;
  TSR_RETURN_IF_ERROR(tsr__rt_enter(p, at));
  TSR_RETURN_IF_ERROR(tsr_rt_expr_lex(p));
  /* The exponent is a unary: 2**-1 is allowed, and A**B**C nests to the
   * right through it. */
  TSR_RETURN_IF_ERROR(tsr__rt_parse_unary(p, &kids[1]));
  p->level--;
  return tsr__rt_add_op(p, at, TSR__OP_POW, kids, 2, out_index);
}

TSR_MUST_USE static tsr_status_t tsr__rt_parse_unary(tsr__rt_parser_t *p, uint16_t *out_index) {
  if (p->tok != TSR__TOK_PLUS && p->tok != TSR__TOK_MINUS) return tsr__rt_parse_power(p, out_index);
  bool minus = p->tok == TSR__TOK_MINUS;
  size_t at = p->at;
  uint16_t kid = 0;
  TSR_RETURN_IF_ERROR(tsr__rt_enter(p, at));
  TSR_RETURN_IF_ERROR(tsr_rt_expr_lex(p));
  TSR_RETURN_IF_ERROR(tsr__rt_parse_unary(p, &kid));
  p->level--;
  if (!minus) { /* a '+' sign changes nothing, so it makes no node */
    *out_index = kid;
    return NULL;
  }
  return tsr__rt_add_op(p, at, TSR__OP_NEG, &kid, 1, out_index);
}

TSR_MUST_USE static tsr_status_t tsr__rt_parse_term(tsr__rt_parser_t *p, uint16_t *out_index) {
  uint16_t kids[2];
  TSR_RETURN_IF_ERROR(tsr__rt_parse_unary(p, &kids[0]));
  while (p->tok == TSR__TOK_STAR || p->tok == TSR__TOK_SLASH) {
    tsr__rt_op_t op = p->tok == TSR__TOK_STAR ? TSR__OP_MUL : TSR__OP_DIV;
    size_t at = p->at;
    TSR_RETURN_IF_ERROR(tsr_rt_expr_lex(p));
    TSR_RETURN_IF_ERROR(tsr__rt_parse_unary(p, &kids[1]));
    TSR_RETURN_IF_ERROR(tsr__rt_add_op(p, at, op, kids, 2, &kids[0]));
  }
  *out_index = kids[0];
  return NULL;
}

TSR_MUST_USE static tsr_status_t tsr__rt_parse_expr(tsr__rt_parser_t *p, uint16_t *out_index) {
  uint16_t kids[2];
  TSR_RETURN_IF_ERROR(tsr__rt_parse_term(p, &kids[0]));
  while (p->tok == TSR__TOK_PLUS || p->tok == TSR__TOK_MINUS) {
    tsr__rt_op_t op = p->tok == TSR__TOK_PLUS ? TSR__OP_ADD : TSR__OP_SUB;
    size_t at = p->at;
    TSR_RETURN_IF_ERROR(tsr_rt_expr_lex(p));
    TSR_RETURN_IF_ERROR(tsr__rt_parse_term(p, &kids[1]));
    TSR_RETURN_IF_ERROR(tsr__rt_add_op(p, at, op, kids, 2, &kids[0]));
  }
  *out_index = kids[0];
  return NULL;
}

/* The whole text: one expression, then nothing. */
TSR_MUST_USE static tsr_status_t tsr__rt_parse_all(tsr__rt_parser_t *p) {
  /* Bytes first: whatever else is wrong, a NUL or a non-ASCII byte means the
   * text is not what its writer thinks it is. */
  for (size_t i = 0; i < p->len; i++) {
    unsigned char b = (unsigned char)p->text[i];
    if (b == 0) return tsr_rt_expr_fail(i, "NUL byte inside the expression");
    if (b >= 0x80) return tsr_rt_expr_fail(i, "byte 0x%02x is not ASCII (expressions are ASCII text)", b);
  }
  TSR_RETURN_IF_ERROR(tsr_rt_expr_lex(p));
  if (p->tok == TSR__TOK_END) return tsr_rt_expr_fail(0, "empty expression");
  uint16_t root;
  TSR_RETURN_IF_ERROR(tsr__rt_parse_expr(p, &root));
  if (p->tok != TSR__TOK_END) {
    char found[TSR__RT_QUOTE_MAX + 8];
    if (p->tok == TSR__TOK_RPAREN) return tsr_rt_expr_fail(p->at, "unmatched ')'");
    return tsr_rt_expr_fail(p->at, "expected an operator or the end of the expression, found %s",
                            tsr__rt_found(p, found));
  }
  if (p->inputs == 0)
    return tsr_rt_expr_fail(0, "the expression uses no input (it must read at least one of A, B, C, D)");
  return NULL;
}

tsr_status_t tsr_rt_expr_parse_n(const char *text, size_t len, tsr_rt_expr_t **out_expr) {
  if (!out_expr) return tsr_status_make(TSR_INVALID_ARGUMENT, "missing out_expr");
  *out_expr = NULL;
  if (!text) return tsr_status_make(TSR_INVALID_ARGUMENT, "missing expression text");
  if (len > TSR_RT_EXPR_MAX_TEXT)
    return tsr_rt_expr_fail(TSR_RT_EXPR_MAX_TEXT, "the expression is longer than %d bytes", TSR_RT_EXPR_MAX_TEXT);
  if (len == 0) return tsr_rt_expr_fail(0, "empty expression");
  locale_t locale = tsr_rt_expr_c_locale();
  if (locale == (locale_t)0) return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory making the C locale");
  /* About 8 KiB: on the heap, so that a caller on a small stack is safe. */
  tsr__rt_parser_t *p = malloc(sizeof(*p));
  if (!p) return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory parsing an expression");
  p->text = text;
  p->len = len;
  p->pos = 0;
  p->locale = locale;
  p->level = 0;
  p->count = 0;
  p->inputs = 0;
  tsr_status_t st = tsr__rt_parse_all(p);
  if (st) {
    free(p);
    return st;
  }
  /* count <= TSR_RT_EXPR_MAX_NODES, so the size cannot overflow. */
  tsr_rt_expr_t *e = malloc(sizeof(*e) + p->count * sizeof(tsr__rt_node_t));
  if (!e) {
    free(p);
    return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory parsing an expression");
  }
  e->count = p->count;
  e->inputs = p->inputs;
  memcpy(e->nodes, p->nodes, p->count * sizeof(tsr__rt_node_t));
  free(p);
  *out_expr = e;
  return NULL;
}

tsr_status_t tsr_rt_expr_parse(const char *text, tsr_rt_expr_t **out_expr) {
  if (out_expr) *out_expr = NULL;
  if (!text || !out_expr) return tsr_rt_expr_parse_n(text, 0, out_expr);
  /* Reads no further than one byte past the limit. */
  return tsr_rt_expr_parse_n(text, strnlen(text, TSR_RT_EXPR_MAX_TEXT + 1), out_expr);
}
