/* helpers.h: small helpers shared by the frontier tests. */
#ifndef TESSERA_TEST_FRONTIER_HELPERS_H
#define TESSERA_TEST_FRONTIER_HELPERS_H

#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "tessera/frontier.h"

/* Queue axes A, B, C, ... on machine 0, session 1: A < B < C numerically. */
static inline tsr_axis_t tf_axis(int i) { return tsr_axis_make(0, TSR_AXIS_DOMAIN_QUEUE, 1, (uint64_t)i); }
#define AX_A tf_axis(0)
#define AX_B tf_axis(1)
#define AX_C tf_axis(2)
#define AX_D tf_axis(3)

/* Storage big enough for every frontier the unit tests build on the stack. */
typedef TSR_FRONTIER_STORAGE(128) tf_storage_t;

/* Initialises `st` with capacity `cap` and kind, then inserts `n` (axis,
 * epoch) pairs given as varargs of (tsr_axis_t, uint64_t). */
static inline tsr_frontier_t *tf_make(tf_storage_t *st, uint32_t cap, tsr_frontier_kind_t kind, int n, ...) {
  tsr_frontier_t *f = tsr_frontier_init(st, cap, kind);
  cr_assert_not_null(f);
  va_list ap;
  va_start(ap, n);
  for (int i = 0; i < n; i++) {
    tsr_axis_t a = va_arg(ap, tsr_axis_t);
    uint64_t e = va_arg(ap, uint64_t);
    cr_assert_eq(tsr_frontier_insert_or_raise(f, a, e), TSR_FRONTIER_FIT);
  }
  va_end(ap);
  return f;
}
#define K(st, n, ...) tf_make((st), 16, TSR_FRONTIER_KNOWLEDGE, (n), __VA_ARGS__)
#define KEMPTY(st) tf_make((st), 16, TSR_FRONTIER_KNOWLEDGE, 0)
#define E(a, e) (tsr_axis_t)(a), (uint64_t)(e)

/* Human-readable frontier for failure messages: "{A:5, B:3}+tainted". */
static inline const char *tf_str(const tsr_frontier_t *f, char *buf, size_t cap) {
  size_t n = 0;
  n += (size_t)snprintf(buf + n, cap - n, "{");
  for (uint32_t i = 0; i < f->count && n < cap; i++) {
    tsr_axis_t a = f->entries[i].axis;
    n += (size_t)snprintf(buf + n, cap - n, "%s%u/%llu:%llu", i ? ", " : "", (unsigned)tsr_axis_domain(a),
                          (unsigned long long)tsr_axis_ordinal(a), (unsigned long long)f->entries[i].epoch);
  }
  if (n < cap)
    snprintf(buf + n, cap - n, "}%s%s", tsr_frontier_is_tainted(f) ? "+tainted" : "",
             tsr_frontier_is_overflowed(f) ? "+overflowed" : "");
  return buf;
}

/* Asserts that `f` holds exactly the given pairs (and is canonical). */
static inline void tf_expect(const tsr_frontier_t *f, int n, ...) {
  char b[512];
  cr_assert(tsr_frontier_is_valid(f), "invalid frontier %s", tf_str(f, b, sizeof b));
  cr_assert_eq(f->count, (uint32_t)n, "count %u, want %d: %s", f->count, n, tf_str(f, b, sizeof b));
  va_list ap;
  va_start(ap, n);
  for (int i = 0; i < n; i++) {
    tsr_axis_t a = va_arg(ap, tsr_axis_t);
    uint64_t e = va_arg(ap, uint64_t);
    cr_assert_eq(tsr_frontier_get(f, a), e, "axis ordinal %llu: got %llu want %llu in %s",
                 (unsigned long long)tsr_axis_ordinal(a), (unsigned long long)tsr_frontier_get(f, a),
                 (unsigned long long)e, tf_str(f, b, sizeof b));
  }
  va_end(ap);
}

static inline tsr_semaphore_t *tf_semaphore(uint32_t history, uint32_t cap) {
  tsr_semaphore_options_t o = {.initial_value = 0, .history_length = history, .frontier_capacity = cap};
  tsr_semaphore_t *s = NULL;
  tsr_status_t st = tsr_semaphore_create(&o, &s);
  cr_assert(tsr_status_is_ok(st), "%s", tsr_status_message(st));
  return s;
}

#endif
