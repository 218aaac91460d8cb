#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include "base/units.h"

static uint64_t size_ok(const char *s) {
  uint64_t v = 0;
  tsr_status_t st = tsr_parse_size(s, &v);
  cr_assert_null(st, "parse_size(%s): %s", s, tsr_status_message(st));
  return v;
}
static void size_bad(const char *s) {
  uint64_t v = 12345;
  tsr_status_t st = tsr_parse_size(s, &v);
  cr_assert_not_null(st, "parse_size(%s) should fail", s);
  cr_assert_eq(tsr_status_code(st), TSR_INVALID_ARGUMENT);
  cr_assert_eq(v, 12345, "output must be untouched on error");
  tsr_status_free(st);
}
static uint64_t dur_ok(const char *s) {
  uint64_t v = 0;
  tsr_status_t st = tsr_parse_duration(s, &v);
  cr_assert_null(st, "parse_duration(%s): %s", s, tsr_status_message(st));
  return v;
}
static void dur_bad(const char *s) {
  uint64_t v = 777;
  tsr_status_t st = tsr_parse_duration(s, &v);
  cr_assert_not_null(st, "parse_duration(%s) should fail", s);
  cr_assert_eq(v, 777);
  tsr_status_free(st);
}
static uint32_t frac_ok(const char *s) {
  uint32_t v = 0;
  tsr_status_t st = tsr_parse_fraction(s, &v);
  cr_assert_null(st, "parse_fraction(%s): %s", s, tsr_status_message(st));
  return v;
}
static void frac_bad(const char *s) {
  uint32_t v = 5;
  tsr_status_t st = tsr_parse_fraction(s, &v);
  cr_assert_not_null(st, "parse_fraction(%s) should fail", s);
  cr_assert_eq(v, 5);
  tsr_status_free(st);
}

Test(units, sizes) {
  cr_assert_eq(size_ok("10GiB"), UINT64_C(10) << 30);
  cr_assert_eq(size_ok("10 GiB"), UINT64_C(10) << 30);
  cr_assert_eq(size_ok("10gib"), UINT64_C(10) << 30);
  cr_assert_eq(size_ok("80G"), UINT64_C(80) << 30);
  cr_assert_eq(size_ok("512MiB"), UINT64_C(512) << 20);
  cr_assert_eq(size_ok("1.5GiB"), UINT64_C(3) << 29);
  cr_assert_eq(size_ok("4096"), 4096);
  cr_assert_eq(size_ok("4096B"), 4096);
  cr_assert_eq(size_ok("0"), 0);
  cr_assert_eq(size_ok("1KB"), 1000);
  cr_assert_eq(size_ok("80GB"), UINT64_C(80000000000));
  cr_assert_eq(size_ok("0.5B"), 0); /* rounded down */
}

Test(units, sizes_at_the_limit) {
  cr_assert_eq(size_ok("18446744073709551615"), UINT64_MAX);
  cr_assert_eq(size_ok("15PiB"), UINT64_C(15) << 50);
  cr_assert_eq(size_ok("16383PiB"), UINT64_C(16383) << 50);
  size_bad("18446744073709551616");
  size_bad("16384PiB");
  size_bad("99999999999999999999999999999999GiB");
}

Test(units, sizes_garbage) {
  size_bad("");
  size_bad("GiB");
  size_bad("-1GiB");
  size_bad("+1GiB");
  size_bad("1e9");
  size_bad("10 GiBs");
  size_bad("10XB");
  size_bad("1.GiB");
  size_bad(".5GiB");
  size_bad("1..5GiB");
  size_bad("0x10");
  size_bad(NULL);
}

Test(units, durations) {
  cr_assert_eq(dur_ok("90s"), UINT64_C(90000000000));
  cr_assert_eq(dur_ok("15m"), UINT64_C(900000000000));
  cr_assert_eq(dur_ok("2h"), UINT64_C(7200000000000));
  cr_assert_eq(dur_ok("1d"), UINT64_C(86400000000000));
  cr_assert_eq(dur_ok("500ms"), UINT64_C(500000000));
  cr_assert_eq(dur_ok("250us"), UINT64_C(250000));
  cr_assert_eq(dur_ok("100ns"), 100);
  cr_assert_eq(dur_ok("1.5h"), UINT64_C(5400000000000));
  cr_assert_eq(dur_ok("1h30m"), UINT64_C(5400000000000));
  cr_assert_eq(dur_ok("1m30s"), UINT64_C(90000000000));
  cr_assert_eq(dur_ok("0s"), 0);
  cr_assert_eq(dur_ok("0.0000000001s"), 0); /* below 1 ns rounds down */
}

Test(units, durations_overflow_and_garbage) {
  /* UINT64_MAX ns is about 213503 days. */
  cr_assert_eq(dur_ok("213503d"), UINT64_C(213503) * UINT64_C(86400000000000));
  dur_bad("213504d");
  dur_bad("18446744073709551616ns");
  dur_bad("213503d23h59m59s999ms999us999ns"); /* sum past the limit */
  dur_bad("");
  dur_bad("90");
  dur_bad("s");
  dur_bad("-5s");
  dur_bad("5 s");
  dur_bad("5sec");
  dur_bad("5S");
  dur_bad("30m1h");
  dur_bad("1h1h");
  dur_bad("1h 30m");
  dur_bad(NULL);
}

Test(units, fractions) {
  cr_assert_eq(frac_ok("0.25"), 250000);
  cr_assert_eq(frac_ok("25%"), 250000);
  cr_assert_eq(frac_ok("1"), 1000000); /* lock files write 100% as "1" */
  cr_assert_eq(frac_ok("100%"), 1000000);
  cr_assert_eq(frac_ok("1.0"), 1000000);
  cr_assert_eq(frac_ok("12.5%"), 125000);
  cr_assert_eq(frac_ok("0"), 0);
  cr_assert_eq(frac_ok("0.333333"), 333333);
  cr_assert_eq(frac_ok("0.3333330000"), 333333); /* trailing zeros are exact */
  cr_assert_eq(frac_ok("0.000001"), 1);
  cr_assert_eq(frac_ok("0.0001%"), 1);
  cr_assert_eq(frac_ok("99.9999%"), 999999);
}

Test(units, fractions_out_of_range_and_garbage) {
  frac_bad("1.0000005");
  frac_bad("1.0000001");
  frac_bad("1.5");
  frac_bad("2");
  frac_bad("100.00005%");
  frac_bad("100.0000001%");
  frac_bad("101%");
  frac_bad("99999999999999999999999999");
  frac_bad("-0.5");
  frac_bad("");
  frac_bad("%");
  frac_bad("50 %");
  frac_bad("0.5%%");
  frac_bad("half");
  frac_bad("0,5");
  frac_bad(NULL);
}

/* what a refusal says, for the messages people read */
static void expect_message(tsr_status_t st, const char *text, const char *want) {
  cr_assert_not_null(st, "'%s' should be refused", text);
  cr_assert_eq(tsr_status_code(st), TSR_INVALID_ARGUMENT);
  cr_assert(strstr(tsr_status_message(st), want), "'%s': expected '%s' in '%s'", text, want, tsr_status_message(st));
  tsr_status_free(st);
}

Test(units, fractions_are_never_rounded) {
  /* these used to round to the nearest millionth; now they are refused */
  static const char *const fine[] = {"0.3333333", "0.6666667",    "0.0000004", "0.0000005",
                                     "99.99995%", "12.34567891%", "0.1234567"};
  for (size_t i = 0; i < sizeof(fine) / sizeof(fine[0]); i++) {
    uint32_t v = 5;
    expect_message(tsr_parse_fraction(fine[i], &v), fine[i], "resolution of 0.0001%");
    cr_assert_eq(v, 5);
  }
}

static uint32_t share_ok(const char *s) {
  uint32_t v = 0;
  tsr_status_t st = tsr_parse_share(s, &v);
  cr_assert_null(st, "parse_share(%s): %s", s, tsr_status_message(st));
  return v;
}
static void share_bad(const char *s, const char *why) {
  uint32_t v = 5;
  expect_message(tsr_parse_share(s, &v), s ? s : "(null)", why);
  cr_assert_eq(v, 5, "output must be untouched on error");
}

Test(units, shares) {
  cr_assert_eq(share_ok("25%"), 250000);
  cr_assert_eq(share_ok("12.5%"), 125000);
  cr_assert_eq(share_ok("0.25"), 250000);
  cr_assert_eq(share_ok("1.0"), 1000000);
  cr_assert_eq(share_ok("100%"), 1000000);
  cr_assert_eq(share_ok("100.000000%"), 1000000);
  cr_assert_eq(share_ok("0%"), 0);
  cr_assert_eq(share_ok("0.0"), 0);
  cr_assert_eq(share_ok("0.0001%"), 1);
  cr_assert_eq(share_ok("0.000001"), 1);
  cr_assert_eq(share_ok("12.3456%"), 123456);
  cr_assert_eq(share_ok("0.123456"), 123456);
  cr_assert_eq(share_ok("0.034925"), 34925);
}

Test(units, shares_refused_with_what_to_write) {
  /* a bare integer is ambiguous: "1" was 100%, "2" 2 bytes */
  share_bad("1", "bare number");
  share_bad("2", "bare number");
  share_bad("0", "bare number");
  share_bad("30", "write a share with '%' or a decimal point");
  /* more than 100%, exactly: no rounding down to 100% */
  share_bad("100.0000001%", "more than 100%");
  share_bad("1.0000001", "more than 100%");
  share_bad("101%", "more than 100%");
  share_bad("1.5", "more than 100%");
  /* finer than a millionth */
  share_bad("12.34567891%", "resolution of 0.0001% (one millionth)");
  share_bad("0.1234567", "resolution of 0.0001% (one millionth)");
  share_bad("0.00001%", "resolution of 0.0001%");
  /* not a number */
  share_bad("", "not a share");
  share_bad("%", "not a share");
  share_bad("half", "not a share");
  share_bad("-0.5", "not a share");
  share_bad("+25%", "not a share");
  share_bad(".5", "not a share");
  share_bad("1.", "not a share");
  share_bad("25 %", "not a share");
  share_bad("25%%", "not a share");
  share_bad("1e-1", "not a share");
  share_bad("0,5", "not a share");
  share_bad("40GiB", "not a share");
  share_bad(NULL, "missing share");
}

Test(units, share_or_size) {
  uint32_t ppm = 9;
  uint64_t bytes = 9;
  cr_assert_null(tsr_parse_share_or_size("25%", &ppm, &bytes));
  cr_assert_eq(ppm, 250000);
  cr_assert_eq(bytes, 0);
  cr_assert_null(tsr_parse_share_or_size("0.5", &ppm, &bytes));
  cr_assert_eq(ppm, 500000);
  cr_assert_eq(bytes, 0);
  cr_assert_null(tsr_parse_share_or_size("40GiB", &ppm, &bytes));
  cr_assert_eq(ppm, 0);
  cr_assert_eq(bytes, UINT64_C(40) << 30);
  cr_assert_null(tsr_parse_share_or_size("512MiB", &ppm, &bytes));
  cr_assert_eq(bytes, UINT64_C(512) << 20);
  cr_assert_null(tsr_parse_share_or_size("1024B", &ppm, &bytes));
  cr_assert_eq(bytes, 1024);
  cr_assert_null(tsr_parse_share_or_size("1.5 GiB", &ppm, &bytes));
  cr_assert_eq(bytes, UINT64_C(3) << 29);
  cr_assert_null(tsr_parse_share_or_size("3GB", &ppm, &bytes));
  cr_assert_eq(bytes, UINT64_C(3000000000));
  cr_assert_eq(ppm, 0);

  static const struct {
    const char *text, *why;
  } bad[] = {
      {"1", "or a size with a unit (40GiB, 1024B)"},
      {"2", "bare number"},
      {"1024", "bare number"},
      {"1024 ", "not a share"},
      {"1.0000001", "more than 100%"},
      {"100.0000001%", "more than 100%"},
      {"12.34567891%", "resolution of 0.0001%"},
      {"0.1234567", "resolution of 0.0001%"},
      {"lots", "neither a share"},
      {"", "neither a share"},
      {"GiB", "neither a share"},
      {"10XB", "unknown size unit"},
      {"16384PiB", "too large"},
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    ppm = 7;
    bytes = 7;
    expect_message(tsr_parse_share_or_size(bad[i].text, &ppm, &bytes), bad[i].text, bad[i].why);
    cr_assert(ppm == 7 && bytes == 7, "'%s': outputs must be untouched on error", bad[i].text);
  }
  expect_message(tsr_parse_share_or_size(NULL, &ppm, &bytes), "(null)", "missing");
}

Test(units, u64) {
  uint64_t v;
  cr_assert_null(tsr_parse_u64("0", &v));
  cr_assert_eq(v, 0);
  cr_assert_null(tsr_parse_u64("18446744073709551615", &v));
  cr_assert_eq(v, UINT64_MAX);
  tsr_status_t st = tsr_parse_u64("18446744073709551616", &v);
  cr_assert_not_null(st);
  tsr_status_free(st);
  st = tsr_parse_u64("12a", &v);
  cr_assert_not_null(st);
  tsr_status_free(st);
  st = tsr_parse_u64("", &v);
  cr_assert_not_null(st);
  tsr_status_free(st);
}

Test(units, scale_ppm_is_exact_and_never_overflows) {
  cr_assert_eq(tsr_units_scale_ppm(UINT64_C(80) << 30, 500000), UINT64_C(40) << 30);
  cr_assert_eq(tsr_units_scale_ppm(UINT64_MAX, 1000000), UINT64_MAX);
  cr_assert_eq(tsr_units_scale_ppm(UINT64_MAX, 0), 0);
  cr_assert_eq(tsr_units_scale_ppm(999999, 1), 0);
  cr_assert_eq(tsr_units_scale_ppm(1000000, 1), 1);
  /* floor(x * p / 1e6) against 128-bit arithmetic on a spread of values */
  uint64_t x = 0x9E3779B97F4A7C15u;
  for (int i = 0; i < 10000; i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    uint32_t p = (uint32_t)(x % 1000001);
    unsigned __int128 want = (unsigned __int128)x * p / 1000000;
    cr_assert_eq(tsr_units_scale_ppm(x, p), (uint64_t)want);
  }
}

Test(units, formatting) {
  char b[64];
  tsr_format_size(UINT64_C(40) << 30, b, sizeof b);
  cr_assert_str_eq(b, "40 GiB");
  tsr_format_size(UINT64_C(3) << 29, b, sizeof b);
  cr_assert_str_eq(b, "1.5 GiB");
  tsr_format_size(17, b, sizeof b);
  cr_assert_str_eq(b, "17 B");
  tsr_format_size(UINT64_MAX, b, sizeof b);
  cr_assert_str_eq(b, "15.9 EiB");
  tsr_format_percent(500000, b, sizeof b);
  cr_assert_str_eq(b, "50%");
  tsr_format_percent(333333, b, sizeof b);
  cr_assert_str_eq(b, "33.3333%");
  tsr_format_percent(1, b, sizeof b);
  cr_assert_str_eq(b, "0.0001%");
  tsr_format_fraction(500000, b, sizeof b);
  cr_assert_str_eq(b, "0.5");
  tsr_format_fraction(1000000, b, sizeof b);
  cr_assert_str_eq(b, "1");
  tsr_format_fraction(333333, b, sizeof b);
  cr_assert_str_eq(b, "0.333333");
}

Test(units, fraction_format_parse_round_trip) {
  char b[32];
  for (uint32_t ppm = 0; ppm <= 1000000; ppm += 997) {
    tsr_format_fraction(ppm, b, sizeof b);
    cr_assert_eq(frac_ok(b), ppm);
    tsr_format_percent(ppm, b, sizeof b);
    cr_assert_eq(frac_ok(b), ppm);
  }
}
