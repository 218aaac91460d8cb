/* base/array: checked growth. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>

#include "base/array.h"

Test(array, grows_by_doubling_from_the_minimum) {
  size_t cap = 0;
  int *a = tsr_array_grow(NULL, &cap, 1, sizeof(int), 16);
  cr_assert_not_null(a);
  cr_assert_eq(cap, 16);
  a = tsr_array_grow(a, &cap, 16, sizeof(int), 16);
  cr_assert_eq(cap, 16, "room enough: unchanged");
  a = tsr_array_grow(a, &cap, 17, sizeof(int), 16);
  cr_assert_eq(cap, 32);
  a = tsr_array_grow(a, &cap, 1000, sizeof(int), 16);
  cr_assert_eq(cap, 1024);
  a[999] = 7; /* really that big */
  free(a);
}

Test(array, overflow_fails_and_leaves_the_buffer) {
  size_t cap = 4;
  char *a = malloc(4);
  char *b = tsr_array_grow(a, &cap, SIZE_MAX / 8 + 1, 16, 1);
  cr_assert_null(b, "a size past SIZE_MAX was allocated");
  cr_assert_eq(cap, 4);
  a[3] = 1; /* still ours */
  free(a);
}

typedef struct {
  uint64_t id;
  int payload;
} entry_t;

static bool id_before(const void *e, const void *key) { return ((const entry_t *)e)->id < *(const uint64_t *)key; }

Test(array, lower_bound_finds_where_a_key_is_or_would_go) {
  const entry_t v[] = {{2, 0}, {4, 1}, {4, 2}, {9, 3}, {UINT64_MAX, 4}};
  const size_t n = sizeof(v) / sizeof(v[0]);
  /* every key against a linear scan: the first element not before it */
  const uint64_t keys[] = {0, 1, 2, 3, 4, 5, 9, 10, UINT64_MAX - 1, UINT64_MAX};
  for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
    size_t want = 0;
    while (want < n && v[want].id < keys[k]) want++;
    cr_assert_eq(tsr_array_lower_bound(v, n, sizeof(v[0]), &keys[k], id_before), want, "key %llu",
                 (unsigned long long)keys[k]);
  }
  cr_assert_eq(tsr_array_lower_bound(v, n, sizeof(v[0]), &(uint64_t){4}, id_before), 1, "the first of equal keys");
  cr_assert_eq(tsr_array_lower_bound(NULL, 0, sizeof(v[0]), &keys[0], id_before), 0, "empty: 0");
}
