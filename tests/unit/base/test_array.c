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
