/* rt/expr_internal.h: what the files of the JIT expressions share (the
 * interface is rt/expr.h). expr.c holds the operations' table, the C locale
 * and the accessors; expr_lex.c reads tokens; expr_parse.c builds the tree
 * from them; expr_print.c prints it; expr_eval.c evaluates it. */
#ifndef TESSERA_RT_EXPR_INTERNAL_H
#define TESSERA_RT_EXPR_INTERNAL_H

#include <locale.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rt/expr.h"
#include "tessera/status.h"

/* ---- operations ---------------------------------------------------------- */

typedef enum tsr__rt_op_e {
  TSR__OP_INPUT = 0,
  TSR__OP_CONST,
  TSR__OP_NEG,
  TSR__OP_ADD,
  TSR__OP_SUB,
  TSR__OP_MUL,
  TSR__OP_DIV,
  TSR__OP_POW,
  TSR__OP_RELU,
  TSR__OP_SIGMOID,
  TSR__OP_TANH,
  TSR__OP_EXP,
  TSR__OP_LOG,
  TSR__OP_SQRT,
  TSR__OP_ABS,
  TSR__OP_SIN,
  TSR__OP_COS,
  TSR__OP_GELU,
  TSR__OP_HARDSIGMOID,
  TSR__OP_HARDSWISH,
  TSR__OP_SOFTPLUS,
  TSR__OP_MAXIMUM,
  TSR__OP_MINIMUM,
  TSR__OP_LEAKY_RELU,
  TSR__OP_ELU,
  TSR__OP_CLAMP_MIN,
  TSR__OP_CLAMP_MAX,
  TSR__OP_CLAMP,
  TSR__OP_HARDTANH,
  TSR__OP_COUNT
} tsr__rt_op_t;

typedef struct tsr__rt_op_info_s {
  const char *name; /* canonical spelling; the CUDA helper is tsr_rt_f_<name> */
  char infix;       /* the operator printed between two arguments (for NEG: before one), or 0 */
  uint8_t arity;
} tsr__rt_op_info_t;

/* Indexed by tsr__rt_op_t (expr.c). */
extern const tsr__rt_op_info_t tsr_rt_expr_ops[TSR__OP_COUNT];

/* ---- the tree ------------------------------------------------------------ */

typedef struct tsr__rt_node_s {
  uint8_t op;      /* tsr__rt_op_t */
  uint8_t height;  /* 0 for a leaf, else 1 + the tallest child's; <= TSR_RT_EXPR_MAX_DEPTH */
  uint8_t input;   /* TSR__OP_INPUT: 0..3 for A..D */
  uint16_t kid[3]; /* children, all earlier in the array than this node */
  float value;     /* TSR__OP_CONST */
} tsr__rt_node_t;

struct tsr_rt_expr_s {
  size_t count;    /* nodes, 1..TSR_RT_EXPR_MAX_NODES */
  unsigned inputs; /* bit i: input i is read */
  /* In post-order: children before parents, the root last, so evaluation is
   * one pass over the array. */
  tsr__rt_node_t nodes[];
};

/* ---- numbers in the C locale (expr.c) -------------------------------------- */

/* The C locale, or (locale_t)0 if it could not be made (out of memory). */
locale_t tsr_rt_expr_c_locale(void);

/* ---- tokens, the parser's state and the lexer (expr_lex.c) ----------------- */

typedef enum tsr__rt_tok_e {
  TSR__TOK_END = 0,
  TSR__TOK_NUMBER,
  TSR__TOK_NAME,
  TSR__TOK_LPAREN,
  TSR__TOK_RPAREN,
  TSR__TOK_COMMA,
  TSR__TOK_PLUS,
  TSR__TOK_MINUS,
  TSR__TOK_STAR,
  TSR__TOK_SLASH,
  TSR__TOK_POW,
} tsr__rt_tok_t;

/* Longest piece of the user's text quoted in an error message. */
#define TSR__RT_QUOTE_MAX 32

typedef struct tsr__rt_parser_s {
  const char *text;
  size_t len;
  size_t pos; /* next byte to lex */
  locale_t locale;
  /* the current token: text[at, end) */
  tsr__rt_tok_t tok;
  size_t at;
  size_t end;
  float value;    /* TSR__TOK_NUMBER */
  unsigned level; /* brackets, signs and exponents open around the token */
  size_t count;
  unsigned inputs;
  tsr__rt_node_t nodes[TSR_RT_EXPR_MAX_NODES];
  char number[TSR_RT_EXPR_MAX_TEXT + 1]; /* a number's text, NUL-terminated for strtof */
} tsr__rt_parser_t;

/* An error at byte offset `at`: "column <at+1>: <message>". */
TSR_MUST_USE tsr_status_t tsr_rt_expr_fail(size_t at, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* `n` bytes of the user's text for a message, cut to TSR__RT_QUOTE_MAX bytes
 * with "..." after. */
const char *tsr_rt_expr_quote(const char *s, size_t n, char buf[TSR__RT_QUOTE_MAX + 4]);

/* The first byte at or after `pos` that is not whitespace (or p->len). */
size_t tsr_rt_expr_skip_space(const tsr__rt_parser_t *p, size_t pos);

/* Reads the next token into p->tok, p->at, p->end. */
TSR_MUST_USE tsr_status_t tsr_rt_expr_lex(tsr__rt_parser_t *p);

#endif /* TESSERA_RT_EXPR_INTERNAL_H */
