/* expr_lex.c: the lexer of JIT operator expressions (see rt/expr.h): the
 * text's tokens, numbers read in the C locale, and the errors that point at
 * a column. */
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt/expr_internal.h"

/* An error at byte offset `at`: "column <at+1>: <message>". */
__attribute__((format(printf, 2, 3))) tsr_status_t tsr_rt_expr_fail(size_t at, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  return tsr_status_make(TSR_INVALID_ARGUMENT, "column %zu: %s", at + 1, msg);
}

/* `n` bytes of the user's text for a message, cut to TSR__RT_QUOTE_MAX bytes
 * with "..." after. */
const char *tsr_rt_expr_quote(const char *s, size_t n, char buf[TSR__RT_QUOTE_MAX + 4]) {
  snprintf(buf, TSR__RT_QUOTE_MAX + 4, "%.*s%s", (int)(n > TSR__RT_QUOTE_MAX ? TSR__RT_QUOTE_MAX : n), s,
           n > TSR__RT_QUOTE_MAX ? "..." : "");
  return buf;
}

static bool tsr__rt_is_digit(char c) { return c >= '0' && c <= '9'; }
static bool tsr__rt_is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static bool tsr__rt_is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

size_t tsr_rt_expr_skip_space(const tsr__rt_parser_t *p, size_t pos) {
  while (pos < p->len && tsr__rt_is_space(p->text[pos])) pos++;
  return pos;
}

TSR_MUST_USE static tsr_status_t tsr__rt_lex_number(tsr__rt_parser_t *p) {
  const char *s = p->text;
  size_t start = p->pos, i = p->pos;
  char q[TSR__RT_QUOTE_MAX + 4];
  while (i < p->len && tsr__rt_is_digit(s[i])) i++;
  if (i < p->len && s[i] == '.') {
    i++;
    while (i < p->len && tsr__rt_is_digit(s[i])) i++;
  }
  if (i < p->len && (s[i] == 'e' || s[i] == 'E')) {
    i++;
    if (i < p->len && (s[i] == '+' || s[i] == '-')) i++;
    if (i == p->len || !tsr__rt_is_digit(s[i]))
      return tsr_rt_expr_fail(i, "expected the digits of the exponent of '%s'",
                              tsr_rt_expr_quote(s + start, i - start, q));
    while (i < p->len && tsr__rt_is_digit(s[i])) i++;
  }
  size_t n = i - start;
  if (i < p->len && (tsr__rt_is_alpha(s[i]) || tsr__rt_is_digit(s[i]) || s[i] == '.')) {
    if (n == 1 && s[start] == '0' && (s[i] == 'x' || s[i] == 'X'))
      return tsr_rt_expr_fail(start, "hexadecimal numbers are not supported");
    if (s[i] == '.')
      return tsr_rt_expr_fail(i, "unexpected '.' after the number '%s'", tsr_rt_expr_quote(s + start, n, q));
    return tsr_rt_expr_fail(i, "unexpected '%c' after the number '%s' (numbers take no suffix)", s[i],
                            tsr_rt_expr_quote(s + start, n, q));
  }
  /* The token is exactly what strtof reads: no sign, hex, inf or nan can
   * start with a digit or a '.', and nothing of a number follows it. */
  memcpy(p->number, s + start, n);
  p->number[n] = '\0';
  char *after = NULL;
  float f = strtof_l(p->number, &after, p->locale);
  if (after != p->number + n)
    return tsr_rt_expr_fail(start, "'%s' is not a number", tsr_rt_expr_quote(s + start, n, q));
  if (isinf(f))
    return tsr_rt_expr_fail(start, "the number '%s' is too large for a float (at most 3.4028235e+38)",
                            tsr_rt_expr_quote(s + start, n, q));
  p->tok = TSR__TOK_NUMBER;
  p->value = f;
  p->end = p->pos = i;
  return NULL;
}

/* Reads the next token into p->tok, p->at, p->end. */
tsr_status_t tsr_rt_expr_lex(tsr__rt_parser_t *p) {
  const char *s = p->text;
  p->pos = tsr_rt_expr_skip_space(p, p->pos);
  p->at = p->end = p->pos;
  if (p->pos == p->len) {
    p->tok = TSR__TOK_END;
    return NULL;
  }
  char c = s[p->pos];
  char next = p->pos + 1 < p->len ? s[p->pos + 1] : '\0';
  if (tsr__rt_is_digit(c) || (c == '.' && tsr__rt_is_digit(next))) return tsr__rt_lex_number(p);
  if (tsr__rt_is_alpha(c)) {
    size_t i = p->pos;
    while (i < p->len && (tsr__rt_is_alpha(s[i]) || tsr__rt_is_digit(s[i]))) i++;
    p->tok = TSR__TOK_NAME;
    p->end = p->pos = i;
    return NULL;
  }
  size_t width = 1;
  switch (c) {
    case '(': p->tok = TSR__TOK_LPAREN; break;
    case ')': p->tok = TSR__TOK_RPAREN; break;
    case ',': p->tok = TSR__TOK_COMMA; break;
    case '+': p->tok = TSR__TOK_PLUS; break;
    case '-': p->tok = TSR__TOK_MINUS; break;
    case '/': p->tok = TSR__TOK_SLASH; break;
    case '*':
      if (next == '*') {
        p->tok = TSR__TOK_POW;
        width = 2;
      } else {
        p->tok = TSR__TOK_STAR;
      }
      break;
    case '<':
    case '>':
    case '=':
    case '!':
      if (next == '=' || next == c) width = 2;
      /* "<<", ">>" and a lone "!" are not comparisons */
      if ((next != c || c == '=') && (c != '!' || next == '='))
        return tsr_rt_expr_fail(p->pos, "comparison operators are not supported ('%.*s')", (int)width, s + p->pos);
      if (c == '!') width = 1;
      return tsr_rt_expr_fail(p->pos, "logical and bitwise operators are not supported ('%.*s')", (int)width,
                              s + p->pos);
    case '&':
    case '|':
    case '~':
      width = next == c ? 2 : 1;
      return tsr_rt_expr_fail(p->pos, "logical and bitwise operators are not supported ('%.*s')", (int)width,
                              s + p->pos);
    case '^': return tsr_rt_expr_fail(p->pos, "'^' is not supported (write A**B or pow(A, B) for a power)");
    case '%': return tsr_rt_expr_fail(p->pos, "'%%' (remainder) is not supported");
    case '.': return tsr_rt_expr_fail(p->pos, "expected a digit after '.'");
    default:
      if ((unsigned char)c < 0x20 || c == 0x7f)
        return tsr_rt_expr_fail(p->pos, "unexpected control byte 0x%02x", (unsigned)(unsigned char)c);
      return tsr_rt_expr_fail(p->pos, "unexpected character '%c'", c);
  }
  p->end = p->pos = p->pos + width;
  return NULL;
}
