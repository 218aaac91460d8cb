#include <criterion/criterion.h>
#include <string.h>

#include "base/time.h"

Test(time, clocks_move_forward) {
  uint64_t a = tsr_time_mono_ns(), b = tsr_time_mono_ns();
  cr_assert_geq(b, a);
  cr_assert_gt(tsr_time_wall_ns(), UINT64_C(1700000000) * TSR_NS_PER_S);
}

Test(time, saturating_arithmetic) {
  cr_assert_eq(tsr_time_add_sat(UINT64_MAX - 1, 5), UINT64_MAX);
  cr_assert_eq(tsr_time_add_sat(1, 2), 3);
  cr_assert_eq(tsr_time_sub_sat(1, 2), 0);
  cr_assert_eq(tsr_time_sub_sat(5, 2), 3);
}

Test(time, rfc3339_round_trip) {
  char b[64];
  uint64_t t = UINT64_C(1763805600123456789); /* 2025-11-22T10:00:00.123456789Z */
  cr_assert(tsr_time_format_rfc3339(t, 9, b, sizeof b));
  cr_assert_str_eq(b, "2025-11-22T10:00:00.123456789Z");
  uint64_t back = 0;
  cr_assert(tsr_time_parse_rfc3339(b, &back));
  cr_assert_eq(back, t);
  cr_assert(tsr_time_format_rfc3339(t, 3, b, sizeof b));
  cr_assert_str_eq(b, "2025-11-22T10:00:00.123Z");
  cr_assert(tsr_time_format_rfc3339(t, 0, b, sizeof b));
  cr_assert_str_eq(b, "2025-11-22T10:00:00Z");
  cr_assert(tsr_time_parse_rfc3339(b, &back));
  cr_assert_eq(back, UINT64_C(1763805600) * TSR_NS_PER_S);
  cr_assert_not(tsr_time_format_rfc3339(t, 9, b, 10));
  cr_assert_str_eq(b, "");
}

Test(time, rfc3339_rejects_garbage) {
  uint64_t v = 42;
  const char *bad[] = {"",
                       "2025-11-22",
                       "2025-11-22T10:00:00",
                       "2025-11-22T10:00:00+01:00",
                       "2025-13-01T00:00:00Z",
                       "2025-02-30T00:00:00Z",
                       "2025-11-22T24:00:00Z",
                       "2025-11-22T10:00:00.Z",
                       "2025-11-22T10:00:00.1234567890Z",
                       "1969-12-31T23:59:59Z",
                       "2025-11-22T10:00:00Zjunk",
                       "2025-11-22 10:00:00Z",
                       NULL};
  for (int i = 0; bad[i]; i++) cr_assert_not(tsr_time_parse_rfc3339(bad[i], &v), "%s", bad[i]);
  cr_assert_not(tsr_time_parse_rfc3339(NULL, &v));
  cr_assert_eq(v, 42);
}

Test(time, durations_for_people) {
  char b[32];
  struct {
    uint64_t ns;
    const char *want;
  } cases[] = {
      {0, "0s"},
      {7200 * TSR_NS_PER_S, "2h"},
      {5400 * TSR_NS_PER_S, "1h30m"},
      {90 * TSR_NS_PER_S, "1m30s"},
      {1500 * TSR_NS_PER_MS, "1.5s"},
      {250 * TSR_NS_PER_MS, "250ms"},
      {12 * TSR_NS_PER_US, "12us"},
      {7, "7ns"},
      {90000 * TSR_NS_PER_S, "1d1h"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    tsr_time_format_duration(cases[i].ns, b, sizeof b);
    cr_assert_str_eq(b, cases[i].want);
  }
}
