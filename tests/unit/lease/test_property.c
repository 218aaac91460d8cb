/* Property test: thousands of random create / release / renew / resize / expire / restart
 * operations through the lease service (the code the daemon runs), checked
 * after every step against the seed's invariants I1-I4 and safety
 * properties S1-S2, and against a reference model of the rules written here
 * independently of src/lease. */
#include <criterion/criterion.h>
#include <dirent.h>

#include "base/units.h"
#include "lease/lease.h"
#include "test_helpers.h"

#define NDEV 3
#define MAXL 512

typedef struct {
  uint64_t id;
  uint32_t dev, ppm, sm, owner;
  uint64_t bytes, deadline_wall;
} model_lease_t;

static const uint64_t totals[NDEV] = {UINT64_C(85520809984), UINT64_C(42949672960), 1000003};
static const tsr_lease_actor_t actors[] = {
    {1000, "alice", false, 100},
    {1001, "bob", false, 101},
    {1002, "carol", false, 102},
    {0, "root", true, 1},
};
static const char *const names[] = {"alice", "bob", "carol"};
static const uint32_t fracs[] = {100000, 250000, 250400, 333333, 500000, 1000000, 1, 0, 1000001, 50000};
static const uint32_t sms[] = {0, 0, 0, 100000, 300000, 500000, 1000001};

static model_lease_t model[MAXL];
static int nmodel;
static uint64_t rng = 0x243F6A8885A308D3u;
static uint64_t rnd(uint64_t n) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng % n;
}

static tsr_status_code_t model_create(const tsr_lease_actor_t *a, const tsr_lease_request_t *r) {
  if (r->device >= NDEV) return TSR_NOT_FOUND;
  if (r->fraction_ppm == 0 || r->fraction_ppm > 1000000) return TSR_INVALID_ARGUMENT;
  if (r->sm_ppm > 1000000) return TSR_INVALID_ARGUMENT;
  if (r->duration_ns == 0) return TSR_INVALID_ARGUMENT;
  uint32_t owner = a->uid;
  if (r->has_target && r->target_uid != a->uid) {
    if (!a->admin) return TSR_PERMISSION_DENIED;
    owner = r->target_uid;
  }
  uint32_t key = (r->fraction_ppm + 500) / 1000;
  unsigned __int128 used = 0;
  uint64_t sm_used = 0;
  for (int i = 0; i < nmodel; i++) {
    if (model[i].dev != r->device) continue;
    if ((model[i].ppm + 500) / 1000 == key && model[i].owner != owner) return TSR_CONFLICT;
  }
  for (int i = 0; i < nmodel; i++)
    if (model[i].dev == r->device) used += model[i].bytes, sm_used += model[i].sm;
  uint64_t bytes = (uint64_t)((unsigned __int128)totals[r->device] * r->fraction_ppm / 1000000);
  if (used + bytes > totals[r->device]) return TSR_RESOURCE_EXHAUSTED;
  if (sm_used + r->sm_ppm > 1000000) return TSR_RESOURCE_EXHAUSTED;
  return TSR_OK;
}

/* The model's index of lease `id`, or -1. */
static int model_find(uint64_t id) {
  for (int j = 0; j < nmodel; j++)
    if (model[j].id == id) return j;
  return -1;
}

static int count_lock_files(const char *dir) {
  DIR *d = opendir(dir);
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    size_t len = strlen(e->d_name);
    if (len > 5 && strcmp(e->d_name + len - 5, ".lock") == 0) n++;
  }
  closedir(d);
  return n;
}

static void check_invariants(const tsr_lease_service_t *svc, const char *dir, tsr_lease_now_t now, int step) {
  const tsr_lease_table_t *t = tsr_lease_service_table(svc);
  cr_assert_eq((int)tsr_lease_table_count(t), nmodel, "step %d: table has %zu leases, model %d", step,
               tsr_lease_table_count(t), nmodel);
  for (uint32_t d = 0; d < NDEV; d++) {
    /* I1: available + sum of leases' bytes = total */
    uint64_t sum = 0;
    for (size_t i = 0; i < tsr_lease_table_count(t); i++)
      if (tsr_lease_table_at(t, i)->device == d) sum += tsr_lease_table_at(t, i)->bytes;
    cr_assert_eq(tsr_lease_table_available_bytes(t, d) + sum, totals[d], "step %d: I1 on %u", step, d);
  }
  for (size_t i = 0; i < tsr_lease_table_count(t); i++) {
    const tsr_lease_t *l = tsr_lease_table_at(t, i);
    /* the model agrees */
    int m = model_find(l->id);
    cr_assert_geq(m, 0, "step %d: lease %llu not in model", step, (unsigned long long)l->id);
    cr_assert_eq(l->owner_uid, model[m].owner);
    cr_assert_eq(l->bytes, model[m].bytes);
    cr_assert_eq(l->deadline_wall_ns, model[m].deadline_wall);
    /* I2 and I3: the lock file exists and names the owner */
    char name[128], path[512], buf[4100];
    tsr_lease_lockfile_name(l, name, sizeof name);
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "step %d: I2: no lock file %s", step, name);
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    tsr_lease_t back;
    tsr_status_t st = tsr_lease_lockfile_parse(buf, n, &back);
    cr_assert_null(st, "step %d: %s", step, tsr_status_message(st));
    cr_assert_eq(back.owner_uid, l->owner_uid, "step %d: I3", step);
    cr_assert_str_eq(back.owner, l->owner, "step %d: I3", step);
    /* I4: nothing active past its deadline once expiry has run */
    cr_assert_gt(l->deadline_mono_ns, now.mono_ns, "step %d: I4: lease %llu overdue", step, (unsigned long long)l->id);
    /* S1: no two owners on one (device, fraction) */
    for (size_t j = i + 1; j < tsr_lease_table_count(t); j++) {
      const tsr_lease_t *o = tsr_lease_table_at(t, j);
      cr_assert(
          !(o->device == l->device && tsr_lease_lock_key(o->fraction_ppm) == tsr_lease_lock_key(l->fraction_ppm) &&
            o->owner_uid != l->owner_uid),
          "step %d: S1 broken by %llu and %llu", step, (unsigned long long)l->id, (unsigned long long)o->id);
    }
  }
  /* no stray lock files either */
  cr_assert_eq(count_lock_files(dir), nmodel, "step %d: lock files vs leases", step);
}

static void expired_cb(void *ctx, const tsr_lease_t *l) {
  tsr_lease_now_t *now = ctx;
  cr_assert_eq(l->state, TSR_LEASE_EXPIRED);
  cr_assert_leq(l->deadline_mono_ns, now->mono_ns);
  int m = model_find(l->id);
  cr_assert_geq(m, 0);
  model[m] = model[--nmodel];
}

Test(lease_property, random_operations_keep_every_invariant, .timeout = 120) {
  char *dir = tsr_test_mkdtemp();
  tsr_device_t devs[NDEV];
  memset(devs, 0, sizeof devs);
  for (int i = 0; i < NDEV; i++) {
    devs[i].index = (uint32_t)i;
    snprintf(devs[i].name, sizeof devs[i].name, "GPU%d", i);
    devs[i].total_bytes = totals[i];
  }
  tsr_lease_service_config_t cfg = {.state_dir = dir, .sync = TSR_LEASE_SYNC_NONE, .host = "node"};
  tsr_lease_now_t now = {UINT64_C(5000000000), UINT64_C(1763805600000000000)};
  tsr_lease_service_t *svc;
  cr_assert_null(tsr_lease_service_open(&cfg, devs, NDEV, now, &svc, NULL));
  uint64_t last_id = 0;
  int counts[6] = {0}, ok_creates = 0, ok_releases = 0, ok_renews = 0, ok_resizes = 0, denied = 0, restarts = 0,
      expired = 0;
  const int steps = 6000;
  for (int step = 0; step < steps; step++) {
    int op = (int)rnd(100);
    if (op < 50) { /* create */
      counts[0]++;
      const tsr_lease_actor_t *a = &actors[rnd(4)];
      tsr_lease_request_t r = {0};
      r.device = (uint32_t)rnd(NDEV + 1 - (rnd(10) != 0)); /* sometimes a bad device */
      r.fraction_ppm = fracs[rnd(sizeof fracs / sizeof fracs[0])];
      r.sm_ppm = sms[rnd(sizeof sms / sizeof sms[0])];
      r.duration_ns = rnd(20) == 0 ? 0 : (1 + rnd(200)) * UINT64_C(1000000);
      if (rnd(4) == 0) {
        r.has_target = true;
        int u = (int)rnd(3);
        r.target_uid = 1000 + (uint32_t)u;
        r.target_name = names[u];
      }
      tsr_status_code_t want = model_create(a, &r);
      tsr_lease_t l;
      tsr_status_t st = tsr_lease_service_create(svc, &r, a, now, &l);
      cr_assert_eq(tsr_status_code(st), want, "step %d: create got %s want %s (%s)", step,
                   tsr_status_code_name(tsr_status_code(st)), tsr_status_code_name(want), tsr_status_message(st));
      tsr_status_free(st);
      if (want == TSR_OK) {
        cr_assert_gt(l.id, last_id, "step %d: id %llu repeats or goes back", step, (unsigned long long)l.id);
        last_id = l.id;
        cr_assert_lt(nmodel, MAXL);
        model[nmodel++] =
            (model_lease_t){l.id, l.device, l.fraction_ppm, l.sm_ppm, l.owner_uid, l.bytes, l.deadline_wall_ns};
        ok_creates++;
      }
    } else if (op < 68) { /* release */
      counts[1]++;
      const tsr_lease_actor_t *a = &actors[rnd(4)];
      uint64_t id = (nmodel && rnd(5)) ? model[rnd((uint64_t)nmodel)].id : 1 + rnd(last_id + 3);
      int m = model_find(id);
      tsr_status_code_t want = m < 0                                     ? TSR_NOT_FOUND
                               : (model[m].owner != a->uid && !a->admin) ? TSR_PERMISSION_DENIED
                                                                         : TSR_OK;
      tsr_lease_t out;
      tsr_status_t st = tsr_lease_service_release(svc, id, a, now, &out);
      cr_assert_eq(tsr_status_code(st), want, "step %d: release got %s want %s", step,
                   tsr_status_code_name(tsr_status_code(st)), tsr_status_code_name(want));
      tsr_status_free(st);
      if (want == TSR_OK) {
        /* S2: success only for the owner or an admin */
        cr_assert(out.owner_uid == a->uid || a->admin, "step %d: S2", step);
        model[m] = model[--nmodel];
        ok_releases++;
      } else if (want == TSR_PERMISSION_DENIED) {
        denied++;
      }
    } else if (op < 74) { /* resize: memory, SM share or both, checked by the model's create rules */
      counts[5]++;
      const tsr_lease_actor_t *a = &actors[rnd(4)];
      uint64_t id = (nmodel && rnd(5)) ? model[rnd((uint64_t)nmodel)].id : 1 + rnd(last_id + 3);
      uint32_t ppm = rnd(3) ? fracs[rnd(sizeof fracs / sizeof fracs[0])] : 0; /* 0: kept */
      uint32_t sm = rnd(3) ? sms[rnd(sizeof sms / sizeof sms[0])] : TSR_LEASE_SM_UNCHANGED;
      int m = model_find(id);
      tsr_status_code_t want = m < 0                                     ? TSR_NOT_FOUND
                               : (model[m].owner != a->uid && !a->admin) ? TSR_PERMISSION_DENIED
                                                                         : TSR_OK;
      model_lease_t was = m >= 0 ? model[m] : (model_lease_t){0};
      if (want == TSR_OK) { /* the model's create, with the lease taken out of the model */
        model[m] = model[--nmodel];
        tsr_lease_request_t r = {.device = was.dev,
                                 .fraction_ppm = ppm ? ppm : was.ppm,
                                 .sm_ppm = sm == TSR_LEASE_SM_UNCHANGED ? was.sm : sm,
                                 .duration_ns = 1};
        const tsr_lease_actor_t owner = {was.owner, was.owner >= 1000 ? names[was.owner - 1000] : "root", false, 1};
        want = model_create(&owner, &r);
        model[nmodel++] = was;
      }
      tsr_lease_t out;
      tsr_status_t st = tsr_lease_service_resize(svc, id, a, ppm, sm, &out);
      cr_assert_eq(tsr_status_code(st), want, "step %d: resize got %s want %s (%s)", step,
                   tsr_status_code_name(tsr_status_code(st)), tsr_status_code_name(want), tsr_status_message(st));
      tsr_status_free(st);
      if (want == TSR_OK) {
        int j = model_find(id);
        cr_assert_geq(j, 0);
        model[j].ppm = out.fraction_ppm;
        model[j].sm = out.sm_ppm;
        model[j].bytes = out.bytes;
        cr_assert_eq(out.bytes, (uint64_t)((unsigned __int128)totals[was.dev] * out.fraction_ppm / 1000000));
        ok_resizes++;
      } else if (want == TSR_PERMISSION_DENIED) {
        denied++;
      }
    } else if (op < 82) { /* renew: later or earlier, sometimes not in the future */
      counts[4]++;
      const tsr_lease_actor_t *a = &actors[rnd(4)];
      uint64_t id = (nmodel && rnd(5)) ? model[rnd((uint64_t)nmodel)].id : 1 + rnd(last_id + 3);
      uint64_t deadline = now.wall_ns - UINT64_C(1000000) + rnd(300) * UINT64_C(1000000);
      int m = model_find(id);
      tsr_status_code_t want = m < 0                                     ? TSR_NOT_FOUND
                               : (model[m].owner != a->uid && !a->admin) ? TSR_PERMISSION_DENIED
                               : deadline <= now.wall_ns                 ? TSR_INVALID_ARGUMENT
                                                                         : TSR_OK;
      tsr_lease_t out;
      tsr_status_t st = tsr_lease_service_renew(svc, id, a, deadline, now, &out);
      cr_assert_eq(tsr_status_code(st), want, "step %d: renew got %s want %s (%s)", step,
                   tsr_status_code_name(tsr_status_code(st)), tsr_status_code_name(want), tsr_status_message(st));
      tsr_status_free(st);
      if (want == TSR_OK) {
        cr_assert(out.owner_uid == a->uid || a->admin, "step %d: S2 for renew", step);
        cr_assert_eq(out.deadline_wall_ns, deadline);
        model[m].deadline_wall = deadline;
        ok_renews++;
      } else if (want == TSR_PERMISSION_DENIED) {
        denied++;
      }
    } else if (op < 97) { /* time passes */
      counts[2]++;
      uint64_t dt = rnd(60) * UINT64_C(1000000);
      now.mono_ns += dt;
      now.wall_ns += dt;
    } else { /* the daemon is killed and restarts (on a new monotonic base) */
      counts[3]++;
      tsr_lease_service_close(svc);
      uint64_t jump = rnd(2) ? UINT64_C(1000000000000) : 0;
      now.mono_ns += jump;
      now.wall_ns += rnd(3) * UINT64_C(1000000);
      size_t q = 7;
      cr_assert_null(tsr_lease_service_open(&cfg, devs, NDEV, now, &svc, &q));
      cr_assert_eq(q, 0, "step %d: restart quarantined %zu files", step, q);
      restarts++;
    }
    /* the daemon's timer: everything due ends before the next request */
    expired += (int)tsr_lease_service_expire(svc, now, expired_cb, &now, NULL);
    check_invariants(svc, dir, now, step);
  }
  /* L1, L2: with time, every lease ends and every device is whole again */
  now.mono_ns += UINT64_C(1000000000);
  now.wall_ns += UINT64_C(1000000000);
  expired += (int)tsr_lease_service_expire(svc, now, expired_cb, &now, NULL);
  cr_assert_eq(nmodel, 0);
  for (uint32_t d = 0; d < NDEV; d++)
    cr_assert_eq(tsr_lease_table_available_bytes(tsr_lease_service_table(svc), d), totals[d]);
  cr_log_info(
      "%d steps: %d creates ok, %d releases ok, %d renews ok, %d resizes ok, %d denied, %d expired, %d restarts", steps,
      ok_creates, ok_releases, ok_renews, ok_resizes, denied, expired, restarts);
  /* the run exercised every path, or it proves little */
  cr_assert_gt(ok_creates, 300);
  cr_assert_gt(ok_releases, 100);
  cr_assert_gt(ok_renews, 100);
  cr_assert_gt(ok_resizes, 100);
  cr_assert_gt(denied, 50);
  cr_assert_gt(expired, 100);
  cr_assert_gt(restarts, 50);
  tsr_lease_service_close(svc);
  tsr_test_rmtree(dir);
}
