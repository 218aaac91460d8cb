/* array.c: checked array growth (see array.h). */
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
