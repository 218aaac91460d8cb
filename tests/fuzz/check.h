/* tests/fuzz/check.h: a fuzz target's own checks, beyond the sanitizers'.
 * FUZZ_CHECK(c) aborts with the broken condition and the file it is in, so
 * that libFuzzer keeps the input as a crash. Included by the targets as
 * "../check.h" (run.sh adds no include path of its own for them). */
#ifndef TESSERA_TESTS_FUZZ_CHECK_H
#define TESSERA_TESTS_FUZZ_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#define FUZZ_CHECK(c)                                                 \
  do {                                                                \
    if (!(c)) {                                                       \
      fprintf(stderr, "%s:%d: broken: %s\n", __FILE__, __LINE__, #c); \
      abort();                                                        \
    }                                                                 \
  } while (0)

#endif
