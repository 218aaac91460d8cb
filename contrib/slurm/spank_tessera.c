/* spank_tessera.c: Slurm's fence for shared GPUs. A SPANK plugin that gives
 * each job a tessera lease on the GPU it was allocated and puts its tasks
 * under it, as `tessera run` does (docs/slurm.md).
 *
 *   srun/sbatch/salloc --gpu-mem=SIZE|FRACTION [--gpu-sm=PERCENT]
 *
 * Where the job is submitted (srun, sbatch, salloc) the options are only
 * checked: a bad value rejects the job, naming the option. In slurmstepd
 * (as root) when a step starts, the plugin asks the node's tesserad for
 * the job's lease: the one labelled with the job id for the job's user on
 * that GPU if an earlier step made it, else a new one for the job's time
 * limit; the tasks get TESSERA_LEASE, TESSERA_REGION_DIR and LD_PRELOAD
 * (the shim). With --gres=shard:N and no --gpu-mem, the lease is N shards
 * of the GPU's. When the job ends (completes, fails, is cancelled or runs
 * out of time) slurmd's epilog releases its leases; if that never runs,
 * the lease's deadline (the job's end) still ends it.
 *
 * plugstack.conf arguments: socket=PATH (tesserad's socket), policy=
 * required|optional (no daemon, or a refusal: the step fails, or runs
 * ungoverned with a log line), shim=PATH (libtessera-cuda.so; default: the
 * one beside this plugin),
 * shards_per_gpu=N (default: from gres.conf beside slurm.conf). */
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <slurm/slurm.h>
#include <slurm/spank.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/json.h"
#include "base/units.h"
#include "proto/proto.h"
#include "tessera/lease.h"

SPANK_PLUGIN(tessera, 1);

#define TSR_SPANK_MAX_NS (30ull * 86400 * 1000000000ull) /* a job with no limit: the daemon's longest */

static struct {
  char mem[64], sm[64];
  bool have_mem, have_sm;
  uint32_t mem_ppm, sm_ppm;
  uint64_t mem_bytes;
  char socket[108];
  char shim[4096];
  bool optional;
  uint32_t shards_per_gpu; /* 0: from gres.conf */
} tsr__o = {.socket = TSR_PROTO_DEFAULT_SOCKET};

/* The shim's default: libtessera-cuda.so beside this plugin (both install
 * to PREFIX/lib/tessera, and sit together in a build's lib/). */
static void tsr__default_shim(void) {
  if (tsr__o.shim[0]) return;
  Dl_info info;
  if (dladdr((void *)tsr__default_shim, &info) && info.dli_fname) {
    snprintf(tsr__o.shim, sizeof(tsr__o.shim), "%s", info.dli_fname);
    char *slash = strrchr(tsr__o.shim, '/');
    if (slash) {
      snprintf(slash + 1, sizeof(tsr__o.shim) - (size_t)(slash + 1 - tsr__o.shim), "libtessera-cuda.so");
      return;
    }
  }
  snprintf(tsr__o.shim, sizeof(tsr__o.shim), "/usr/lib/tessera/libtessera-cuda.so");
}

/* ---- options: checked wherever they are given ------------------------------- */

static int tsr__opt_mem(int val, const char *arg, int remote) {
  (void)val, (void)remote;
  uint32_t ppm = 0;
  uint64_t bytes = 0;
  tsr_status_t st = arg ? tsr_parse_share_or_size(arg, &ppm, &bytes) : tsr_status_make(TSR_INVALID_ARGUMENT, "empty");
  if (!st && ppm == 0 && bytes == 0) st = tsr_status_make(TSR_INVALID_ARGUMENT, "it must be more than 0");
  if (st) {
    slurm_error("--gpu-mem=%s: %s (a size: 40GiB, 512MiB; or a fraction of the GPU: 25%%, 0.25)", arg ? arg : "",
                tsr_status_message(st));
    tsr_status_free(st);
    return -1;
  }
  snprintf(tsr__o.mem, sizeof(tsr__o.mem), "%s", arg);
  tsr__o.have_mem = true;
  tsr__o.mem_ppm = ppm;
  tsr__o.mem_bytes = bytes;
  return 0;
}

static int tsr__opt_sm(int val, const char *arg, int remote) {
  (void)val, (void)remote;
  uint32_t ppm = 0;
  tsr_status_t st = arg ? tsr_parse_share(arg, &ppm) : tsr_status_make(TSR_INVALID_ARGUMENT, "empty");
  if (!st && ppm == 0) st = tsr_status_make(TSR_INVALID_ARGUMENT, "it must be more than 0%%");
  if (st) {
    slurm_error("--gpu-sm=%s: %s (a share of the GPU's SMs: 30%% or 0.3)", arg ? arg : "", tsr_status_message(st));
    tsr_status_free(st);
    return -1;
  }
  snprintf(tsr__o.sm, sizeof(tsr__o.sm), "%s", arg);
  tsr__o.have_sm = true;
  tsr__o.sm_ppm = ppm;
  return 0;
}

static struct spank_option tsr__options[] = {
    {"gpu-mem", "SIZE|FRACTION", "GPU memory for the job (tessera): a size (40GiB) or a fraction of the GPU (25%, 0.25)",
     1, 0, tsr__opt_mem},
    {"gpu-sm", "PERCENT", "share of the GPU's SMs for the job (tessera): 30% or 0.3", 1, 0, tsr__opt_sm},
    SPANK_OPTIONS_TABLE_END};

/* plugstack.conf's arguments (each callback gets them: the epilog runs in
 * slurmd, where init is not called first). */
static int tsr__args(int ac, char **av) {
  for (int i = 0; i < ac; i++) {
    const char *a = av[i];
    if (strncmp(a, "socket=", 7) == 0 && strlen(a + 7) > 0 && strlen(a + 7) < sizeof(tsr__o.socket)) {
      snprintf(tsr__o.socket, sizeof(tsr__o.socket), "%s", a + 7);
    } else if (strcmp(a, "policy=required") == 0) {
      tsr__o.optional = false;
    } else if (strcmp(a, "policy=optional") == 0) {
      tsr__o.optional = true;
    } else if (strncmp(a, "shim=", 5) == 0 && strlen(a + 5) > 0 && strlen(a + 5) < sizeof(tsr__o.shim)) {
      snprintf(tsr__o.shim, sizeof(tsr__o.shim), "%s", a + 5);
    } else if (strncmp(a, "shards_per_gpu=", 15) == 0 && atoi(a + 15) > 0) {
      tsr__o.shards_per_gpu = (uint32_t)atoi(a + 15);
    } else {
      slurm_error("spank_tessera: plugstack.conf argument '%s' is not one of socket=PATH, "
                  "policy=required|optional, shim=PATH, shards_per_gpu=N",
                  a);
      return -1;
    }
  }
  return 0;
}

/* The options are registered here, not through a spank_options table:
 * the table reaches srun only, and sbatch and salloc must take them too. */
int slurm_spank_init(spank_t sp, int ac, char **av) {
  if (tsr__args(ac, av)) return -1;
  spank_context_t ctx = spank_context();
  if (ctx == S_CTX_LOCAL || ctx == S_CTX_ALLOCATOR || ctx == S_CTX_REMOTE)
    for (int i = 0; tsr__options[i].name; i++)
      if (spank_option_register(sp, &tsr__options[i]) != ESPANK_SUCCESS) {
        slurm_error("spank_tessera: cannot register --%s", tsr__options[i].name);
        return -1;
      }
  return 0;
}

/* ---- in slurmstepd: the job's lease -------------------------------------------- */

/* The shards each GPU has: the plugstack argument, else gres.conf beside
 * slurm.conf ("Name=shard ... Count=N" over the "Name=gpu" lines). */
static uint32_t tsr__shards_per_gpu(void) {
  if (tsr__o.shards_per_gpu) return tsr__o.shards_per_gpu;
  const char *conf = getenv("SLURM_CONF");
  char path[4096];
  snprintf(path, sizeof(path), "%s", conf && *conf ? conf : "/etc/slurm/slurm.conf");
  char *slash = strrchr(path, '/');
  if (!slash) return 0;
  snprintf(slash + 1, sizeof(path) - (size_t)(slash + 1 - path), "gres.conf");
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  char line[1024];
  uint32_t shards = 0, gpus = 0;
  while (fgets(line, sizeof(line), f)) {
    if (strstr(line, "Name=gpu")) gpus++;
    const char *c = strstr(line, "Count=");
    if (strstr(line, "Name=shard") && c) shards += (uint32_t)strtoul(c + 6, NULL, 10);
  }
  fclose(f);
  return shards && gpus ? shards / gpus : shards;
}

/* The job's time left in ns (its end time from slurmctld), or the longest
 * lease when it has no limit or slurmctld does not answer. */
static uint64_t tsr__job_left_ns(uint32_t job) {
  job_info_msg_t *msg = NULL;
  uint64_t left = TSR_SPANK_MAX_NS;
  if (slurm_load_job(&msg, job, SHOW_DETAIL) == 0 && msg && msg->record_count > 0) {
    slurm_job_info_t *j = &msg->job_array[0];
    time_t now = time(NULL);
    if (j->time_limit != INFINITE && j->end_time > now) left = (uint64_t)(j->end_time - now) * 1000000000ull;
  }
  if (msg) slurm_free_job_info_msg(msg);
  return left < TSR_SPANK_MAX_NS ? left : TSR_SPANK_MAX_NS;
}

/* Sends one request; on "ok" returns the reply line (in the client's
 * buffer), else NULL with the daemon's reason in `why`. */
static const char *tsr__call(tsr_proto_client_t *c, tsr_json_writer_t *w, size_t *len, char *why, size_t cap) {
  const char *reply = NULL;
  tsr_status_t st = tsr_proto_client_call_line(c, w->buf, w->len, &reply, len);
  if (!st) st = tsr_proto_reply_status(reply, *len, NULL, 0);
  if (st) {
    snprintf(why, cap, "%s", tsr_status_message(st));
    tsr_status_free(st);
    return NULL;
  }
  return reply;
}

/* Sends {"op": op} (with job: everyone's leases of that job) and finds the
 * reply's array `key`; it points into the client's buffer until the next
 * call. False with `why` set when the daemon refused. */
static bool tsr__call_array(tsr_proto_client_t *c, const char *op, const char *job, const char *key,
                            tsr_json_member_t *out, char *why, size_t cap) {
  tsr_json_writer_t w = {0};
  tsr_json_object_begin(&w);
  tsr_json_key_string(&w, "op", op);
  if (job) {
    tsr_json_key_bool(&w, "all", true);
    tsr_json_key_string(&w, "job", job);
  }
  tsr_json_object_end(&w);
  size_t len = 0;
  const char *reply = tsr__call(c, &w, &len, why, cap);
  tsr_json_writer_free(&w);
  if (!reply) return false;
  tsr_json_member_t m[8];
  size_t n = 0;
  tsr_json_error_t err;
  const tsr_json_member_t *a;
  if (!tsr_json_scan_object(reply, len, m, 8, &n, &err) || !(a = tsr_json_find(m, n, key)) ||
      a->type != TSR_JSON_ARRAY) {
    snprintf(why, cap, "tesserad's reply to %s did not read", op);
    return false;
  }
  *out = *a;
  return true;
}

/* The job's active lease for `uid` on `device` (id and region path), if any. */
static bool tsr__find(tsr_proto_client_t *c, const char *job, uint32_t uid, uint32_t device, uint64_t *id,
                      char *region, size_t rcap, char *why, size_t cap) {
  tsr_json_member_t leases_m, *leases = &leases_m;
  tsr_json_error_t err;
  if (!tsr__call_array(c, "lease.list", job, "leases", leases, why, cap)) return false;
  size_t cur = 0;
  tsr_json_member_t e;
  while (tsr_json_array_next(leases->value, leases->value_len, &cur, &e)) {
    tsr_lease_t l;
    tsr_status_t st = tsr_proto_lease_parse(e.value, e.value_len, &l);
    if (st) {
      tsr_status_free(st);
      continue;
    }
    if (l.owner_uid != uid || l.device != device || l.state != TSR_LEASE_ACTIVE) continue;
    *id = l.id;
    tsr_json_member_t lm[48];
    size_t ln = 0;
    region[0] = '\0';
    if (tsr_json_scan_object(e.value, e.value_len, lm, 48, &ln, &err)) {
      const tsr_json_member_t *r = tsr_json_find(lm, ln, "region");
      if (r) tsr_json_get_string(r, region, rcap);
    }
    return true;
  }
  return false;
}

/* The fraction of device `device` that `bytes` needs (rounded up). */
static bool tsr__fraction_of(tsr_proto_client_t *c, uint32_t device, uint64_t bytes, uint32_t *ppm, char *why,
                             size_t cap) {
  tsr_json_member_t devs_m, *devs = &devs_m;
  tsr_json_error_t err;
  if (!tsr__call_array(c, "devices", NULL, "devices", devs, why, cap)) return false;
  size_t cur = 0;
  tsr_json_member_t e;
  for (uint32_t i = 0; tsr_json_array_next(devs->value, devs->value_len, &cur, &e); i++) {
    if (i != device) continue;
    tsr_json_member_t dm[32];
    size_t dn = 0;
    uint64_t total = 0;
    const tsr_json_member_t *mem;
    if (!tsr_json_scan_object(e.value, e.value_len, dm, 32, &dn, &err) ||
        !(mem = tsr_json_find(dm, dn, "memory_bytes")) || !tsr_json_get_u64(mem, &total) || !total)
      break;
    if (bytes > total) {
      snprintf(why, cap, "--gpu-mem=%s is more than GPU %u's %" PRIu64 " bytes", tsr__o.mem, device, total);
      return false;
    }
    unsigned __int128 p = ((unsigned __int128)bytes * 1000000u + total - 1) / total;
    *ppm = p ? (uint32_t)p : 1;
    return true;
  }
  snprintf(why, cap, "tesserad does not know GPU %u", device);
  return false;
}

/* Fails the step (policy required) or lets it run ungoverned (optional). */
static int tsr__give_up(const char *what, const char *why) {
  if (tsr__o.optional) {
    slurm_info("tessera: %s: %s; the job runs without a GPU fence (policy=optional)", what, why);
    return 0;
  }
  slurm_error("tessera: %s: %s", what, why);
  return -1;
}

/* The job's lease on GPU `dev` for `uid`: the one an earlier step made, or
 * a new one. 0, or tsr__give_up's answer. */
static int tsr__lease_on(tsr_proto_client_t *c, uint32_t job, const char *jobid, uid_t uid, unsigned long dev,
                         const char *shards_env, uint64_t *id, char *region, size_t rcap) {
  char why[512] = "";
  if (tsr__find(c, jobid, (uint32_t)uid, (uint32_t)dev, id, region, rcap, why, sizeof(why))) return 0;
  if (why[0]) return tsr__give_up("the job's lease", why);
  uint32_t ppm = tsr__o.mem_ppm;
  if (tsr__o.have_mem && !ppm && !tsr__fraction_of(c, (uint32_t)dev, tsr__o.mem_bytes, &ppm, why, sizeof(why)))
    return tsr__give_up("--gpu-mem", why);
  if (!tsr__o.have_mem) {
    uint32_t per = tsr__shards_per_gpu();
    uint32_t n = (uint32_t)atoi(shards_env);
    if (!per || n > per)
      return tsr__give_up("--gres=shard", "the shards of the GPU are unknown (give shards_per_gpu=N in plugstack.conf)");
    ppm = (uint32_t)((uint64_t)n * 1000000u / per);
  }
  char user[16];
  snprintf(user, sizeof(user), "%u", (unsigned)uid);
  tsr_json_writer_t w = {0};
  tsr_json_object_begin(&w);
  tsr_json_key_string(&w, "op", "lease.create");
  tsr_json_key_u64(&w, "device", dev);
  tsr_json_key_u64(&w, "fraction_ppm", ppm);
  tsr_json_key_u64(&w, "duration_ns", tsr__job_left_ns(job));
  if (tsr__o.have_sm) tsr_json_key_u64(&w, "sm_ppm", tsr__o.sm_ppm);
  tsr_json_key_string(&w, "user", user);
  tsr_json_key_string(&w, "job", jobid);
  tsr_json_object_end(&w);
  size_t len = 0;
  const char *ok = tsr__call(c, &w, &len, why, sizeof(why));
  tsr_json_writer_free(&w);
  if (!ok) return tsr__give_up("lease not created", why);
  if (!tsr__find(c, jobid, (uint32_t)uid, (uint32_t)dev, id, region, rcap, why, sizeof(why)))
    return tsr__give_up("the new lease", why[0] ? why : "not found after it was made");
  slurm_info("tessera: job %s: lease %" PRIu64 " on GPU %lu", jobid, *id, dev);
  return 0;
}

int slurm_spank_init_post_opt(spank_t sp, int ac, char **av) {
  if (!spank_remote(sp)) return 0;
  if (tsr__args(ac, av)) return -1;
  char shards_env[32] = "";
  bool shards = spank_getenv(sp, "SLURM_SHARDS_ON_NODE", shards_env, sizeof(shards_env)) == ESPANK_SUCCESS &&
                atoi(shards_env) > 0;
  if (!tsr__o.have_mem && !shards) return 0; /* not a governed job */
  uint32_t job = 0;
  uid_t uid = 0;
  if (spank_get_item(sp, S_JOB_ID, &job) != ESPANK_SUCCESS || spank_get_item(sp, S_JOB_UID, &uid) != ESPANK_SUCCESS)
    return tsr__give_up("the job", "Slurm did not give its id and user");
  /* the GPUs the job holds here, a lease on each (TESSERA_LEASE lists them,
   * one a device, as the shim reads it); a job that asked for none (no
   * GRES, so Slurm sets no CUDA_VISIBLE_DEVICES) gets GPU 0, and its tasks
   * see only that one */
  char gpus[256] = "";
  if (spank_getenv(sp, "CUDA_VISIBLE_DEVICES", gpus, sizeof(gpus)) != ESPANK_SUCCESS || !gpus[0]) {
    snprintf(gpus, sizeof(gpus), "0");
    spank_setenv(sp, "CUDA_VISIBLE_DEVICES", gpus, 1);
  }
  unsigned long devs[16];
  size_t ndev = 0;
  for (const char *p = gpus; *p;) {
    char *endp = NULL;
    unsigned long dev = strtoul(p, &endp, 10);
    if (endp == p || dev > 1023 || (*endp && *endp != ',') || ndev == 16)
      return tsr__give_up("CUDA_VISIBLE_DEVICES", "not a list of GPU indices");
    devs[ndev++] = dev;
    p = *endp ? endp + 1 : endp;
  }
  char jobid[32];
  snprintf(jobid, sizeof(jobid), "%" PRIu32, job);
  tsr_proto_client_t *c = NULL;
  tsr_status_t st = tsr_proto_client_connect(tsr__o.socket, &c);
  if (st) {
    char why[512];
    snprintf(why, sizeof(why), "%s", tsr_status_message(st));
    tsr_status_free(st);
    return tsr__give_up("no tesserad", why);
  }
  char ids[16 * 24] = "";
  char region[4096] = "";
  int rc = 0;
  for (size_t k = 0; k < ndev; k++) {
    uint64_t id = 0;
    rc = tsr__lease_on(c, job, jobid, uid, devs[k], shards_env, &id, region, sizeof(region));
    if (rc || !id) goto out; /* refused (required: the step fails), or ungoverned (optional) */
    size_t used = strlen(ids);
    snprintf(ids + used, sizeof(ids) - used, "%s%" PRIu64, used ? "," : "", id);
  }
  spank_setenv(sp, "TESSERA_LEASE", ids, 1);
  char *slash = strrchr(region, '/');
  if (slash && slash != region) {
    *slash = '\0';
    spank_setenv(sp, "TESSERA_REGION_DIR", region, 1);
  }
  tsr__default_shim();
  char preload[8192] = "";
  char old[4096] = "";
  if (spank_getenv(sp, "LD_PRELOAD", old, sizeof(old)) == ESPANK_SUCCESS && old[0] && !strstr(old, tsr__o.shim))
    snprintf(preload, sizeof(preload), "%s %s", tsr__o.shim, old);
  else
    snprintf(preload, sizeof(preload), "%s", tsr__o.shim);
  spank_setenv(sp, "LD_PRELOAD", preload, 1);
out:
  tsr_proto_client_close(c);
  return rc;
}

/* ---- in slurmd, when the job ends: its leases go ---------------------------------- */

int slurm_spank_job_epilog(spank_t sp, int ac, char **av) {
  if (tsr__args(ac, av)) return -1;
  uint32_t job = 0;
  if (spank_get_item(sp, S_JOB_ID, &job) != ESPANK_SUCCESS) return 0;
  char jobid[32];
  snprintf(jobid, sizeof(jobid), "%" PRIu32, job);
  tsr_proto_client_t *c = NULL;
  tsr_status_t st = tsr_proto_client_connect(tsr__o.socket, &c);
  if (st) { /* the leases end at their deadline */
    slurm_info("tessera: job %s ended, tesserad unreachable (%s): its leases end at their deadline", jobid,
               tsr_status_message(st));
    tsr_status_free(st);
    return 0;
  }
  for (int round = 0; round < 64; round++) {
    uint64_t ids[64];
    size_t n = 0, len = 0;
    char why[256];
    tsr_json_member_t leases_m, *leases = &leases_m;
    if (!tsr__call_array(c, "lease.list", jobid, "leases", leases, why, sizeof(why))) break;
    tsr_json_writer_t w = {0};
    size_t cur = 0;
    tsr_json_member_t e;
    while (n < 64 && tsr_json_array_next(leases->value, leases->value_len, &cur, &e)) {
      tsr_lease_t l;
      tsr_status_t ps = tsr_proto_lease_parse(e.value, e.value_len, &l);
      if (ps) tsr_status_free(ps);
      else ids[n++] = l.id;
    }
    if (n == 0) break;
    for (size_t i = 0; i < n; i++) {
      tsr_json_writer_reset(&w);
      tsr_json_object_begin(&w);
      tsr_json_key_string(&w, "op", "lease.release");
      tsr_json_key_u64(&w, "id", ids[i]);
      tsr_json_object_end(&w);
      if (!tsr__call(c, &w, &len, why, sizeof(why)))
        slurm_info("tessera: job %s: lease %" PRIu64 " not released: %s", jobid, ids[i], why);
      tsr_json_writer_free(&w);
    }
  }
  tsr_proto_client_close(c);
  return 0;
}
