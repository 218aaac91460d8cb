/* The compute share's token bucket (region/bucket.h) and the region's
 * compute counters, on a clock the test moves. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "region/bucket.h"
#include "region/region.h"

#define MS UINT64_C(1000000)
#define S (1000 * MS)

Test(bucket, span_is_cost_over_share) {
  cr_assert_eq(tsr_bucket_span(1 * MS, 500000), 2 * MS);
  cr_assert_eq(tsr_bucket_span(3 * MS, 300000), 10 * MS);
  cr_assert_eq(tsr_bucket_span(1 * MS, 1000000), 1 * MS);
  cr_assert_eq(tsr_bucket_span(1 * MS, 0), 1 * MS, "0 reads as the whole device");
  cr_assert_eq(tsr_bucket_span(1 * MS, 2000000), 1 * MS, "above 100%% reads as 100%%");
}

Test(bucket, span_never_overflows) {
  cr_assert_eq(tsr_bucket_span(UINT64_MAX, 1), TSR_BUCKET_SPAN_MAX);
  cr_assert_eq(tsr_bucket_span(UINT64_MAX, 1000000), TSR_BUCKET_SPAN_MAX);
  cr_assert_eq(tsr_bucket_span(TSR_BUCKET_SPAN_MAX, 999999), TSR_BUCKET_SPAN_MAX);
}

Test(bucket, admits_at_the_share_rate) {
  tsr_atomic_u64 tat = 0;
  uint64_t now = 10 * S, admitted = 0;
  /* a launcher that asks every 10 us for 1 ms kernels at 25%: 250 per second */
  for (uint64_t t = now; t < now + 4 * S; t += 10000)
    if (tsr_bucket_take(&tat, t, tsr_bucket_span(MS, 250000), 0) == 0) admitted++;
  cr_assert(admitted >= 999 && admitted <= 1001, "admitted %lu in 4 s at 25%% of 1 ms kernels", admitted);
}

Test(bucket, refusal_says_how_long_and_changes_nothing) {
  tsr_atomic_u64 tat = 0;
  uint64_t now = 5 * S;
  cr_assert_eq(tsr_bucket_take(&tat, now, 4 * MS, 0), 0);
  uint64_t before = tat;
  cr_assert_eq(tsr_bucket_take(&tat, now + MS, 4 * MS, 0), 3 * MS);
  cr_assert_eq(tat, before, "a refusal moves nothing");
  cr_assert_eq(tsr_bucket_take(&tat, now + 4 * MS, 4 * MS, 0), 0, "admitted once paid off");
}

Test(bucket, idle_time_earns_at_most_the_burst) {
  tsr_atomic_u64 tat = 0;
  uint64_t now = 100 * S;
  int admitted = 0;
  /* after a long idle, 50 ms of burst at 50% with 1 ms kernels (2 ms span):
   * 25 launches on credit, plus the one that may start at once */
  while (tsr_bucket_take(&tat, now, 2 * MS, 50 * MS) == 0 && admitted < 1000) admitted++;
  cr_assert(admitted >= 25 && admitted <= 26, "burst admitted %d", admitted);
}

Test(bucket, a_time_no_take_wrote_is_reset) {
  tsr_atomic_u64 tat = UINT64_MAX - 5; /* a damaged region, or a clock from before a reboot */
  uint64_t now = 7 * S;
  cr_assert_eq(tsr_bucket_take(&tat, now, MS, 0), 0, "admitted, not blocked for ever");
  cr_assert_eq(tat, now + MS);
}

Test(bucket, adjust_owes_and_gives_back_within_bounds) {
  tsr_atomic_u64 tat = 0;
  uint64_t now = 9 * S;
  tsr_bucket_take(&tat, now, MS, 0);
  tsr_bucket_adjust(&tat, now, 5 * MS);
  cr_assert_eq(tat, now + 6 * MS);
  tsr_bucket_adjust(&tat, now, -(int64_t)(2 * MS));
  cr_assert_eq(tat, now + 4 * MS);
  tsr_bucket_adjust(&tat, now, INT64_MIN);
  cr_assert_eq(tat, 0, "a credit never goes below 0");
  tsr_bucket_adjust(&tat, now, INT64_MAX);
  cr_assert_eq(tat, now + TSR_BUCKET_SPAN_MAX, "a debt is bounded by one span");
  tsr_atomic_u64 top = UINT64_MAX - 1;
  tsr_bucket_adjust(&top, now, INT64_MAX);
  cr_assert(top <= now + TSR_BUCKET_SPAN_MAX, "a damaged value is not made worse");
}

Test(bucket, one_instant_admits_one_launch) {
  /* a hundred callers at the same instant: only what the rate allows */
  tsr_atomic_u64 tat = 0;
  uint64_t now = 3 * S;
  int admitted = 0;
  for (int i = 0; i < 100; i++)
    if (!tsr_bucket_take(&tat, now, MS, 0)) admitted++;
  cr_assert_eq(admitted, 1);
}

static tsr_region_t *make_region(char *dir, uint32_t sm_ppm, uint64_t burst) {
  cr_assert_not_null(mkdtemp(dir));
  int fd = open(dir, O_DIRECTORY | O_RDONLY);
  tsr_region_params_t p = {.lease_id = 7,
                           .device = 0,
                           .device_uuid = "",
                           .limit_bytes = 1 << 30,
                           .owner_uid = (uint32_t)getuid(),
                           .generation = 1,
                           .sm_ppm = sm_ppm,
                           .burst_ns = burst};
  tsr_region_t *r = NULL;
  cr_assert_null(tsr_region_create(fd, &p));
  cr_assert_null(tsr_region_open(fd, "lease-7.region", 7, &r));
  close(fd);
  return r;
}

Test(region_compute, settings_round_trip_and_defaults) {
  char dir[] = "/tmp/tsr-bucket-XXXXXX";
  tsr_region_t *r = make_region(dir, 300000, 0);
  tsr_region_compute_t c;
  tsr_region_compute(r, &c);
  cr_assert_eq(c.sm_ppm, 300000);
  cr_assert_eq(c.stream_ppm, 1000000, "0 stream share reads as the whole lease share");
  cr_assert_eq(c.burst_ns, TSR_REGION_BURST_DEFAULT_NS);
  char path[128];
  snprintf(path, sizeof(path), "%s/lease-7.region", dir);
  tsr_region_t *again = NULL;
  cr_assert_null(tsr_region_open(AT_FDCWD, path, 7, &again));
  tsr_region_compute(again, &c);
  cr_assert_eq(c.sm_ppm, 300000);
  /* the region's bucket is shared by every mapping */
  /* 100 ms spans, 50 ms of burst: the first ends 50 ms ahead */
  cr_assert_eq(tsr_region_take(r, 10 * S, 100 * MS), 0);
  cr_assert_eq(tsr_region_take(again, 10 * S + MS, 100 * MS), 49 * MS);
  tsr_region_close(again);
  tsr_region_close(r);
  unlink(path);
  rmdir(dir);
}

Test(region_compute, out_of_range_settings_refused_at_create) {
  char dir[] = "/tmp/tsr-bucket-XXXXXX";
  cr_assert_not_null(mkdtemp(dir));
  int fd = open(dir, O_DIRECTORY | O_RDONLY);
  tsr_region_params_t p = {.lease_id = 8, .limit_bytes = 1, .owner_uid = (uint32_t)getuid(), .sm_ppm = 1000001};
  tsr_status_t st = tsr_region_create(fd, &p);
  cr_assert_not_null(st);
  cr_assert_eq(tsr_status_code(st), TSR_INVALID_ARGUMENT);
  tsr_status_free(st);
  close(fd);
  rmdir(dir);
}

Test(region_compute, counters_count_and_saturate) {
  char dir[] = "/tmp/tsr-bucket-XXXXXX";
  tsr_region_t *r = make_region(dir, 500000, 0);
  tsr_region_note_launches(r, 1, 1000, 50, 0);
  tsr_region_note_launches(r, 1, 2000, 0, 0);
  tsr_region_note_launches(r, 0, 0, 0, 1);
  tsr_region_stats_t s;
  tsr_region_stats(r, &s);
  cr_assert_eq(s.sm_ppm, 500000);
  cr_assert_eq(s.launches, 2);
  cr_assert_eq(s.gpu_ns, 3000);
  cr_assert_eq(s.throttled_ns, 50);
  cr_assert_eq(s.bypassed, 1);
  tsr_region_note_launches(r, 1, UINT64_MAX, UINT64_MAX, 0);
  tsr_region_note_launches(r, 1, UINT64_MAX, 5, 0);
  tsr_region_stats(r, &s);
  cr_assert_eq(s.gpu_ns, UINT64_MAX, "saturates, never wraps");
  cr_assert_eq(s.throttled_ns, UINT64_MAX);
  cr_assert_eq(s.launches, 4);
  char path[128];
  snprintf(path, sizeof(path), "%s/lease-7.region", dir);
  tsr_region_close(r);
  unlink(path);
  rmdir(dir);
}
