/* fuzz_units.c: libFuzzer target for the unit parsers of base/units.
 *
 * Every input, as a C string, goes through tsr_parse_u64, tsr_parse_size,
 * tsr_parse_duration, tsr_parse_fraction, tsr_parse_share and
 * tsr_parse_share_or_size. Each must return a status or a value, never crash
 * (ASan, UBSan). Beyond the sanitizers:
 *  - a refusal is INVALID_ARGUMENT with a message and leaves the output
 *    untouched;
 *  - u64 agrees with an independent reading of the digits;
 *  - size does not care about the case of its unit letters;
 *  - a share is a fraction written with '%' or a point; share-or-size gives
 *    what one of share and size gives, and zero for the other;
 *  - a parsed value printed plainly ("%llu", "%lluns") parses back to itself;
 *    a duration written in compound units ("1d2h3m4s5ms6us7ns") does too;
 *  - the printers' promises hold: tsr_format_fraction and tsr_format_percent
 *    are exact (they parse back to the same ppm), tsr_format_size and
 *    tsr_time_format_duration truncate (they parse back to at most the value,
 *    and the size within a tenth of its unit);
 *  - tsr_units_scale_ppm equals the 128-bit product.
 * Built and run by run.sh (registered with ctest as fuzz.units). */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/time.h"
#include "base/units.h"

#include "../check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A refusal: the right code, a message, the output untouched. */
static void tsr__refused(tsr_status_t st, bool untouched) {
  FUZZ_CHECK(tsr_status_code(st) == TSR_INVALID_ARGUMENT);
  FUZZ_CHECK(tsr_status_message(st)[0] != '\0');
  FUZZ_CHECK(untouched);
  tsr_status_free(st);
}

static uint64_t tsr__size_ok(const char *text) {
  uint64_t v = 0;
  tsr_status_t st = tsr_parse_size(text, &v);
  FUZZ_CHECK(st == NULL);
  return v;
}

static uint64_t tsr__duration_ok(const char *text) {
  uint64_t v = 0;
  tsr_status_t st = tsr_parse_duration(text, &v);
  FUZZ_CHECK(st == NULL);
  return v;
}

static uint32_t tsr__fraction_ok(const char *text) {
  uint32_t v = 0;
  tsr_status_t st = tsr_parse_fraction(text, &v);
  FUZZ_CHECK(st == NULL);
  return v;
}

/* ---- u64 ------------------------------------------------------------------ */

static void tsr__check_u64(const char *s) {
  /* The reference: non-empty, digits only, at most UINT64_MAX. */
  bool ref_ok = s[0] != '\0';
  unsigned __int128 ref = 0;
  for (const char *p = s; *p && ref_ok; p++) {
    if (*p < '0' || *p > '9')
      ref_ok = false;
    else
      ref = ref * 10 + (unsigned)(*p - '0');
    if (ref > UINT64_MAX) ref_ok = false;
  }
  uint64_t v = 42;
  tsr_status_t st = tsr_parse_u64(s, &v);
  if (st) {
    FUZZ_CHECK(!ref_ok);
    tsr__refused(st, v == 42);
    return;
  }
  FUZZ_CHECK(ref_ok && v == (uint64_t)ref);
  char buf[32];
  snprintf(buf, sizeof(buf), "%llu", (unsigned long long)v);
  uint64_t back = 0;
  FUZZ_CHECK(tsr_parse_u64(buf, &back) == NULL && back == v);
}

/* ---- size ----------------------------------------------------------------- */

static void tsr__check_size(const char *s, char *scratch) {
  uint64_t v = 42;
  tsr_status_t st = tsr_parse_size(s, &v);

  /* Unit letters are case-insensitive: flipping every letter's case gives
   * the same answer. */
  size_t n = strlen(s);
  for (size_t i = 0; i <= n; i++) {
    unsigned char c = (unsigned char)s[i];
    scratch[i] = (char)(isupper(c) ? tolower(c) : islower(c) ? toupper(c) : c);
  }
  uint64_t w = 42;
  tsr_status_t st2 = tsr_parse_size(scratch, &w);
  FUZZ_CHECK((st == NULL) == (st2 == NULL));
  if (st2) tsr__refused(st2, w == 42);
  if (st) {
    tsr__refused(st, v == 42);
    return;
  }
  FUZZ_CHECK(w == v);

  char buf[64];
  snprintf(buf, sizeof(buf), "%llu", (unsigned long long)v);
  FUZZ_CHECK(tsr__size_ok(buf) == v);
  snprintf(buf, sizeof(buf), "%llu B", (unsigned long long)v);
  FUZZ_CHECK(tsr__size_ok(buf) == v);

  /* tsr_format_size truncates to a tenth of its unit. Its EiB (values of
   * 2^60 and more) is not a unit the parser takes, so the check stops there. */
  if (v < (UINT64_C(1) << 60)) {
    tsr_format_size(v, buf, sizeof(buf));
    uint64_t unit = 1;
    while (unit < (UINT64_C(1) << 50) && v >= unit * 1024) unit *= 1024;
    uint64_t back = tsr__size_ok(buf);
    FUZZ_CHECK(back <= v && v - back <= unit / 10 + 1);
  }
}

/* ---- duration ------------------------------------------------------------- */

static void tsr__check_duration(const char *s) {
  uint64_t v = 42;
  tsr_status_t st = tsr_parse_duration(s, &v);
  if (st) {
    tsr__refused(st, v == 42);
    return;
  }
  char buf[128];
  snprintf(buf, sizeof(buf), "%lluns", (unsigned long long)v);
  FUZZ_CHECK(tsr__duration_ok(buf) == v);

  /* Compound, largest unit first, zero parts left out. */
  static const struct {
    const char *name;
    uint64_t ns;
  } units[] = {
      {"d", 86400 * TSR_NS_PER_S},
      {"h", 3600 * TSR_NS_PER_S},
      {"m", 60 * TSR_NS_PER_S},
      {"s", TSR_NS_PER_S},
      {"ms", TSR_NS_PER_MS},
      {"us", TSR_NS_PER_US},
      {"ns", 1},
  };
  size_t len = 0;
  uint64_t rest = v;
  for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
    uint64_t k = rest / units[i].ns;
    rest %= units[i].ns;
    if (k) len += (size_t)snprintf(buf + len, sizeof(buf) - len, "%llu%s", (unsigned long long)k, units[i].name);
  }
  if (len == 0) snprintf(buf, sizeof(buf), "0s");
  FUZZ_CHECK(tsr__duration_ok(buf) == v);

  /* The printer for people truncates, never rounds up. */
  tsr_time_format_duration(v, buf, sizeof(buf));
  FUZZ_CHECK(tsr__duration_ok(buf) <= v);
}

/* ---- fraction ------------------------------------------------------------- */

static void tsr__check_fraction(const char *s) {
  uint32_t v = 42;
  tsr_status_t st = tsr_parse_fraction(s, &v);
  if (st) {
    tsr__refused(st, v == 42);
    return;
  }
  FUZZ_CHECK(v <= TSR_PPM_ONE);
  char buf[32];
  tsr_format_fraction(v, buf, sizeof(buf));
  FUZZ_CHECK(tsr__fraction_ok(buf) == v);
  tsr_format_percent(v, buf, sizeof(buf));
  FUZZ_CHECK(tsr__fraction_ok(buf) == v);
}

/* ---- share, share or size ------------------------------------------------- */

static void tsr__check_share(const char *s) {
  uint32_t frac = 42, share = 42;
  tsr_status_t fst = tsr_parse_fraction(s, &frac);
  tsr_status_t st = tsr_parse_share(s, &share);
  bool marked = strchr(s, '%') != NULL || strchr(s, '.') != NULL;
  bool share_ok = st == NULL;
  FUZZ_CHECK(share_ok == (fst == NULL && marked));
  if (share_ok) FUZZ_CHECK(share == frac);
  if (fst) tsr__refused(fst, frac == 42);
  if (st) tsr__refused(st, share == 42);

  uint32_t ppm = 42;
  uint64_t bytes = 42, size = 42;
  tsr_status_t zst = tsr_parse_size(s, &size);
  st = tsr_parse_share_or_size(s, &ppm, &bytes);
  if (st) {
    FUZZ_CHECK(!share_ok); /* every share is also a share-or-size */
    tsr__refused(st, ppm == 42 && bytes == 42);
  } else {
    FUZZ_CHECK((share_ok && ppm == share && bytes == 0) || (zst == NULL && bytes == size && ppm == 0));
  }
  if (zst) tsr__refused(zst, size == 42);
}

/* ---- scale ---------------------------------------------------------------- */

static void tsr__check_scale(const uint8_t *data, size_t size) {
  if (size < 12) return;
  uint64_t bytes;
  uint32_t ppm;
  memcpy(&bytes, data, sizeof(bytes));
  memcpy(&ppm, data + 8, sizeof(ppm));
  ppm %= TSR_PPM_ONE + 1;
  unsigned __int128 ref = (unsigned __int128)bytes * ppm / TSR_PPM_ONE;
  FUZZ_CHECK(tsr_units_scale_ppm(bytes, ppm) == (uint64_t)ref);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* The parsers take C strings: the input up to its first NUL. */
  char *s = malloc(size + 1), *scratch = malloc(size + 1);
  FUZZ_CHECK(s && scratch);
  memcpy(s, data, size);
  s[size] = '\0';
  tsr__check_u64(s);
  tsr__check_size(s, scratch);
  tsr__check_duration(s);
  tsr__check_fraction(s);
  tsr__check_share(s);
  tsr__check_scale(data, size);
  free(s);
  free(scratch);
  return 0;
}
