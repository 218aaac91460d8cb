/* rt/expr.h: the expressions of JIT operators, parsed, printed
 * and evaluated on the host.
 *
 * A JIT operator is an elementwise expression over up to four float inputs
 * named A, B, C, D, e.g. "A * B + C", "sigmoid(A) * (B - 0.5)",
 * "max(A, 0) + clamp(B, -1, 1)". This module turns its text into a small tree
 * and prints the tree two ways: a canonical text (the key of the
 * compiled-operator cache) and a CUDA C expression that NVRTC compiles into
 * the operator's device function. It is pure C: no CUDA, no NVRTC.
 *
 * Grammar (Python's precedence, lowest first):
 *   expr    := term (('+' | '-') term)*            left-associative
 *   term    := unary (('*' | '/') unary)*          left-associative
 *   unary   := ('-' | '+') unary | power
 *   power   := primary ['**' unary]                right-associative; binds
 *                                                  tighter than a sign on its
 *                                                  left: -A**2 = -(A**2),
 *                                                  2**-1 = 2**(-1)
 *   primary := number | input | function '(' expr (',' expr)* ')' | '(' expr ')'
 *   number  := digits ['.' [digits]] [exponent] | '.' digits [exponent]
 *              exponent := ('e' | 'E') ['+' | '-'] digits
 *   input   := 'A' | 'B' | 'C' | 'D'               case-sensitive
 * Whitespace (space, tab, CR, LF) may stand between tokens. No hex numbers, no
 * suffixes, no named constants, no comparison, logical or bitwise operators.
 *
 * Functions, with a fixed number of arguments (PyTorch's semantics, NaN
 * included: maximum and minimum propagate NaN, relu(NaN) = NaN):
 *   1  relu sigmoid tanh exp log sqrt abs sin cos neg
 *      gelu         0.5*x*(1+erf(x/sqrt(2)))
 *      hardsigmoid  clamp(x/6+0.5, 0, 1)
 *      hardswish    x*hardsigmoid(x)
 *      softplus     log1p(exp(x)), or x where x > 20 (PyTorch's threshold)
 *   2  maximum (or max), minimum (or min), pow, add, sub, mul, div,
 *      leaky_relu(x, slope), elu(x, alpha), clamp_min(x, lo), clamp_max(x, hi)
 *   3  clamp(x, lo, hi), hardtanh(x, lo, hi)   = minimum(maximum(x, lo), hi)
 * A sign and neg(), an operator and its function (A+B and add(A, B), A**B and
 * pow(A, B)), and the two spellings of maximum and minimum make the same
 * tree.
 *
 * Numbers are float constants: the runtime computes in float, so a literal
 * stands for the float nearest to its text, on the host as on the device
 * ("0.1" and "0.100000001" are the same tree). A literal too large for a
 * float is an error; one below the smallest float becomes a subnormal or 0.
 *
 * Limits, each an error (never a crash, never a deep recursion):
 *   - text longer than TSR_RT_EXPR_MAX_TEXT bytes, empty text, a NUL byte
 *     inside (tsr_rt_expr_parse_n), a byte outside ASCII;
 *   - more than TSR_RT_EXPR_MAX_NODES nodes (each number, input, sign,
 *     operator and function call is one node; parentheses and '+' signs are
 *     none);
 *   - nesting deeper than TSR_RT_EXPR_MAX_DEPTH, counted two ways: brackets
 *     (parentheses, a function's arguments), signs and '**' exponents open
 *     inside one another; and operations inside operations (a node's
 *     height: a chain A+B+C+... is one level deeper per operator);
 *   - an expression that uses no input.
 * Error statuses are TSR_INVALID_ARGUMENT with a one-line message that starts
 * with the 1-based byte column (counted from the start of the text, across
 * newlines) and says what was expected, e.g. for "max(A, 0, 1)": "column 9:
 * expected ')' after the arguments of max (it takes 2), found ','". The
 * canonical text of any parsed expression is within these limits, so it
 * always parses back (to the same tree).
 *
 * Threads: a parsed expression is immutable; any number of threads may print
 * and evaluate it at once. Numbers are read and printed in the C locale
 * whatever the process's locale. Allocation: tsr_rt_expr_parse allocates the
 * expression (one block) and, while it runs, its parser's state (about 8 KiB,
 * kept off the caller's stack); nothing else allocates. */
#ifndef TESSERA_RT_EXPR_H
#define TESSERA_RT_EXPR_H

#include <stddef.h>

#include "tessera/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TSR_RT_EXPR_MAX_TEXT 4096 /* bytes of text, without the NUL */
#define TSR_RT_EXPR_MAX_NODES 256
#define TSR_RT_EXPR_MAX_DEPTH 64

/* A parsed expression: opaque, immutable, freed with tsr_rt_expr_free. */
typedef struct tsr_rt_expr_s tsr_rt_expr_t;

/* Parses `text` (NUL-terminated). On success *out_expr is the expression,
 * which the caller owns; on error *out_expr is NULL and the status says where
 * and what was expected, e.g. "column 1: unknown name 'E' (inputs are A, B,
 * C, D)". */
TSR_MUST_USE tsr_status_t tsr_rt_expr_parse(const char *text, tsr_rt_expr_t **out_expr);

/* As tsr_rt_expr_parse, for `len` bytes that need no NUL after them (text
 * from a length-counted source, where a NUL byte inside is an error). */
TSR_MUST_USE tsr_status_t tsr_rt_expr_parse_n(const char *text, size_t len, tsr_rt_expr_t **out_expr);

/* Frees `expr`; NULL is ignored. */
void tsr_rt_expr_free(tsr_rt_expr_t *expr);

/* The inputs the expression reads: bit 0 = A, 1 = B, 2 = C, 3 = D; never 0
 * (but 0 for NULL). */
unsigned tsr_rt_expr_inputs(const tsr_rt_expr_t *expr);

/* Its number of nodes, 1..TSR_RT_EXPR_MAX_NODES (for limits and cost); 0
 * for NULL. */
size_t tsr_rt_expr_nodes(const tsr_rt_expr_t *expr);

/* The canonical text: fully parenthesised, no whitespace, one spelling per
 * function, a sign printed as neg(x) and a power as pow(x, y), numbers as
 * the shortest decimal that reads back as the same float:
 *   "A * B + C"                   -> "((A*B)+C)"
 *   "-A**2"                       -> "neg(pow(A,2))"
 *   "max(A, 0) + clamp(B, -1, 1)" -> "(maximum(A,0)+clamp(B,neg(1),1))"
 * Two texts give the same canonical text exactly when they parse to the same
 * tree. It is at most TSR_RT_EXPR_MAX_TEXT bytes long and parses back to the
 * same tree.
 * Writes at most `cap` bytes with the NUL (nothing when cap is 0; `buf` may
 * then be NULL) and returns the length of the whole text without the NUL, as
 * snprintf does: the text was cut if the result is >= cap. */
size_t tsr_rt_expr_canonical(const tsr_rt_expr_t *expr, char *buf, size_t cap);

/* The expression in CUDA C++, over float variables a, b, c, d, computing in
 * float: + - * / and signs as infix operators, every other function as a
 * call of the device helper tsr_rt_f_<canonical name> (src/rt/ops.h):
 *   "sigmoid(A) * (B - 0.5)" -> "(tsr_rt_f_sigmoid(a) * (b - 0.5f))"
 *   "max(A, 0) + clamp(B, -1, 1)"
 *       -> "(tsr_rt_f_maximum(a, 0.0f) + tsr_rt_f_clamp(b, (-1.0f), 1.0f))"
 * Numbers are float literals with an 'f' suffix, printed so that they read
 * back as exactly the float of the tree. Helpers called: tsr_rt_f_ relu,
 * sigmoid, tanh, exp, log, sqrt, abs, sin, cos, gelu, hardsigmoid, hardswish,
 * softplus (1 argument); maximum, minimum, pow, leaky_relu, elu, clamp_min,
 * clamp_max (2); clamp, hardtanh (3).
 * Same buffer convention as tsr_rt_expr_canonical; the text is at most
 * 2 * TSR_RT_EXPR_MAX_TEXT bytes long. */
size_t tsr_rt_expr_cuda(const tsr_rt_expr_t *expr, char *buf, size_t cap);

/* Evaluates the expression on the host in double over in[0..3] = A..D (the
 * inputs it does not use are not read): the tests' reference and the
 * runtime's CPU path. Numbers are the floats of the tree, widened. NaN for a
 * NULL expression. Hot path: no allocation, no status. */
double tsr_rt_expr_eval(const tsr_rt_expr_t *expr, const double in[4]);

#ifdef __cplusplus
}
#endif
#endif /* TESSERA_RT_EXPR_H */
