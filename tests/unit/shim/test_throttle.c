/* Compute shares on a simulated GPU and a fake clock: the token bucket
 * (region/bucket.h), the cost model (shim/cost.h) and the waiting
 * (shim/throttle.h) together, as launch.c puts them together.
 *
 * The simulated GPU is one serial engine (as the GPU is between processes:
 * it time-slices them). A launcher asks the cost model what a launch costs,
 * waits for the bucket, queues the kernel, keeps at most 8 in flight (as a
 * loop that synchronises every 8 launches does) and, for sampled launches,
 * teaches the model the kernel's duration once it has completed. The share
 * measured is the GPU time of its kernels in a window over the window. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "region/bucket.h"
#include "shim/cost.h"
#include "shim/throttle.h"

#define US UINT64_C(1000)
#define MS (1000 * US)
#define S (1000 * MS)

static uint64_t fake_now;
static uint64_t clock_now(void *ctx) {
  (void)ctx;
  return fake_now;
}
static void clock_pause(void *ctx, uint64_t ns) {
  (void)ctx;
  fake_now += ns ? ns : 1;
}
static const tsr_shim_clock_t fake_clock = {clock_now, clock_pause, NULL};

#define DIRS 64 /* regions one test may make */
static char dirs[DIRS][32];
static int ndirs;
/* each region made, with its directory (the daemon writes through it) */
static struct {
  tsr_region_t *r;
  int dir_fd;
  uint64_t id;
} made[DIRS];

static void write_share_now(tsr_region_t *r, uint32_t ppm) {
  /* the newest first: a closed region's pointer may be handed out again */
  for (int i = ndirs - 1; i >= 0; i--)
    if (made[i].r == r) {
      cr_assert_null(tsr_region_write_share_now(made[i].dir_fd, made[i].id, ppm));
      return;
    }
  cr_assert_fail("not a region of this test");
}

static tsr_region_t *region(uint64_t id, uint32_t sm_ppm) {
  cr_assert_lt(ndirs, DIRS);
  char *dir = dirs[ndirs++];
  snprintf(dir, 32, "/tmp/tsr-thr-XXXXXX");
  cr_assert_not_null(mkdtemp(dir));
  int fd = open(dir, O_DIRECTORY | O_RDONLY);
  tsr_region_params_t p = {
      .lease_id = id, .limit_bytes = 1 << 20, .owner_uid = (uint32_t)getuid(), .generation = 1, .sm_ppm = sm_ppm};
  tsr_region_t *r = NULL;
  cr_assert_null(tsr_region_create(fd, &p));
  char name[64];
  tsr_region_file_name(id, name, sizeof(name));
  cr_assert_null(tsr_region_open(fd, name, id, &r));
  made[ndirs - 1].r = r;
  made[ndirs - 1].dir_fd = fd;
  made[ndirs - 1].id = id;
  return r;
}

static void cleanup(void) {
  for (int i = 0; i < ndirs; i++) {
    char cmd[160];
    snprintf(cmd, sizeof(cmd), "rm -rf %.31s", dirs[i]);
    close(made[i].dir_fd);
    cr_assert_eq(system(cmd), 0);
  }
  ndirs = 0;
  tsr_shim_clock = &fake_clock;
}
static void setup(void) {
  fake_now = 1000 * S;
  tsr_shim_clock = &fake_clock;
}
TestSuite(throttle, .init = setup, .fini = cleanup);

/* ---- the simulated GPU ---- */

typedef struct {
  uint64_t start, end;
  int owner;
  tsr_cost_entry_t *sample; /* teach this entry when it completes */
} job_t;

#define JOBS (1 << 20)
static job_t jobs[JOBS];
static size_t njobs;
static uint64_t gpu_free;

static size_t gpu_run(uint64_t at, uint64_t dur, int owner, tsr_cost_entry_t *sample) {
  cr_assert_lt(njobs, JOBS);
  uint64_t start = at > gpu_free ? at : gpu_free;
  jobs[njobs] = (job_t){start, start + dur, owner, sample};
  gpu_free = start + dur;
  return njobs++;
}

/* GPU time of `owner`'s kernels inside [a, b) over b - a */
static double share_of(int owner, uint64_t a, uint64_t b) {
  uint64_t busy = 0;
  for (size_t i = 0; i < njobs; i++) {
    if (jobs[i].owner != owner) continue;
    uint64_t s = jobs[i].start > a ? jobs[i].start : a, e = jobs[i].end < b ? jobs[i].end : b;
    if (e > s) busy += e - s;
  }
  return (double)busy / (double)(b - a);
}

typedef struct {
  tsr_region_t *r;
  tsr_region_compute_t c;
  tsr_cost_table_t *costs;
  size_t inflight[8];
  size_t n, learned;
  uint64_t longest_wait;
} launcher_t;

/* What completed by `now` teaches the model (sampled jobs only). */
static void teach(launcher_t *l, int owner, uint64_t now, size_t *cursor, double inflate_every) {
  for (; *cursor < njobs && jobs[*cursor].end <= now; (*cursor)++) {
    job_t *j = &jobs[*cursor];
    if (j->owner != owner || !j->sample) continue;
    uint64_t d = j->end - j->start;
    /* another tenant's slice inside a measurement lengthens it */
    if (inflate_every > 0 && (l->learned++ % (size_t)inflate_every) == 0) d = d * 2;
    tsr_shim_throttle_settle(l->r, tsr_cost_learn(l->costs, j->sample, d));
  }
}

/* One launcher alone, blocking waits on the fake clock: kernels `durs`
 * in turn (different functions), for `secs`. Returns the share measured
 * over the last secs - 2 seconds. */
static double run_alone(uint32_t ppm, const uint64_t *durs, int ndur, uint64_t secs, double inflate_every,
                        uint64_t *out_longest) {
  static tsr_cost_table_t costs;
  tsr_cost_init(&costs);
  njobs = 0;
  gpu_free = 0;
  launcher_t l = {.r = region(1, ppm), .costs = &costs};
  tsr_region_compute(l.r, &l.c);
  uint64_t t0 = fake_now, cursor = 0;
  size_t k = 0;
  while (fake_now < t0 + secs * S) {
    /* at most 8 in flight: wait for the oldest, as a sync every 8 would */
    size_t slot = l.n % 8;
    if (l.n >= 8 && jobs[l.inflight[slot]].end > fake_now) fake_now = jobs[l.inflight[slot]].end;
    teach(&l, 0, fake_now, &cursor, inflate_every);
    int which = (int)(k++ % (size_t)ndur);
    tsr_cost_entry_t *e = tsr_cost_get(&costs, (uint64_t)which + 1, tsr_cost_shape(132, 256, 0), NULL, NULL, 0);
    bool sample;
    uint64_t cost = tsr_cost_charge(e, &sample);
    uint64_t waited = tsr_shim_throttle(l.r, &l.c, NULL, cost, NULL);
    if (waited > l.longest_wait && fake_now > t0 + 2 * S) l.longest_wait = waited;
    fake_now += 3 * US; /* the launch call itself */
    l.inflight[slot] = gpu_run(fake_now, durs[which], 0, sample ? e : NULL);
    l.n++;
  }
  if (out_longest) *out_longest = l.longest_wait;
  tsr_region_close(l.r);
  return share_of(0, t0 + 2 * S, t0 + secs * S);
}

Test(throttle, converges_to_the_share_for_kernels_of_any_length) {
  const uint64_t lengths[][2] = {{20 * US, 20 * US}, {1 * MS, 1 * MS}, {7 * MS, 7 * MS}, {50 * US, 3 * MS}};
  const uint32_t shares[] = {100000, 300000, 500000, 700000, 900000};
  for (size_t i = 0; i < sizeof(lengths) / sizeof(lengths[0]); i++)
    for (size_t j = 0; j < sizeof(shares) / sizeof(shares[0]); j++) {
      double got = run_alone(shares[j], lengths[i], 2, 12, 0, NULL);
      double want = shares[j] / 1e6;
      cr_expect(fabs(got - want) <= 0.01, "kernels of %lu and %lu ns at %.0f%%: measured %.2f%%", lengths[i][0],
                lengths[i][1], want * 100, got * 100);
    }
}

Test(throttle, contention_in_measurements_does_not_lower_the_share) {
  /* every third measurement doubled by another tenant's slice */
  const uint64_t d[1] = {1 * MS};
  double got = run_alone(300000, d, 1, 12, 3, NULL);
  cr_expect(fabs(got - 0.30) <= 0.01, "measured %.2f%%", got * 100);
}

Test(throttle, no_launch_waits_much_longer_than_its_span) {
  const uint64_t d[1] = {1 * MS};
  uint64_t longest = 0;
  run_alone(300000, d, 1, 6, 0, &longest);
  /* a 1 ms kernel at 30% spans 3.33 ms; a refused launch waits a 10 ms
   * quantum longer, never past 20 ms */
  cr_expect(longest >= 9 * MS && longest <= 16 * MS, "longest wait %lu ns", longest);
}

/* Two leases on one GPU, each keeping 8 kernels in flight, for 12 s; the
 * GPU loses `switch_ns` whenever it turns from one lease's kernel to the
 * other's (time-slicing between contexts). `now_ppm` is the share in force
 * that the daemon writes (0: the lease's own). Shares measured over the
 * last 10 s into out[]. */
static void run_pair(const uint32_t ppm[2], const uint32_t now_ppm[2], uint64_t switch_ns, double out[2]) {
  static tsr_cost_table_t ca, cb;
  tsr_cost_init(&ca);
  tsr_cost_init(&cb);
  njobs = 0;
  gpu_free = 0;
  launcher_t l[2] = {{.r = region(1, ppm[0]), .costs = &ca}, {.r = region(2, ppm[1]), .costs = &cb}};
  uint64_t next[2], t0 = fake_now;
  size_t cursor[2] = {0, 0};
  const uint64_t dur[2] = {1 * MS, 2 * MS}; /* and of different lengths */
  for (int i = 0; i < 2; i++) {
    tsr_region_compute(l[i].r, &l[i].c);
    write_share_now(l[i].r, now_ppm[i]);
    next[i] = t0;
  }
  while (fake_now < t0 + 12 * S) {
    int i = next[0] <= next[1] ? 0 : 1;
    fake_now = next[i];
    launcher_t *x = &l[i];
    size_t slot = x->n % 8;
    if (x->n >= 8 && jobs[x->inflight[slot]].end > fake_now) {
      next[i] = jobs[x->inflight[slot]].end;
      continue;
    }
    teach(x, i, fake_now, &cursor[i], 0);
    tsr_cost_entry_t *e = tsr_cost_get(x->costs, 1, tsr_cost_shape(132, 256, 0), NULL, NULL, 0);
    bool sample;
    uint64_t cost = tsr_cost_peek(e);
    uint64_t wait = tsr_region_take(x->r, fake_now, tsr_bucket_span(cost, tsr_region_share_now(x->r)));
    if (wait) {
      next[i] = fake_now + wait;
      continue;
    }
    tsr_cost_charge(e, &sample);
    uint64_t at = fake_now + 3 * US;
    if (njobs && jobs[njobs - 1].owner != i && gpu_free + switch_ns > at) at = gpu_free + switch_ns;
    x->inflight[slot] = gpu_run(at, dur[i], i, sample ? e : NULL);
    x->n++;
    next[i] = fake_now + 3 * US;
  }
  out[0] = share_of(0, t0 + 2 * S, t0 + 12 * S);
  out[1] = share_of(1, t0 + 2 * S, t0 + 12 * S);
  tsr_region_close(l[0].r);
  tsr_region_close(l[1].r);
}

Test(throttle, two_leases_split_the_gpu_by_their_shares) {
  const uint32_t ppm[2] = {300000, 700000}, own[2] = {0, 0};
  double got[2];
  run_pair(ppm, own, 0, got);
  cr_expect(fabs(got[0] - 0.30) <= 0.02 && fabs(got[1] - 0.70) <= 0.02, "30%%/70%% leases measured %.1f%%/%.1f%%",
            got[0] * 100, got[1] * 100);
}

Test(throttle, the_switching_reserve_shares_the_loss_in_proportion) {
  /* a GPU that loses 100 us at every turn between the leases (6% in all,
   * as the H100 lost to a 30/70 pair, bench/results/throttle-*.md): with their
   * own shares the 30% lease still gets 30% and the 70% lease, bound by
   * the GPU, takes the whole loss */
  const uint32_t ppm[2] = {300000, 700000}, own[2] = {0, 0};
  double got[2];
  run_pair(ppm, own, 100 * US, got);
  double lost = 1 - got[0] - got[1];
  cr_assert(lost > 0.04, "the model loses %.1f%% to switching", lost * 100);
  cr_expect(fabs(got[0] - 0.30) <= 0.01 && got[1] < 0.70 - lost + 0.01, "own shares: %.1f%%/%.1f%%", got[0] * 100,
            got[1] * 100);
  /* with the daemon's reserve in force (the shares scaled to 94% of the
   * device together) the two keep their 30:70 ratio */
  const uint32_t scaled[2] = {282000, 658000};
  run_pair(ppm, scaled, 100 * US, got);
  cr_expect(fabs(got[0] - 0.282) <= 0.01 && fabs(got[1] - 0.658) <= 0.015, "scaled shares: %.1f%%/%.1f%%", got[0] * 100,
            got[1] * 100);
  cr_expect(fabs(got[0] / (got[0] + got[1]) - 0.30) <= 0.01, "ratio %.3f", got[0] / (got[0] + got[1]));
}

Test(throttle, a_stream_bucket_holds_one_stream_to_its_part) {
  tsr_region_t *r = region(3, 600000);
  tsr_region_compute_t c;
  tsr_region_compute(r, &c);
  c.stream_ppm = 500000; /* one stream may take half the lease's 60% */
  tsr_atomic_u64 stream = 0;
  uint64_t t0 = fake_now;
  int n = 0;
  while (fake_now < t0 + 10 * S) {
    tsr_shim_throttle(r, &c, &stream, 1 * MS, NULL);
    n++;
    fake_now += US;
  }
  /* 30% of 10 s in 1 ms kernels: 3000, plus the bursts */
  cr_expect(n >= 2990 && n <= 3060, "%d launches", n);
  tsr_region_close(r);
}
