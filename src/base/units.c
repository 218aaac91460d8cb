/* units.c: strict parsers and printers for sizes, durations and fractions. */
#include "base/units.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

typedef unsigned __int128 tsr__u128;

/* A decimal number "123" or "1.25" as value = mant / 10^scale. */
typedef struct {
  tsr__u128 mant;
  int scale;
} tsr__decimal_t;

/* Reads a decimal at *p; advances *p. At most 30 significant digits in all,
 * which keeps mant below 2^100. */
static bool tsr__read_decimal(const char **p, tsr__decimal_t *out) {
  const char *s = *p;
  tsr__decimal_t d = {0, 0};
  int digits = 0;
  bool any = false;
  while (isdigit((unsigned char)*s)) {
    if (d.mant != 0 || *s != '0') digits++;
    if (digits > 30) return false;
    d.mant = d.mant * 10 + (unsigned)(*s - '0');
    s++;
    any = true;
  }
  if (*s == '.') {
    if (!any) return false; /* ".5": a digit must come before the point */
    s++;
    bool frac_any = false;
    while (isdigit((unsigned char)*s)) {
      if (d.mant != 0 || *s != '0') digits++;
      if (digits > 30 || d.scale >= 30) return false;
      d.mant = d.mant * 10 + (unsigned)(*s - '0');
      d.scale++;
      s++;
      frac_any = true;
    }
    if (!frac_any) return false;
    any = true;
  }
  if (!any) return false;
  *p = s;
  *out = d;
  return true;
}

static tsr__u128 tsr__pow10(int n) {
  tsr__u128 v = 1;
  while (n-- > 0) v *= 10;
  return v;
}

/* floor(d * mult), or false if it exceeds `limit`. mult <= 2^60. */
static bool tsr__decimal_times(tsr__decimal_t d, uint64_t mult, uint64_t limit, uint64_t *out) {
  /* mant < 10^30 < 2^100 and mult < 2^64 could overflow 128 bits: reduce first. */
  tsr__u128 div = tsr__pow10(d.scale);
  tsr__u128 whole = d.mant / div;
  tsr__u128 frac = d.mant % div;
  if (whole > limit) return false;
  tsr__u128 v = whole * mult; /* < 2^64 * 2^64 */
  /* frac < div <= 10^30 (~2^100); frac * mult could overflow when both are
   * large; scale the fraction down to 18 digits first (error < 1 unit). */
  int scale = d.scale;
  while (scale > 18) {
    frac /= 10;
    div /= 10;
    scale--;
  }
  v += frac * mult / div;
  if (v > limit) return false;
  *out = (uint64_t)v;
  return true;
}

static const char *tsr__skip_space(const char *s) {
  while (*s == ' ' || *s == '\t') s++;
  return s;
}

tsr_status_t tsr_parse_u64(const char *text, uint64_t *out_value) {
  if (!text || !*text) return tsr_status_make(TSR_INVALID_ARGUMENT, "empty number");
  uint64_t v = 0;
  for (const char *s = text; *s; s++) {
    if (!isdigit((unsigned char)*s))
      return tsr_status_make(TSR_INVALID_ARGUMENT, "'%s' is not a non-negative integer", text);
    unsigned digit = (unsigned)(*s - '0');
    if (v > (UINT64_MAX - digit) / 10) return tsr_status_make(TSR_INVALID_ARGUMENT, "'%s' is too large", text);
    v = v * 10 + digit;
  }
  *out_value = v;
  return NULL;
}

typedef struct {
  const char *name;
  uint64_t mult;
} tsr__unit_t;

static const tsr__unit_t tsr__size_units[] = {
    {"", 1},
    {"b", 1},
    {"k", UINT64_C(1) << 10},
    {"ki", UINT64_C(1) << 10},
    {"kib", UINT64_C(1) << 10},
    {"m", UINT64_C(1) << 20},
    {"mi", UINT64_C(1) << 20},
    {"mib", UINT64_C(1) << 20},
    {"g", UINT64_C(1) << 30},
    {"gi", UINT64_C(1) << 30},
    {"gib", UINT64_C(1) << 30},
    {"t", UINT64_C(1) << 40},
    {"ti", UINT64_C(1) << 40},
    {"tib", UINT64_C(1) << 40},
    {"p", UINT64_C(1) << 50},
    {"pi", UINT64_C(1) << 50},
    {"pib", UINT64_C(1) << 50},
    {"kb", UINT64_C(1000)},
    {"mb", UINT64_C(1000000)},
    {"gb", UINT64_C(1000000000)},
    {"tb", UINT64_C(1000000000000)},
    {"pb", UINT64_C(1000000000000000)},
};

tsr_status_t tsr_parse_size(const char *text, uint64_t *out_bytes) {
  if (!text) return tsr_status_make(TSR_INVALID_ARGUMENT, "missing size");
  const char *p = tsr__skip_space(text);
  tsr__decimal_t d;
  if (!tsr__read_decimal(&p, &d))
    return tsr_status_make(TSR_INVALID_ARGUMENT, "'%s' is not a size (expected a number and a unit, e.g. 10GiB)", text);
  p = tsr__skip_space(p);
  const char *unit = p;
  size_t len = strlen(unit);
  while (len > 0 && (unit[len - 1] == ' ' || unit[len - 1] == '\t')) len--;
  for (size_t i = 0; i < sizeof(tsr__size_units) / sizeof(tsr__size_units[0]); i++) {
    const tsr__unit_t *u = &tsr__size_units[i];
    if (strlen(u->name) == len && strncasecmp(u->name, unit, len) == 0) {
      if (!tsr__decimal_times(d, u->mult, UINT64_MAX, out_bytes))
        return tsr_status_make(TSR_INVALID_ARGUMENT, "size '%s' is too large", text);
      return NULL;
    }
  }
  return tsr_status_make(TSR_INVALID_ARGUMENT,
                         "'%s': unknown size unit '%.*s' (use B, KiB, MiB, GiB, TiB, or KB, MB, GB, TB)", text,
                         (int)len, unit);
}

static const tsr__unit_t tsr__duration_units[] = {
    {"ns", 1},
    {"us", UINT64_C(1000)},
    {"ms", UINT64_C(1000000)},
    {"s", UINT64_C(1000000000)},
    {"m", UINT64_C(60000000000)},
    {"h", UINT64_C(3600000000000)},
    {"d", UINT64_C(86400000000000)},
};

tsr_status_t tsr_parse_duration(const char *text, uint64_t *out_ns) {
  if (!text) return tsr_status_make(TSR_INVALID_ARGUMENT, "missing duration");
  const char *p = text;
  uint64_t total = 0;
  int parts = 0;
  size_t last_unit = sizeof(tsr__duration_units) / sizeof(tsr__duration_units[0]);
  while (*p) {
    tsr__decimal_t d;
    if (!tsr__read_decimal(&p, &d))
      return tsr_status_make(TSR_INVALID_ARGUMENT, "'%s' is not a duration (expected e.g. 90s, 15m, 2h, 1h30m)", text);
    const char *unit = p;
    while (isalpha((unsigned char)*p)) p++;
    size_t len = (size_t)(p - unit);
    if (len == 0)
      return tsr_status_make(TSR_INVALID_ARGUMENT, "duration '%s' needs a unit: ns, us, ms, s, m, h or d (e.g. 90s)",
                             text);
    size_t found = last_unit;
    for (size_t i = 0; i < sizeof(tsr__duration_units) / sizeof(tsr__duration_units[0]); i++) {
      if (strlen(tsr__duration_units[i].name) == len && strncmp(tsr__duration_units[i].name, unit, len) == 0) found = i;
    }
    if (found == sizeof(tsr__duration_units) / sizeof(tsr__duration_units[0]))
      return tsr_status_make(TSR_INVALID_ARGUMENT, "'%s': unknown duration unit '%.*s' (use ns, us, ms, s, m, h or d)",
                             text, (int)len, unit);
    /* Compound durations go from larger to smaller units: 1h30m, not 30m1h. */
    if (parts > 0 && found >= last_unit)
      return tsr_status_make(TSR_INVALID_ARGUMENT, "'%s': units of a compound duration must go from larger to smaller",
                             text);
    uint64_t v;
    if (!tsr__decimal_times(d, tsr__duration_units[found].mult, UINT64_MAX, &v) || v > UINT64_MAX - total)
      return tsr_status_make(TSR_INVALID_ARGUMENT, "duration '%s' is too long", text);
    total += v;
    last_unit = found;
    parts++;
  }
  if (parts == 0) return tsr_status_make(TSR_INVALID_ARGUMENT, "empty duration");
  *out_ns = total;
  return NULL;
}

/* A share read exactly in parts per million: the value times 1e6 (1e4 with
 * '%') must be a whole number no more than 1e6; nothing is rounded, so what
 * is stored is what was written. `bare_hint` NULL allows a plain integer ("1"
 * for 100%, as lock files write it); otherwise a plain integer is refused
 * with that hint, since people mean 1% or 1 byte as often as 100%. */
TSR_MUST_USE static tsr_status_t tsr__parse_ppm(const char *text, const char *what, const char *bare_hint,
                                                uint32_t *out_ppm) {
  if (!text) return tsr_status_make(TSR_INVALID_ARGUMENT, "missing %s", what);
  const char *p = text;
  tsr__decimal_t d = {0, 0};
  bool percent = false;
  if (tsr__read_decimal(&p, &d) && *p == '%') {
    percent = true;
    p++;
  }
  if (p == text || *p != '\0')
    return tsr_status_make(TSR_INVALID_ARGUMENT, "'%s' is not a %s (expected e.g. 0.25 or 25%%)", text, what);
  if (bare_hint && !percent && !strchr(text, '.'))
    return tsr_status_make(TSR_INVALID_ARGUMENT, "'%s' is a bare number: %s", text, bare_hint);
  /* mant < 10^30 and div <= 10^30: both products stay below 2^127. */
  tsr__u128 div = tsr__pow10(d.scale);
  tsr__u128 scaled = d.mant * (percent ? 10000u : TSR_PPM_ONE);
  if (scaled > (tsr__u128)TSR_PPM_ONE * div)
    return tsr_status_make(TSR_INVALID_ARGUMENT, "%s '%s' is more than 100%%", what, text);
  if (scaled % div != 0)
    return tsr_status_make(TSR_INVALID_ARGUMENT, "%s '%s' is finer than the resolution of 0.0001%% (one millionth)",
                           what, text);
  *out_ppm = (uint32_t)(scaled / div);
  return NULL;
}

tsr_status_t tsr_parse_fraction(const char *text, uint32_t *out_ppm) {
  return tsr__parse_ppm(text, "fraction", NULL, out_ppm);
}

tsr_status_t tsr_parse_share(const char *text, uint32_t *out_ppm) {
  return tsr__parse_ppm(text, "share", "write a share with '%' or a decimal point (25%, 0.25; 100% is 1.0)", out_ppm);
}

tsr_status_t tsr_parse_share_or_size(const char *text, uint32_t *out_ppm, uint64_t *out_bytes) {
  if (!text) return tsr_status_make(TSR_INVALID_ARGUMENT, "missing share or size");
  const char *p = text;
  tsr__decimal_t d;
  if (!tsr__read_decimal(&p, &d))
    return tsr_status_make(TSR_INVALID_ARGUMENT, "'%s' is neither a share (25%%, 0.25) nor a size (40GiB, 512MiB)",
                           text);
  /* What follows the number decides: '%' or nothing is a share, a unit a size. */
  if (*p == '%' || *tsr__skip_space(p) == '\0') {
    uint32_t ppm = 0;
    TSR_RETURN_IF_ERROR(tsr__parse_ppm(text, "share",
                                       "write a share with '%' or a decimal point (25%, 0.25) "
                                       "or a size with a unit (40GiB, 1024B)",
                                       &ppm));
    *out_ppm = ppm;
    *out_bytes = 0;
    return NULL;
  }
  uint64_t bytes;
  TSR_RETURN_IF_ERROR(tsr_parse_size(text, &bytes));
  *out_ppm = 0;
  *out_bytes = bytes;
  return NULL;
}

uint64_t tsr_units_scale_ppm(uint64_t bytes, uint32_t ppm) {
  /* bytes = q*1e6 + r  =>  bytes*ppm/1e6 = q*ppm + r*ppm/1e6, both exact. */
  uint64_t q = bytes / TSR_PPM_ONE, r = bytes % TSR_PPM_ONE;
  return q * ppm + r * ppm / TSR_PPM_ONE;
}

void tsr_format_size(uint64_t bytes, char *buf, size_t cap) {
  static const char *const names[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int i = 0;
  while (i < 6 && bytes >= (UINT64_C(1) << (10 * (i + 1)))) i++;
  if (i == 0) {
    snprintf(buf, cap, "%llu B", (unsigned long long)bytes);
    return;
  }
  uint64_t unit = UINT64_C(1) << (10 * i);
  uint64_t whole = bytes / unit;
  uint64_t tenth = (bytes % unit) * 10 / unit;
  if (tenth)
    snprintf(buf, cap, "%llu.%llu %s", (unsigned long long)whole, (unsigned long long)tenth, names[i]);
  else
    snprintf(buf, cap, "%llu %s", (unsigned long long)whole, names[i]);
}

/* Writes value/10^scale exactly, trimming trailing zeros. */
static void tsr__format_fixed(uint64_t value, int scale, const char *suffix, char *buf, size_t cap) {
  uint64_t div = 1;
  for (int i = 0; i < scale; i++) div *= 10;
  uint64_t whole = value / div, frac = value % div;
  if (frac == 0) {
    snprintf(buf, cap, "%llu%s", (unsigned long long)whole, suffix);
    return;
  }
  char digits[24];
  snprintf(digits, sizeof(digits), "%0*llu", scale, (unsigned long long)frac);
  size_t n = strlen(digits);
  while (n > 0 && digits[n - 1] == '0') digits[--n] = '\0';
  snprintf(buf, cap, "%llu.%s%s", (unsigned long long)whole, digits, suffix);
}

void tsr_format_percent(uint32_t ppm, char *buf, size_t cap) { tsr__format_fixed(ppm, 4, "%", buf, cap); }

void tsr_format_fraction(uint32_t ppm, char *buf, size_t cap) { tsr__format_fixed(ppm, 6, "", buf, cap); }
