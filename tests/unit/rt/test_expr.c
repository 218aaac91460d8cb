/* rt/expr: the JIT operator expressions. Every function and operator against
 * C math, precedence, the canonical text (the cache key) and the CUDA text,
 * every error with its column, every limit at and one past it, and a random
 * round trip through the canonical text. */
#include <criterion/criterion.h>
#include <locale.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt/expr.h"

TestSuite(rt_expr, .timeout = 60);

/* ---- helpers --------------------------------------------------------------- */

static tsr_rt_expr_t *parse_ok(const char *text) {
  tsr_rt_expr_t *e = NULL;
  tsr_status_t st = tsr_rt_expr_parse(text, &e);
  cr_assert_null(st, "parse(\"%s\"): %s", text, tsr_status_message(st));
  cr_assert_not_null(e);
  return e;
}

/* Parsing `len` bytes of `text` fails with exactly `want`, and *out is NULL. */
static void bad_n(const char *text, size_t len, const char *want) {
  tsr_rt_expr_t *e = (tsr_rt_expr_t *)&e; /* not NULL: the parser must clear it */
  tsr_status_t st = tsr_rt_expr_parse_n(text, len, &e);
  cr_assert_not_null(st, "parse(\"%.*s\") should fail", (int)len, text);
  cr_assert_eq(tsr_status_code(st), TSR_INVALID_ARGUMENT, "%s", tsr_status_message(st));
  cr_assert_str_eq(tsr_status_message(st), want, "parse(\"%.*s\")", (int)len, text);
  cr_assert_null(e, "out_expr must be NULL on error");
  tsr_status_free(st);
}

static void bad(const char *text, const char *want) {
  /* through the NUL-terminated entry point, which the runtime uses */
  tsr_rt_expr_t *e = (tsr_rt_expr_t *)&e;
  tsr_status_t st = tsr_rt_expr_parse(text, &e);
  cr_assert_not_null(st, "parse(\"%s\") should fail", text);
  cr_assert_str_eq(tsr_status_message(st), want, "parse(\"%s\")", text);
  cr_assert_null(e);
  tsr_status_free(st);
  bad_n(text, strlen(text), want);
}

/* The status message of a failed parse starts with `want`. */
static void bad_prefix(const char *text, const char *want) {
  tsr_rt_expr_t *e = NULL;
  tsr_status_t st = tsr_rt_expr_parse(text, &e);
  cr_assert_not_null(st, "parse(\"%.40s\") should fail", text);
  cr_assert(strncmp(tsr_status_message(st), want, strlen(want)) == 0, "parse(\"%.40s\"): got \"%s\", want \"%s...\"",
            text, tsr_status_message(st), want);
  cr_assert_null(e);
  tsr_status_free(st);
}

static char *canonical_of(const tsr_rt_expr_t *e) {
  size_t n = tsr_rt_expr_canonical(e, NULL, 0);
  char *buf = malloc(n + 1);
  cr_assert_not_null(buf);
  cr_assert_eq(tsr_rt_expr_canonical(e, buf, n + 1), n);
  cr_assert_eq(strlen(buf), n);
  return buf;
}

static char *cuda_of(const tsr_rt_expr_t *e) {
  size_t n = tsr_rt_expr_cuda(e, NULL, 0);
  char *buf = malloc(n + 1);
  cr_assert_not_null(buf);
  cr_assert_eq(tsr_rt_expr_cuda(e, buf, n + 1), n);
  cr_assert_eq(strlen(buf), n);
  return buf;
}

static void canonical_is(const char *text, const char *want) {
  tsr_rt_expr_t *e = parse_ok(text);
  char *got = canonical_of(e);
  cr_assert_str_eq(got, want, "canonical(\"%s\")", text);
  free(got);
  tsr_rt_expr_free(e);
}

static void cuda_is(const char *text, const char *want) {
  tsr_rt_expr_t *e = parse_ok(text);
  char *got = cuda_of(e);
  cr_assert_str_eq(got, want, "cuda(\"%s\")", text);
  free(got);
  tsr_rt_expr_free(e);
}

static double eval4(const char *text, double a, double b, double c, double d) {
  tsr_rt_expr_t *e = parse_ok(text);
  const double in[4] = {a, b, c, d};
  double r = tsr_rt_expr_eval(e, in);
  tsr_rt_expr_free(e);
  return r;
}

static double eval1(const char *text, double a) { return eval4(text, a, NAN, NAN, NAN); }

/* Equal, or both NaN; finite values to 1e-12 relative (the same formulas in
 * double give the same bits, so this only forgives a different but exact
 * spelling of a reference). */
static bool same(double got, double want) {
  if (isnan(want)) return isnan(got);
  if (isinf(want) || want == 0) return got == want;
  return fabs(got - want) <= 1e-12 * fabs(want);
}

/* ---- C math references, written from the definitions ------------------------ */

/* std::max and std::min after a NaN check, as ATen writes them (fmax would
 * pick a sign for equal zeros on its own) */
static double ref_maximum(double x, double y) { return isnan(x) || isnan(y) ? NAN : (x > y ? x : y); }
static double ref_minimum(double x, double y) { return isnan(x) || isnan(y) ? NAN : (x < y ? x : y); }
static double ref_clamp(double x, double lo, double hi) { return ref_minimum(ref_maximum(x, lo), hi); }
static double ref_hardsigmoid(double x) { return ref_clamp(x / 6 + 0.5, 0, 1); }

static double r_relu(double x, double y, double z) {
  (void)y, (void)z;
  return x > 0 || isnan(x) ? x : 0;
}
static double r_sigmoid(double x, double y, double z) {
  (void)y, (void)z;
  return 1 / (1 + exp(-x));
}
static double r_tanh(double x, double y, double z) {
  (void)y, (void)z;
  return tanh(x);
}
static double r_exp(double x, double y, double z) {
  (void)y, (void)z;
  return exp(x);
}
static double r_log(double x, double y, double z) {
  (void)y, (void)z;
  return log(x);
}
static double r_sqrt(double x, double y, double z) {
  (void)y, (void)z;
  return sqrt(x);
}
static double r_abs(double x, double y, double z) {
  (void)y, (void)z;
  return fabs(x);
}
static double r_sin(double x, double y, double z) {
  (void)y, (void)z;
  return sin(x);
}
static double r_cos(double x, double y, double z) {
  (void)y, (void)z;
  return cos(x);
}
static double r_gelu(double x, double y, double z) {
  (void)y, (void)z;
  return 0.5 * x * (1 + erf(x * M_SQRT1_2)); /* x/sqrt(2), by the exact 1/sqrt(2) */
}
static double r_hardsigmoid(double x, double y, double z) {
  (void)y, (void)z;
  return ref_hardsigmoid(x);
}
static double r_hardswish(double x, double y, double z) {
  (void)y, (void)z;
  return x * ref_hardsigmoid(x);
}
static double r_softplus(double x, double y, double z) {
  (void)y, (void)z;
  return x > 20 ? x : log1p(exp(x));
}
static double r_neg(double x, double y, double z) {
  (void)y, (void)z;
  return -x;
}
static double r_maximum(double x, double y, double z) {
  (void)z;
  return ref_maximum(x, y);
}
static double r_minimum(double x, double y, double z) {
  (void)z;
  return ref_minimum(x, y);
}
static double r_pow(double x, double y, double z) {
  (void)z;
  return pow(x, y);
}
static double r_add(double x, double y, double z) {
  (void)z;
  return x + y;
}
static double r_sub(double x, double y, double z) {
  (void)z;
  return x - y;
}
static double r_mul(double x, double y, double z) {
  (void)z;
  return x * y;
}
static double r_div(double x, double y, double z) {
  (void)z;
  return x / y;
}
static double r_leaky_relu(double x, double y, double z) {
  (void)z;
  return x > 0 ? x : x * y;
}
static double r_elu(double x, double y, double z) {
  (void)z;
  return x > 0 ? x : y * expm1(x);
}
static double r_clamp(double x, double y, double z) { return ref_clamp(x, y, z); }
static double r_identity(double x, double y, double z) {
  (void)y, (void)z;
  return x;
}

typedef double (*ref_fn_t)(double, double, double);

static const struct {
  const char *text;
  int arity;
  ref_fn_t ref;
} functions[] = {
    {"relu(A)", 1, r_relu},
    {"sigmoid(A)", 1, r_sigmoid},
    {"tanh(A)", 1, r_tanh},
    {"exp(A)", 1, r_exp},
    {"log(A)", 1, r_log},
    {"sqrt(A)", 1, r_sqrt},
    {"abs(A)", 1, r_abs},
    {"sin(A)", 1, r_sin},
    {"cos(A)", 1, r_cos},
    {"gelu(A)", 1, r_gelu},
    {"hardsigmoid(A)", 1, r_hardsigmoid},
    {"hardswish(A)", 1, r_hardswish},
    {"softplus(A)", 1, r_softplus},
    {"neg(A)", 1, r_neg},
    {"-A", 1, r_neg},
    {"+A", 1, r_identity},
    {"maximum(A, B)", 2, r_maximum},
    {"max(A, B)", 2, r_maximum},
    {"minimum(A, B)", 2, r_minimum},
    {"min(A, B)", 2, r_minimum},
    {"pow(A, B)", 2, r_pow},
    {"A ** B", 2, r_pow},
    {"add(A, B)", 2, r_add},
    {"A + B", 2, r_add},
    {"sub(A, B)", 2, r_sub},
    {"A - B", 2, r_sub},
    {"mul(A, B)", 2, r_mul},
    {"A * B", 2, r_mul},
    {"div(A, B)", 2, r_div},
    {"A / B", 2, r_div},
    {"leaky_relu(A, B)", 2, r_leaky_relu},
    {"elu(A, B)", 2, r_elu},
    {"clamp_min(A, B)", 2, r_maximum},
    {"clamp_max(A, B)", 2, r_minimum},
    {"clamp(A, B, C)", 3, r_clamp},
    {"hardtanh(A, B, C)", 3, r_clamp},
};

static const double grid[] = {-30, -21, -3,   -1.5, -0.5, -0.0, 0,   0.25,     1,
                              2.5, 6,   19.5, 20,   20.5, 30,   NAN, INFINITY, -INFINITY};
#define GRID_N (sizeof(grid) / sizeof(grid[0]))

/* ---- every function and operator ------------------------------------------- */

Test(rt_expr, every_function_against_c_math) {
  for (size_t f = 0; f < sizeof(functions) / sizeof(functions[0]); f++) {
    ref_fn_t ref = functions[f].ref;
    tsr_rt_expr_t *e = parse_ok(functions[f].text);
    size_t nb = functions[f].arity >= 2 ? GRID_N : 1, nc = functions[f].arity >= 3 ? GRID_N : 1;
    for (size_t i = 0; i < GRID_N; i++)
      for (size_t j = 0; j < nb; j++)
        for (size_t k = 0; k < nc; k++) {
          double in[4] = {grid[i], grid[j], grid[k], NAN};
          double got = tsr_rt_expr_eval(e, in), want = ref(in[0], in[1], in[2]);
          cr_assert(same(got, want), "%s at A=%g B=%g C=%g: got %.17g, want %.17g", functions[f].text, in[0], in[1],
                    in[2], got, want);
        }
    tsr_rt_expr_free(e);
  }
}

Test(rt_expr, function_values_and_nan_rules) {
  cr_assert_eq(eval1("sigmoid(A)", 0), 0.5);
  cr_assert(same(eval1("gelu(A)", 1), 0.8413447460685429));
  cr_assert(same(eval1("gelu(A)", -1), -0.15865525393145707));
  cr_assert_eq(eval1("softplus(A)", 21), 21);
  cr_assert(same(eval1("softplus(A)", 0), log(2)));
  cr_assert(same(eval1("softplus(A)", 20), log1p(exp(20)))); /* the threshold is x > 20 */
  cr_assert_eq(eval1("hardsigmoid(A)", 3), 1);
  cr_assert_eq(eval1("hardsigmoid(A)", -3), 0);
  cr_assert_eq(eval1("hardsigmoid(A)", 0), 0.5);
  cr_assert(same(eval1("hardswish(A)", 1), 2.0 / 3.0));
  cr_assert(same(eval1("elu(A, 1)", -1), -0.63212055882855767));
  cr_assert(same(eval1("elu(A, 2)", -1e-10), -2e-10 + 1e-20)); /* expm1, not exp - 1 */
  cr_assert_eq(eval1("relu(A)", -2), 0);
  cr_assert_eq(eval1("relu(A)", 2), 2);
  /* A literal is the nearest float: 0.01 is 0.01f on the host as on the GPU. */
  cr_assert_eq(eval1("leaky_relu(A, 0.01)", -2), -2 * (double)0.01f);
  cr_assert_neq(eval1("leaky_relu(A, 0.01)", -2), -0.02);
  cr_assert_eq(eval1("A * 0.1", 1), (double)0.1f);
  /* torch.clamp is min(max(x, lo), hi): hi wins when lo > hi */
  cr_assert_eq(eval1("clamp(A, 3, 1)", 5), 1);
  cr_assert_eq(eval1("clamp(A, 3, 1)", 0), 1);
  cr_assert_eq(eval1("hardtanh(A, -1, 1)", -7), -1);
  /* NaN as PyTorch: relu, maximum, minimum and the clamps propagate it */
  cr_assert(isnan(eval1("relu(A)", NAN)));
  cr_assert(isnan(eval4("maximum(A, B)", NAN, 1, 0, 0)));
  cr_assert(isnan(eval4("maximum(A, B)", 1, NAN, 0, 0)));
  cr_assert(isnan(eval4("min(A, B)", NAN, 1, 0, 0)));
  cr_assert(isnan(eval4("min(A, B)", 1, NAN, 0, 0)));
  cr_assert(isnan(eval1("clamp(A, 0, 1)", NAN)));
  cr_assert(isnan(eval4("clamp(A, B, 1)", 0.5, NAN, 0, 0)));
  cr_assert(isnan(eval4("clamp(A, 0, B)", 0.5, NAN, 0, 0)));
  cr_assert(isnan(eval4("clamp_min(A, B)", 0.5, NAN, 0, 0)));
  cr_assert(isnan(eval4("clamp_max(A, B)", 0.5, NAN, 0, 0)));
  cr_assert(isnan(eval1("hardsigmoid(A)", NAN)));
  cr_assert(isnan(eval1("softplus(A)", NAN)));
  cr_assert(isnan(eval1("leaky_relu(A, 0.1)", NAN)));
  cr_assert(isnan(eval1("elu(A, 1)", NAN)));
  /* IEEE arithmetic, in double */
  cr_assert_eq(eval4("A / B", 1, 0, 0, 0), INFINITY);
  cr_assert(isnan(eval4("A / B", 0, 0, 0, 0)));
  cr_assert_eq(eval1("A * 1e30 * 1e30", 1), (double)1e30f * (double)1e30f); /* not float overflow */
  /* only the inputs used are read */
  cr_assert_eq(eval4("D - C", NAN, NAN, 1, 5), 4);
  /* a NULL expression evaluates to NaN */
  const double in[4] = {1, 2, 3, 4};
  cr_assert(isnan(tsr_rt_expr_eval(NULL, in)));
}

/* ---- precedence and associativity ---------------------------------------------- */

Test(rt_expr, precedence_and_associativity) {
  canonical_is("A-B-C", "((A-B)-C)");
  cr_assert_eq(eval4("A-B-C", 10, 3, 2, 0), 5);
  canonical_is("A/B/C", "((A/B)/C)");
  cr_assert_eq(eval4("A/B/C", 24, 4, 2, 0), 3);
  canonical_is("-A**2", "neg(pow(A,2))");
  cr_assert_eq(eval1("-A**2", 3), -9);
  canonical_is("A**B**C", "pow(A,pow(B,C))");
  cr_assert_eq(eval4("A**B**C", 2, 3, 2, 0), 512);
  canonical_is("2*-A", "(2*neg(A))");
  cr_assert_eq(eval1("2*-A", 3), -6);
  canonical_is("A+B*C", "(A+(B*C))");
  cr_assert_eq(eval4("A+B*C", 1, 2, 3, 0), 7);
  canonical_is("(A+B)*C", "((A+B)*C)");
  cr_assert_eq(eval4("(A+B)*C", 1, 2, 3, 0), 9);
  canonical_is("A-B+C", "((A-B)+C)");
  canonical_is("A/B*C", "((A/B)*C)");
  canonical_is("A*B+C*D", "((A*B)+(C*D))");
  canonical_is("-A*B", "(neg(A)*B)");
  canonical_is("A**-B", "pow(A,neg(B))");
  cr_assert_eq(eval4("A**-B", 2, 1, 0, 0), 0.5);
  canonical_is("2**-1*A", "(pow(2,neg(1))*A)");
  canonical_is("(-A)**2", "pow(neg(A),2)");
  cr_assert_eq(eval1("(-A)**2", 3), 9);
  canonical_is("--A", "neg(neg(A))");
  canonical_is("A - -B", "(A-neg(B))");
  canonical_is("+A", "A");
  canonical_is("+-+A", "neg(A)");
  canonical_is("A**2*B", "(pow(A,2)*B)");
  canonical_is("A*B**2", "(A*pow(B,2))");
  canonical_is("-A+B", "(neg(A)+B)");
  canonical_is("A**B**-C**D", "pow(A,pow(B,neg(pow(C,D))))");
  canonical_is("max(A, B + C) * 2", "(maximum(A,(B+C))*2)");
}

/* ---- the canonical text ---------------------------------------------------------- */

static void all_canonical(const char *want, const char *const *texts, size_t n) {
  for (size_t i = 0; i < n; i++) canonical_is(texts[i], want);
}

Test(rt_expr, canonical_same_tree_same_text) {
  static const char *const g1[] = {"A*B+C",      " A * B + C ",       "((A*B))+(C)", "mul(A,B)+C",
                                   "add(A*B,C)", "add(mul(A, B), C)", "A*B+C\n",     "\tA*B\r\n+C",
                                   "+A*B+C",     "(((A)*(B)))+C",     "A*B+ +C",     "A *B+C"};
  all_canonical("((A*B)+C)", g1, sizeof(g1) / sizeof(g1[0]));
  static const char *const g2[] = {"max(A,0)",   "maximum(A, 0)", "max(A, 0.0)",   "max(A,.0)",
                                   "max(A,0e5)", "max(A, 000)",   "max((A), (0))", "max(A,0.)"};
  all_canonical("maximum(A,0)", g2, sizeof(g2) / sizeof(g2[0]));
  static const char *const g3[] = {"A*0.5",   "A*.5",    "A*5e-1",        "A*0.50",
                                   "A*50E-2", "A*5E-01", "A*0.5000000001" /* the same float */};
  all_canonical("(A*0.5)", g3, sizeof(g3) / sizeof(g3[0]));
  static const char *const g4[] = {"-A**2", "-(A**2)", "neg(pow(A,2))", "neg(A**2)", "-pow(A, 2)"};
  all_canonical("neg(pow(A,2))", g4, sizeof(g4) / sizeof(g4[0]));
  static const char *const g5[] = {"A - B", "sub(A,B)", "(A)-(B)"};
  all_canonical("(A-B)", g5, sizeof(g5) / sizeof(g5[0]));
  static const char *const g6[] = {"min(A,B)", "minimum(A,B)"};
  all_canonical("minimum(A,B)", g6, sizeof(g6) / sizeof(g6[0]));
  static const char *const g7[] = {"A/B", "div(A, B)"};
  all_canonical("(A/B)", g7, sizeof(g7) / sizeof(g7[0]));
  /* the brief's examples */
  canonical_is("sigmoid(A) * (B - 0.5)", "(sigmoid(A)*(B-0.5))");
  canonical_is("max(A, 0) + clamp(B, -1, 1)", "(maximum(A,0)+clamp(B,neg(1),1))");
  /* numbers: the shortest decimal that reads back as the same float */
  canonical_is("A*0.1", "(A*0.1)");
  canonical_is("A*1e10", "(A*1e+10)");
  canonical_is("A*1.5e-7", "(A*1.5e-07)");
  canonical_is("A*123456789", "(A*123456792)"); /* 9 digits, shorter than 1.2345679e+08 */
  canonical_is("A*1e8", "(A*1e+08)");
  canonical_is("A*3.4028235e38", "(A*3.4028235e+38)");
  canonical_is("A*1e-45", "(A*1e-45)"); /* the smallest subnormal */
  canonical_is("A*1e-46", "(A*0)");     /* below it: 0 */
  canonical_is("A*16777217", "(A*16777216)");
  canonical_is("A*100", "(A*100)");
}

static void differ(const char *x, const char *y) {
  tsr_rt_expr_t *ex = parse_ok(x), *ey = parse_ok(y);
  char *cx = canonical_of(ex), *cy = canonical_of(ey);
  cr_assert_str_neq(cx, cy, "\"%s\" and \"%s\" are different trees", x, y);
  free(cx);
  free(cy);
  tsr_rt_expr_free(ex);
  tsr_rt_expr_free(ey);
}

Test(rt_expr, canonical_different_tree_different_text) {
  differ("A+B", "B+A");
  differ("A-B-C", "A-(B-C)");
  differ("A/B/C", "A/(B/C)");
  differ("(A**B)**C", "A**B**C");
  differ("max(A,B)", "min(A,B)");
  differ("A*0.1", "A*0.2");
  differ("A+0.1", "A+0.10000001"); /* neighbouring floats */
  differ("relu(A)", "abs(A)");
  differ("clamp_min(A,0)", "max(A,0)");
  differ("clamp(A,0,1)", "hardtanh(A,0,1)");
  differ("-A", "0-A");
  differ("A**2", "A*A");
  differ("A*1e-3", "A*1e-4");
  differ("A", "B");
  differ("-A*B", "-(A*B)");
  differ("sigmoid(A)", "hardsigmoid(A)");
  differ("A+B+C", "A+(B+C)");
}

Test(rt_expr, canonical_buffer_convention) {
  tsr_rt_expr_t *e = parse_ok("A*B+C"); /* "((A*B)+C)", 9 bytes */
  cr_assert_eq(tsr_rt_expr_canonical(e, NULL, 0), 9);
  char buf[16];
  memset(buf, 'x', sizeof(buf));
  cr_assert_eq(tsr_rt_expr_canonical(e, buf, 5), 9);
  cr_assert_str_eq(buf, "((A*");
  cr_assert_eq(buf[5], 'x', "nothing written past cap");
  cr_assert_eq(tsr_rt_expr_canonical(e, buf, 9), 9);
  cr_assert_str_eq(buf, "((A*B)+C");
  cr_assert_eq(tsr_rt_expr_canonical(e, buf, 10), 9);
  cr_assert_str_eq(buf, "((A*B)+C)");
  cr_assert_eq(tsr_rt_expr_canonical(e, buf, 1), 9);
  cr_assert_str_eq(buf, "");
  cr_assert_eq(tsr_rt_expr_cuda(e, buf, 4), 13); /* "((a * b) + c)" */
  cr_assert_str_eq(buf, "((a");
  tsr_rt_expr_free(e);
  cr_assert_eq(tsr_rt_expr_canonical(NULL, buf, sizeof(buf)), 0);
  cr_assert_str_eq(buf, "");
}

Test(rt_expr, inputs_and_nodes) {
  tsr_rt_expr_t *e = parse_ok("A + C * 2");
  cr_assert_eq(tsr_rt_expr_inputs(e), 0x5);
  cr_assert_eq(tsr_rt_expr_nodes(e), 5);
  tsr_rt_expr_free(e);
  e = parse_ok("D");
  cr_assert_eq(tsr_rt_expr_inputs(e), 0x8);
  cr_assert_eq(tsr_rt_expr_nodes(e), 1);
  tsr_rt_expr_free(e);
  e = parse_ok("clamp(A, B, C) * D");
  cr_assert_eq(tsr_rt_expr_inputs(e), 0xf);
  cr_assert_eq(tsr_rt_expr_nodes(e), 6);
  tsr_rt_expr_free(e);
  /* parentheses and '+' signs make no node; '-' signs do */
  e = parse_ok("+((+B))");
  cr_assert_eq(tsr_rt_expr_nodes(e), 1);
  cr_assert_eq(tsr_rt_expr_inputs(e), 0x2);
  tsr_rt_expr_free(e);
  e = parse_ok("-1 * B");
  cr_assert_eq(tsr_rt_expr_nodes(e), 4);
  tsr_rt_expr_free(e);
  cr_assert_eq(tsr_rt_expr_nodes(NULL), 0);
  cr_assert_eq(tsr_rt_expr_inputs(NULL), 0);
  tsr_rt_expr_free(NULL);
}

/* A host program may run in a locale whose decimal point is ',' (strtof and
 * printf follow it); the cache key and the CUDA text must not change. The
 * locale is built with localedef when the system has none installed;
 * skipped where neither works. */
Test(rt_expr, numbers_ignore_the_process_locale) {
  if (!setlocale(LC_ALL, "de_DE.UTF-8")) {
    char dir[] = "/tmp/tsr-rtx-locale-XXXXXX", cmd[256];
    cr_assert_not_null(mkdtemp(dir));
    snprintf(cmd, sizeof(cmd), "localedef -i de_DE -f UTF-8 %s/de_DE.UTF-8 >/dev/null 2>&1", dir);
    if (system(cmd) == -1) cr_log_warn("could not run localedef");
    setenv("LOCPATH", dir, 1);
    bool ok = setlocale(LC_ALL, "de_DE.UTF-8") != NULL;
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir); /* the locale stays loaded */
    cr_assert_eq(system(cmd), 0);
    if (!ok) cr_skip_test("no de_DE locale, and localedef could not make one");
  }
  char probe[16];
  snprintf(probe, sizeof(probe), "%.1f", 0.5);
  cr_assert_str_eq(probe, "0,5", "the locale is not in force");
  canonical_is("A*0.5+1.25e-3", "((A*0.5)+0.00125)");
  cuda_is("A*0.5+1.25e-3", "((a * 0.5f) + 0.00125f)");
  cr_assert_eq(eval1("A*0.5+1.25e-3", 2), 1 + (double)1.25e-3f);
  bad("A * 0,5", "column 6: expected an operator or the end of the expression, found ','");
  snprintf(probe, sizeof(probe), "%.1f", 0.5);
  cr_assert_str_eq(probe, "0,5", "the process's locale must be left as it was");
}

/* ---- the CUDA text --------------------------------------------------------------- */

Test(rt_expr, cuda_text) {
  cuda_is("A * B + C", "((a * b) + c)");
  cuda_is("sigmoid(A) * (B - 0.5)", "(tsr_rt_f_sigmoid(a) * (b - 0.5f))");
  cuda_is("max(A, 0) + clamp(B, -1, 1)", "(tsr_rt_f_maximum(a, 0.0f) + tsr_rt_f_clamp(b, (-1.0f), 1.0f))");
  cuda_is("-A**2", "(-tsr_rt_f_pow(a, 2.0f))");
  cuda_is("--A", "(-(-a))");
  cuda_is("D / 1e10 - 0.1", "((d / 1e+10f) - 0.1f)");
  cuda_is("A * 123456789", "(a * 123456792.0f)");
  cuda_is("A * 100", "(a * 100.0f)");
  cuda_is("A * 3.4028235e38", "(a * 3.4028235e+38f)");
  cuda_is("A * 1e-46", "(a * 0.0f)");
  cuda_is("A / B", "(a / b)");
  cuda_is("neg(A)", "(-a)");
  cuda_is("add(A, B)", "(a + b)");
  cuda_is("sub(A, B)", "(a - b)");
  cuda_is("mul(A, B)", "(a * b)");
  cuda_is("div(A, B)", "(a / b)");
  /* every helper, by its canonical name */
  cuda_is("relu(A)", "tsr_rt_f_relu(a)");
  cuda_is("sigmoid(B)", "tsr_rt_f_sigmoid(b)");
  cuda_is("tanh(C)", "tsr_rt_f_tanh(c)");
  cuda_is("exp(D)", "tsr_rt_f_exp(d)");
  cuda_is("log(A)", "tsr_rt_f_log(a)");
  cuda_is("sqrt(A)", "tsr_rt_f_sqrt(a)");
  cuda_is("abs(A)", "tsr_rt_f_abs(a)");
  cuda_is("sin(A)", "tsr_rt_f_sin(a)");
  cuda_is("cos(A)", "tsr_rt_f_cos(a)");
  cuda_is("gelu(A)", "tsr_rt_f_gelu(a)");
  cuda_is("hardsigmoid(A)", "tsr_rt_f_hardsigmoid(a)");
  cuda_is("hardswish(A)", "tsr_rt_f_hardswish(a)");
  cuda_is("softplus(A)", "tsr_rt_f_softplus(a)");
  cuda_is("max(A, B)", "tsr_rt_f_maximum(a, b)");
  cuda_is("maximum(A, B)", "tsr_rt_f_maximum(a, b)");
  cuda_is("min(A, B)", "tsr_rt_f_minimum(a, b)");
  cuda_is("minimum(A, B)", "tsr_rt_f_minimum(a, b)");
  cuda_is("pow(A, B)", "tsr_rt_f_pow(a, b)");
  cuda_is("A ** B", "tsr_rt_f_pow(a, b)");
  cuda_is("leaky_relu(A, 0.01)", "tsr_rt_f_leaky_relu(a, 0.01f)");
  cuda_is("elu(A, 1)", "tsr_rt_f_elu(a, 1.0f)");
  cuda_is("clamp_min(A, -0.5)", "tsr_rt_f_clamp_min(a, (-0.5f))");
  cuda_is("clamp_max(A, 6)", "tsr_rt_f_clamp_max(a, 6.0f)");
  cuda_is("clamp(A, B, C)", "tsr_rt_f_clamp(a, b, c)");
  cuda_is("hardtanh(A, -1, 1)", "tsr_rt_f_hardtanh(a, (-1.0f), 1.0f)");
}

/* ---- errors, each with its column ---------------------------------------------------- */

Test(rt_expr, errors_with_columns) {
  bad("", "column 1: empty expression");
  bad("   ", "column 1: empty expression");
  bad("E", "column 1: unknown name 'E' (inputs are A, B, C, D)");
  bad("A + a", "column 5: unknown name 'a' (inputs are A, B, C, D)");
  bad("A * pi", "column 5: unknown name 'pi' (inputs are A, B, C, D)");
  bad("A + ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789",
      "column 5: unknown name 'ABCDEFGHIJKLMNOPQRSTUVWXYZ012345...' (inputs are A, B, C, D)");
  bad_prefix("foo(A)", "column 1: unknown function 'foo' (functions: relu, sigmoid, ");
  bad_prefix("A + Max(A, B)", "column 5: unknown function 'Max' (functions: ");
  bad("max(A, 0",
      "column 9: expected ')' after the arguments of max (it takes 2), found the end "
      "of the expression");
  bad("max(A, 0, 1)", "column 9: expected ')' after the arguments of max (it takes 2), found ','");
  bad("max(A)", "column 6: max takes 2 arguments, found 1");
  bad("clamp(A, 0)", "column 11: clamp takes 3 arguments, found 2");
  bad("relu()", "column 6: relu takes 1 argument, found none");
  bad("max()", "column 5: max takes 2 arguments, found none");
  bad("clamp(A 0 1)", "column 9: expected ',' after argument 1 of clamp, found '0'");
  bad("max(A,)",
      "column 7: expected a number, an input (A, B, C, D), a function or '(', found "
      "')'");
  bad("sigmoid A", "column 9: expected '(' after the function name sigmoid, found 'A'");
  bad("A * relu",
      "column 9: expected '(' after the function name relu, found the end of the "
      "expression");
  bad("A(B)", "column 1: A is an input, not a function");
  bad("B (C)", "column 1: B is an input, not a function");
  bad("(A + B",
      "column 7: expected ')' to close the '(' at column 1, found the end of the "
      "expression");
  bad("((A + B) * C",
      "column 13: expected ')' to close the '(' at column 1, found the end of "
      "the expression");
  bad("(A B)", "column 4: expected ')' to close the '(' at column 1, found 'B'");
  bad("A + B)", "column 6: unmatched ')'");
  bad("A B", "column 3: expected an operator or the end of the expression, found 'B'");
  bad("max(A, B) 2", "column 11: expected an operator or the end of the expression, found '2'");
  bad("A +",
      "column 4: expected a number, an input (A, B, C, D), a function or '(', found the "
      "end of the expression");
  bad("A * * B",
      "column 5: expected a number, an input (A, B, C, D), a function or '(', found "
      "'*'");
  bad("()", "column 2: expected a number, an input (A, B, C, D), a function or '(', found ')'");
  bad(", A", "column 1: expected a number, an input (A, B, C, D), a function or '(', found ','");
  bad("A ** ",
      "column 6: expected a number, an input (A, B, C, D), a function or '(', found the "
      "end of the expression");
  bad("A***B",
      "column 4: expected a number, an input (A, B, C, D), a function or '(', found "
      "'*'");
  /* operators that are not there */
  bad("A < B", "column 3: comparison operators are not supported ('<')");
  bad("A >= B", "column 3: comparison operators are not supported ('>=')");
  bad("A == B", "column 3: comparison operators are not supported ('==')");
  bad("A != B", "column 3: comparison operators are not supported ('!=')");
  bad("A<=B", "column 2: comparison operators are not supported ('<=')");
  bad("A > B", "column 3: comparison operators are not supported ('>')");
  bad("A = B", "column 3: comparison operators are not supported ('=')");
  bad("A<<2", "column 2: logical and bitwise operators are not supported ('<<')");
  bad("A >> 2", "column 3: logical and bitwise operators are not supported ('>>')");
  bad("!A", "column 1: logical and bitwise operators are not supported ('!')");
  bad("!!A", "column 1: logical and bitwise operators are not supported ('!')");
  bad("~A", "column 1: logical and bitwise operators are not supported ('~')");
  bad("A && B", "column 3: logical and bitwise operators are not supported ('&&')");
  bad("A | B", "column 3: logical and bitwise operators are not supported ('|')");
  bad("A ^ 2", "column 3: '^' is not supported (write A**B or pow(A, B) for a power)");
  bad("A % 2", "column 3: '%' (remainder) is not supported");
  bad("A # B", "column 3: unexpected character '#'");
  bad("A ? B : C", "column 3: unexpected character '?'");
  bad("A\x01", "column 2: unexpected control byte 0x01");
  bad("A\x7f", "column 2: unexpected control byte 0x7f");
  /* numbers */
  bad("0x10 * A", "column 1: hexadecimal numbers are not supported");
  bad("A * 0X1p3", "column 5: hexadecimal numbers are not supported");
  bad("1.5f * A", "column 4: unexpected 'f' after the number '1.5' (numbers take no suffix)");
  bad("2A", "column 2: unexpected 'A' after the number '2' (numbers take no suffix)");
  bad("A * 1_000", "column 6: unexpected '_' after the number '1' (numbers take no suffix)");
  bad("1.2.3 * A", "column 4: unexpected '.' after the number '1.2'");
  bad("1e * A", "column 3: expected the digits of the exponent of '1e'");
  bad("A * 1e+", "column 8: expected the digits of the exponent of '1e+'");
  bad("A * .", "column 5: expected a digit after '.'");
  bad("A * .e3", "column 5: expected a digit after '.'");
  bad("A * 1e39", "column 5: the number '1e39' is too large for a float (at most 3.4028235e+38)");
  bad("A * 3.4028236e38", "column 5: the number '3.4028236e38' is too large for a float (at most 3.4028235e+38)");
  bad("A * 1000000000000000000000000000000000000000",
      "column 5: the number '10000000000000000000000000000000...' is too large for a float (at "
      "most 3.4028235e+38)");
  /* no input */
  bad("1 + 2", "column 1: the expression uses no input (it must read at least one of A, B, C, D)");
  bad("max(-1, 2)",
      "column 1: the expression uses no input (it must read at least one of A, B, "
      "C, D)");
  /* bytes */
  bad("A + \xc3\xa9", "column 5: byte 0xc3 is not ASCII (expressions are ASCII text)");
  bad("\xff", "column 1: byte 0xff is not ASCII (expressions are ASCII text)");
  bad_n("A+\0B", 4, "column 3: NUL byte inside the expression");
  bad_n("A\0", 2, "column 2: NUL byte inside the expression");
  bad_n("A", 0, "column 1: empty expression");
  /* what the byte check finds comes before a syntax error earlier in the text */
  bad("A B \x80", "column 5: byte 0x80 is not ASCII (expressions are ASCII text)");
}

Test(rt_expr, bad_arguments) {
  tsr_rt_expr_t *e = (tsr_rt_expr_t *)&e;
  tsr_status_t st = tsr_rt_expr_parse(NULL, &e);
  cr_assert_eq(tsr_status_code(st), TSR_INVALID_ARGUMENT);
  cr_assert_str_eq(tsr_status_message(st), "missing expression text");
  cr_assert_null(e);
  tsr_status_free(st);
  st = tsr_rt_expr_parse("A", NULL);
  cr_assert_eq(tsr_status_code(st), TSR_INVALID_ARGUMENT);
  cr_assert_str_eq(tsr_status_message(st), "missing out_expr");
  tsr_status_free(st);
  e = (tsr_rt_expr_t *)&e;
  st = tsr_rt_expr_parse_n(NULL, 3, &e);
  cr_assert_str_eq(tsr_status_message(st), "missing expression text");
  cr_assert_null(e);
  tsr_status_free(st);
}

/* ---- limits, at the limit and one past ---------------------------------------------- */

static char *repeat(const char *head, const char *unit, size_t n, const char *mid, const char *tail_unit,
                    const char *tail) {
  size_t len = strlen(head) + n * strlen(unit) + strlen(mid) + n * strlen(tail_unit) + strlen(tail) + 1;
  char *s = malloc(len);
  cr_assert_not_null(s);
  strcpy(s, head);
  for (size_t i = 0; i < n; i++) strcat(s, unit);
  strcat(s, mid);
  for (size_t i = 0; i < n; i++) strcat(s, tail_unit);
  strcat(s, tail);
  return s;
}

/* Parses, and checks the canonical text parses back to the same text. */
static void parse_round_trip(const char *text) {
  tsr_rt_expr_t *e = parse_ok(text);
  char *c = canonical_of(e);
  tsr_rt_expr_t *e2 = parse_ok(c);
  char *c2 = canonical_of(e2);
  cr_assert_str_eq(c, c2);
  cr_assert_eq(tsr_rt_expr_nodes(e), tsr_rt_expr_nodes(e2));
  free(c);
  free(c2);
  tsr_rt_expr_free(e);
  tsr_rt_expr_free(e2);
}

Test(rt_expr, limit_text_length) {
  char *s = malloc(TSR_RT_EXPR_MAX_TEXT + 2);
  cr_assert_not_null(s);
  memset(s, ' ', TSR_RT_EXPR_MAX_TEXT + 1);
  s[0] = 'A';
  s[TSR_RT_EXPR_MAX_TEXT] = '\0'; /* 4096 bytes */
  tsr_rt_expr_free(parse_ok(s));
  s[TSR_RT_EXPR_MAX_TEXT] = ' ';
  s[TSR_RT_EXPR_MAX_TEXT + 1] = '\0'; /* 4097 */
  bad(s, "column 4097: the expression is longer than 4096 bytes");
  /* the NUL-terminated entry point reads no more than it needs: the text
   * is not terminated within the limit, and no more is looked at */
  s[TSR_RT_EXPR_MAX_TEXT + 1] = 'x';
  bad_n(s, TSR_RT_EXPR_MAX_TEXT + 2, "column 4097: the expression is longer than 4096 bytes");
  free(s);
  /* a number as long as the text allows */
  char *n = malloc(TSR_RT_EXPR_MAX_TEXT + 1);
  cr_assert_not_null(n);
  memcpy(n, "A*0.", 4);
  memset(n + 4, '0', TSR_RT_EXPR_MAX_TEXT - 5);
  n[TSR_RT_EXPR_MAX_TEXT - 1] = '5';
  n[TSR_RT_EXPR_MAX_TEXT] = '\0';
  canonical_is(n, "(A*0)"); /* 5e-4092 */
  n[4] = '1';
  canonical_is(n, "(A*0.1)");
  free(n);
}

/* A balanced sum of `leaves` copies of `leaf`: leaves-1 '+' nodes, height
 * ceil(log2(leaves)). */
static void balanced(char *out, size_t leaves, const char *leaf) {
  if (leaves == 1) {
    strcat(out, leaf);
    return;
  }
  strcat(out, "(");
  balanced(out, leaves / 2, leaf);
  strcat(out, "+");
  balanced(out, leaves - leaves / 2, leaf);
  strcat(out, ")");
}

Test(rt_expr, limit_nodes) {
  static char s[TSR_RT_EXPR_MAX_TEXT + 1];
  /* 128 inputs and 127 additions: 255 nodes; one sign more is 256 */
  s[0] = '\0';
  strcat(s, "-");
  balanced(s, 128, "A");
  tsr_rt_expr_t *e = parse_ok(s);
  cr_assert_eq(tsr_rt_expr_nodes(e), TSR_RT_EXPR_MAX_NODES);
  tsr_rt_expr_free(e);
  parse_round_trip(s);
  /* one more sign: the 257th node is the outer '-' at column 1 */
  s[0] = '\0';
  strcat(s, "--");
  balanced(s, 128, "A");
  bad(s, "column 1: more than 256 nodes (numbers, inputs, signs, operators and calls)");
  /* or an input: 256 nodes, then "+B" */
  s[0] = '\0';
  strcat(s, "-");
  balanced(s, 128, "A");
  size_t at = strlen(s);
  strcat(s, "*B");
  char want[128];
  snprintf(want, sizeof(want), "column %zu: more than 256 nodes (numbers, inputs, signs, operators and calls)", at + 2);
  bad(s, want);
  /* '+' signs and parentheses are not nodes */
  s[0] = '\0';
  strcat(s, "+(+(");
  balanced(s, 128, "(A)");
  strcat(s, "))");
  e = parse_ok(s);
  cr_assert_eq(tsr_rt_expr_nodes(e), 255);
  tsr_rt_expr_free(e);
}

Test(rt_expr, limit_nesting_brackets_signs_exponents) {
  /* each kind of nesting: `unit` repeated `ok` times around `core` (and
   * `close` after each) parses; once more is refused at `column`, where
   * the 65th level opens */
  static const struct {
    const char *what, *unit, *core, *close;
    int ok;
    unsigned column;
  } cases[] = {
      {"parentheses", "(", "A", ")", 64, 65},
      {"function arguments (relu( is 5 bytes)", "relu(", "A", ")", 64, 325},
      {"signs, which nest without brackets", "-", "A", "", 64, 65},
      {"exponents, right-associative (A**A**...)", "A**", "A", "", 64, 194},
      {"32 parentheses around 32 signs", "(-", "A", ")", 32, 65},
  };
  for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
    char *s = repeat("", cases[k].unit, cases[k].ok, cases[k].core, cases[k].close, "");
    parse_round_trip(s);
    free(s);
    /* one level more: for the mixed case the core gains the 65th sign */
    s = cases[k].ok == 32 ? repeat("", cases[k].unit, 32, "-A", cases[k].close, "")
                          : repeat("", cases[k].unit, cases[k].ok + 1, cases[k].core, cases[k].close, "");
    char want[160];
    snprintf(want, sizeof(want),
             "column %u: nesting deeper than 64 levels (parentheses, function arguments, signs and ** exponents)",
             cases[k].column);
    cr_log_info("%s", cases[k].what);
    bad(s, want);
    free(s);
  }
  /* '+' signs make no nodes, but nest as deep */
  char *s = repeat("", "+", 65, "A", "", "");
  bad(s, "column 65: nesting deeper than 64 levels (parentheses, function arguments, signs and ** exponents)");
  free(s);
  /* far past the limit: refused at the limit, never recursing further */
  s = repeat("", "(", 4000, "", "", "");
  bad(s, "column 65: nesting deeper than 64 levels (parentheses, function arguments, signs and ** exponents)");
  free(s);
}

Test(rt_expr, limit_nesting_operations) {
  /* A+A+...: one level per '+'. 64 parse (and the canonical text, 64 '('
   * deep, parses back); the 65th '+', at column 130, is refused. */
  char *s = repeat("A", "+A", 64, "", "", "");
  tsr_rt_expr_t *e = parse_ok(s);
  char *c = canonical_of(e);
  cr_assert_eq(strspn(c, "("), 64);
  tsr_rt_expr_free(e);
  free(c);
  parse_round_trip(s);
  free(s);
  s = repeat("A", "+A", 65, "", "", "");
  bad(s,
      "column 130: operations nest deeper than 64 levels (a chain such as A+B+C+... counts one "
      "level per operator: group it with parentheses)");
  free(s);
  /* mixed chains count too: 63 '*' under one '-' sign */
  s = repeat("-A", "*A", 63, "", "", "");
  parse_round_trip(s);
  free(s);
  s = repeat("-A", "*A", 64, "", "", "");
  bad(s,
      "column 129: operations nest deeper than 64 levels (a chain such as A+B+C+... counts one "
      "level per operator: group it with parentheses)");
  free(s);
  /* grouped, the same 66 terms are fine */
  static char b[TSR_RT_EXPR_MAX_TEXT + 1];
  b[0] = '\0';
  balanced(b, 66, "A");
  parse_round_trip(b);
}

/* The longest canonical and CUDA texts stay within their documented bounds.
 * Per node the canonical text spends at most 14 bytes (a number such as
 * "1.17549435e-38", "hardsigmoid(" and ")", "leaky_relu(" "," ")"), so 256
 * nodes take at most 3584; the CUDA text at most 23 ("tsr_rt_f_leaky_relu("
 * ", " ")"), 5888 in all. Here: 256 nodes of long names and numbers. */
Test(rt_expr, longest_printed_text) {
  static char s[TSR_RT_EXPR_MAX_TEXT + 1];
  s[0] = '\0';
  strcat(s, "--");
  balanced(s, 51, "leaky_relu(hardsigmoid(A),1.0000001e-38)"); /* 51 * 5 - 1 + 2 = 256 nodes */
  tsr_rt_expr_t *e = parse_ok(s);
  cr_assert_eq(tsr_rt_expr_nodes(e), 256);
  char *c = canonical_of(e), *u = cuda_of(e);
  cr_assert_leq(strlen(c), TSR_RT_EXPR_MAX_TEXT);
  cr_assert_leq(strlen(u), 2 * TSR_RT_EXPR_MAX_TEXT);
  cr_assert(strstr(c, "leaky_relu(hardsigmoid(A),1.0000001e-38)"), "%.80s", c);
  cr_assert(strstr(u, "tsr_rt_f_leaky_relu(tsr_rt_f_hardsigmoid(a), 1.0000001e-38f)"), "%.80s", u);
  parse_round_trip(c);
  free(c);
  free(u);
  tsr_rt_expr_free(e);
}

/* ---- random trees through the canonical text ------------------------------------------ */

static uint64_t rng_state;

static uint64_t rng(void) { /* splitmix64 */
  uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static unsigned pick(unsigned n) { return (unsigned)(rng() % n); }

typedef struct {
  char *s;
  size_t len, cap;
} text_t;

static void put(text_t *t, const char *x) {
  size_t n = strlen(x);
  cr_assert(t->len + n < t->cap, "generated text too long");
  memcpy(t->s + t->len, x, n + 1);
  t->len += n;
}

static void space(text_t *t) {
  static const char *const blanks[] = {"", "", "", " ", "  ", "\t", "\n"};
  put(t, blanks[pick(sizeof(blanks) / sizeof(blanks[0]))]);
}

static const struct {
  const char *names[2]; /* spellings */
  int arity;
  ref_fn_t ref;
  char infix; /* also writable as an operator */
} gen_ops[] = {
    {{"relu", "relu"}, 1, r_relu, 0},
    {{"sigmoid", "sigmoid"}, 1, r_sigmoid, 0},
    {{"tanh", "tanh"}, 1, r_tanh, 0},
    {{"exp", "exp"}, 1, r_exp, 0},
    {{"log", "log"}, 1, r_log, 0},
    {{"sqrt", "sqrt"}, 1, r_sqrt, 0},
    {{"abs", "abs"}, 1, r_abs, 0},
    {{"sin", "sin"}, 1, r_sin, 0},
    {{"cos", "cos"}, 1, r_cos, 0},
    {{"gelu", "gelu"}, 1, r_gelu, 0},
    {{"hardsigmoid", "hardsigmoid"}, 1, r_hardsigmoid, 0},
    {{"hardswish", "hardswish"}, 1, r_hardswish, 0},
    {{"softplus", "softplus"}, 1, r_softplus, 0},
    {{"neg", "neg"}, 1, r_neg, '-'},
    {{"maximum", "max"}, 2, r_maximum, 0},
    {{"minimum", "min"}, 2, r_minimum, 0},
    {{"pow", "pow"}, 2, r_pow, '^'}, /* '^' stands for "**" */
    {{"add", "add"}, 2, r_add, '+'},
    {{"sub", "sub"}, 2, r_sub, '-'},
    {{"mul", "mul"}, 2, r_mul, '*'},
    {{"div", "div"}, 2, r_div, '/'},
    {{"leaky_relu", "leaky_relu"}, 2, r_leaky_relu, 0},
    {{"elu", "elu"}, 2, r_elu, 0},
    {{"clamp_min", "clamp_min"}, 2, r_maximum, 0},
    {{"clamp_max", "clamp_max"}, 2, r_minimum, 0},
    {{"clamp", "clamp"}, 3, r_clamp, 0},
    {{"hardtanh", "hardtanh"}, 3, r_clamp, 0},
};
#define GEN_OPS_N (sizeof(gen_ops) / sizeof(gen_ops[0]))

/* A random tree, written as a primary (an atom, a call or a parenthesised
 * expression) with random spellings, spaces, signs and extra parentheses.
 * Evaluates it with the references at in[] as it goes (out_value), counts its
 * nodes and the inputs it reads. */
static void gen(text_t *t, int depth, const double in[4], double *out_value, size_t *nodes, unsigned *inputs) {
  bool extra = pick(8) == 0, plus = pick(10) == 0;
  if (extra) put(t, "(");
  if (plus) put(t, "(+");
  space(t);
  if (depth == 0 || pick(4) == 0) {
    if (pick(3) > 0 || *inputs == 0) {
      unsigned i = pick(4);
      char name[2] = {(char)('A' + i), '\0'};
      put(t, name);
      *out_value = in[i];
      *inputs |= 1u << i;
    } else {
      /* a number as people write them, read back as the float it stands for */
      char num[48];
      switch (pick(4)) {
        case 0: snprintf(num, sizeof(num), "%u", pick(10)); break;
        case 1: snprintf(num, sizeof(num), "%.3f", pick(100000) / 997.0); break;
        case 2: /* any float of [0, 512), 9 digits */
          snprintf(num, sizeof(num), "%.9g", ldexp((double)(rng() >> 11), -63 + (int)pick(20)));
          break;
        default: snprintf(num, sizeof(num), "%.4E", (double)pick(1000) * 1e-3); break;
      }
      put(t, num);
      *out_value = (double)strtof(num, NULL);
    }
    (*nodes)++;
  } else {
    unsigned o = pick(GEN_OPS_N);
    double v[3] = {0, 0, 0};
    if (gen_ops[o].infix && pick(2) == 0) {
      if (gen_ops[o].arity == 1) { /* a sign */
        put(t, "(-");
        gen(t, depth - 1, in, &v[0], nodes, inputs);
        put(t, ")");
      } else {
        char op[3] = {gen_ops[o].infix, '\0', '\0'};
        if (op[0] == '^') op[0] = op[1] = '*';
        put(t, "(");
        gen(t, depth - 1, in, &v[0], nodes, inputs);
        space(t);
        put(t, op);
        space(t);
        gen(t, depth - 1, in, &v[1], nodes, inputs);
        put(t, ")");
      }
    } else {
      put(t, gen_ops[o].names[pick(2)]);
      put(t, "(");
      for (int k = 0; k < gen_ops[o].arity; k++) {
        if (k > 0) put(t, ",");
        space(t);
        gen(t, depth - 1, in, &v[k], nodes, inputs);
        space(t);
      }
      put(t, ")");
    }
    *out_value = gen_ops[o].ref(v[0], v[1], v[2]);
    (*nodes)++;
  }
  space(t);
  if (plus) put(t, ")");
  if (extra) put(t, ")");
}

static bool same_bits(double x, double y) { return (isnan(x) && isnan(y)) || memcmp(&x, &y, sizeof x) == 0; }

Test(rt_expr, random_round_trip) {
  rng_state = 12;
  char buf[TSR_RT_EXPR_MAX_TEXT + 1];
  for (int round = 0; round < 3000; round++) {
    double in[4];
    for (int i = 0; i < 4; i++) in[i] = ((double)(rng() >> 11) / 9007199254740992.0 - 0.5) * 8;
    text_t t = {buf, 0, sizeof(buf)};
    buf[0] = '\0';
    double want;
    size_t nodes = 0;
    unsigned inputs = 0;
    gen(&t, 1 + (int)pick(4), in, &want, &nodes, &inputs);

    tsr_rt_expr_t *e = parse_ok(buf);
    cr_assert_eq(tsr_rt_expr_nodes(e), nodes, "%s", buf);
    cr_assert_eq(tsr_rt_expr_inputs(e), inputs, "%s", buf);
    double got = tsr_rt_expr_eval(e, in);
    cr_assert(same(got, want), "%s at (%g, %g, %g, %g): got %.17g, want %.17g", buf, in[0], in[1], in[2], in[3], got,
              want);

    /* the canonical text parses back to the same tree */
    char *c = canonical_of(e), *u = cuda_of(e);
    cr_assert_leq(strlen(c), TSR_RT_EXPR_MAX_TEXT);
    cr_assert_null(strpbrk(c, " \t\r\n"), "%s", c);
    tsr_rt_expr_t *e2 = parse_ok(c);
    char *c2 = canonical_of(e2), *u2 = cuda_of(e2);
    cr_assert_str_eq(c2, c, "from %s", buf);
    cr_assert_str_eq(u2, u, "from %s", buf);
    cr_assert_eq(tsr_rt_expr_nodes(e2), nodes);
    cr_assert_eq(tsr_rt_expr_inputs(e2), inputs);
    for (int k = 0; k < 4; k++) {
      double x[4];
      for (int i = 0; i < 4; i++) x[i] = ((double)(rng() >> 11) / 9007199254740992.0 - 0.5) * 8;
      double g1 = tsr_rt_expr_eval(e, x), g2 = tsr_rt_expr_eval(e2, x);
      cr_assert(same_bits(g1, g2), "%s: %.17g vs %.17g", c, g1, g2);
    }
    free(c);
    free(u);
    free(c2);
    free(u2);
    tsr_rt_expr_free(e);
    tsr_rt_expr_free(e2);
  }
}
