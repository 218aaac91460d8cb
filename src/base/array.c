/* array.c: checked array growth and binary search (see array.h). */
#include "base/array.h"

#include <stdint.h>
#include <stdlib.h>

void *tsr_array_grow(void *buf, size_t *cap, size_t need, size_t elem, size_t min_cap) {
  if (need <= *cap && buf) return buf;
  if (elem == 0) return NULL;
  size_t max = SIZE_MAX / elem;
  if (need > max) return NULL;
  size_t n = *cap ? *cap : (min_cap ? min_cap : 1);
  while (n < need) n = n > max / 2 ? max : n * 2;
  void *b = realloc(buf, n * elem);
  if (!b) return NULL;
  *cap = n;
  return b;
}

size_t tsr_array_lower_bound(const void *base, size_t count, size_t elem, const void *key,
                             bool (*before)(const void *element, const void *key)) {
  size_t lo = 0, hi = count;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (before((const char *)base + mid * elem, key))
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}
