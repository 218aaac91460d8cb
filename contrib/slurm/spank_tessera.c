/* spank_tessera.c: Slurm's fence for shared GPUs. A SPANK plugin that gives
 * each job a tessera lease on each GPU Slurm allocated to it, and only on
 * those, and puts its tasks under them, as `tessera run` does
 * (docs/slurm.md).
 *
 *   srun/sbatch/salloc --gpu-mem=SIZE|FRACTION [--gpu-sm=PERCENT]
 *
 * Where the job is submitted (srun, sbatch, salloc) the options are
 * checked: a bad value rejects the job, naming the option, and so does
 * --gpu-mem or --gpu-sm on a job that asks Slurm for no GPU (no gpu or
 * shard GRES, no --gpus): tessera governs only the GPUs Slurm gives. A
 * job's share of the GPU is --gpu-mem, or its shards: --gpu-sm alone on a
 * job without shards would govern nothing, and is refused too.
 *
 * In slurmstepd (as root) when a step starts, the plugin takes the step's
 * GPUs from Slurm (SLURM_STEP_GPUS; the batch step's SLURM_JOB_GPUS),
 * never from CUDA_VISIBLE_DEVICES (under ConstrainDevices Slurm numbers
 * those from 0 in each job) and never a default GPU: a governed step with
 * no GPU is refused. Slurm 22.05 numbers a node's GPUs by their place in
 * gres.conf; gres.conf gives each place's device file, /dev/nvidiaN, and
 * the tesserad device with minor N is the one leased (slurm_gpus.h). For
 * each, the plugin asks the node's tesserad for the job's lease: the one
 * labelled with the job id for the job's user on that device if an
 * earlier step made it, else a new one for the job's time left, as
 * slurmctld gives it (no answer, no lease). The tasks get TESSERA_LEASE,
 * TESSERA_REGION_DIR and LD_PRELOAD (the shim); the lease's region names
 * the GPU's UUID, which the shim charges whatever the job's own
 * CUDA_VISIBLE_DEVICES numbering. With --gres=shard:N and no --gpu-mem,
 * the lease is N of the GPU's shards; with --gpu-mem it is that, and no
 * more than the N shards. A step refused on one of its GPUs keeps no lease
 * it made on the others.
 *
 * The leases follow the job's end when an admin moves it (scontrol update
 * TimeLimit=, later or earlier): a step that reuses a lease renews it to
 * the job's end if that moved, and while a step runs a thread of its
 * slurmstepd asks slurmctld for the end every follow= and renews the
 * step's leases when it moved (the follower, below). When the job ends
 * (completes, fails, is cancelled or runs out of time) slurmd's epilog
 * releases its leases; if that never runs, the lease's deadline (the job's
 * end) still ends it.
 *
 * plugstack.conf arguments: socket=PATH (tesserad's socket), policy=
 * required|optional (a step that cannot be governed fails, its reason on
 * the user's stderr; or runs ungoverned with a log line), shim=PATH
 * (libtessera-cuda.so; default: the one beside this plugin),
 * shards_per_gpu=N (default: each GPU's from gres.conf beside slurm.conf),
 * max_lease=DURATION (the longest lease, a job without a time limit's;
 * default 30d, tesserad's default max_lease, which tesserad does not tell
 * its clients: keep it at most the node's), follow=DURATION (how often a
 * running step asks slurmctld whether the job's end moved; default 30s,
 * 0 turns following off). */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <slurm/slurm.h>
#include <slurm/spank.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/fs.h"
#include "base/json.h"
#include "base/time.h"
#include "base/units.h"
#include "proto/proto.h"
#include "proto/requests.h"
#include "slurm_gpus.h"
#include "lease/lease.h"

SPANK_PLUGIN(tessera, 1);

/* max_lease's default: tesserad's default max_lease */
#define TSR_SPANK_MAX_LEASE_NS (30ull * 86400 * 1000000000ull)
#define TSR_SPANK_FILE_MAX ((size_t)1 << 20) /* gres.conf, a batch script: read at most */
/* follow='s default: how often a running step asks slurmctld for the job's end */
#define TSR_SPANK_FOLLOW_NS (30ull * 1000000000ull)
/* how long slurm_spank_exit waits for the follower to stop: the step's end
 * (and its completion message to slurmctld) waits that long at most */
#define TSR_SPANK_FOLLOW_JOIN_NS (2ull * 1000000000ull)

static struct {
  char mem[64], sm[64];
  bool have_mem, have_sm;
  uint32_t mem_ppm, sm_ppm;
  uint64_t mem_bytes;
  char socket[108];
  char shim[4096];
  bool optional;
  uint32_t shards_per_gpu; /* 0: from gres.conf */
  uint64_t max_lease_ns;   /* the longest lease the plugin asks for (max_lease=) */
  uint64_t follow_ns;      /* how often a running step asks for the job's end (follow=); 0: never */
  /* in slurmstepd: why the step may not run (policy=required), told to
   * each task by slurm_spank_task_init; "" when it may */
  char refusal[1024];
} tsr__o = {
    .socket = TSR_PROTO_DEFAULT_SOCKET, .max_lease_ns = TSR_SPANK_MAX_LEASE_NS, .follow_ns = TSR_SPANK_FOLLOW_NS};

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
    {"gpu-mem", "SIZE|FRACTION",
     "GPU memory for the job (tessera): a size (40GiB) or a fraction of the GPU (25%, 0.25)", 1, 0, tsr__opt_mem},
    {"gpu-sm", "PERCENT", "share of the GPU's SMs for the job (tessera): 30% or 0.3", 1, 0, tsr__opt_sm},
    SPANK_OPTIONS_TABLE_END};

/* plugstack.conf's value of `key` in `arg` ("key=value"), or NULL. */
static const char *tsr__arg_value(const char *arg, const char *key) {
  size_t n = strlen(key);
  return strncmp(arg, key, n) == 0 && arg[n] == '=' ? arg + n + 1 : NULL;
}

/* plugstack.conf's arguments (each callback gets them: the epilog runs in
 * slurmd, where init is not called first). A bad one fails the callback,
 * so the plugin never runs on a setting it did not read. */
static int tsr__args(int ac, char **av) {
  for (int i = 0; i < ac; i++) {
    const char *a = av[i], *v;
    uint64_t u = 0;
    tsr_status_t st = NULL;
    if ((v = tsr__arg_value(a, "socket")) && *v && strlen(v) < sizeof(tsr__o.socket)) {
      snprintf(tsr__o.socket, sizeof(tsr__o.socket), "%s", v);
    } else if (strcmp(a, "policy=required") == 0) {
      tsr__o.optional = false;
    } else if (strcmp(a, "policy=optional") == 0) {
      tsr__o.optional = true;
    } else if ((v = tsr__arg_value(a, "shim")) && *v && strlen(v) < sizeof(tsr__o.shim)) {
      snprintf(tsr__o.shim, sizeof(tsr__o.shim), "%s", v);
    } else if ((v = tsr__arg_value(a, "shards_per_gpu"))) {
      if (!(st = tsr_parse_u64(v, &u)) && (u == 0 || u > UINT32_MAX))
        st = tsr_status_make(TSR_INVALID_ARGUMENT, "it must be from 1 to %" PRIu32, UINT32_MAX);
      if (st) {
        slurm_error("spank_tessera: plugstack.conf: %s: %s (the shards of one GPU)", a, tsr_status_message(st));
        tsr_status_free(st);
        return -1;
      }
      tsr__o.shards_per_gpu = (uint32_t)u;
    } else if ((v = tsr__arg_value(a, "max_lease"))) {
      if (!(st = tsr_parse_duration(v, &u)) && u < 1000000000ull)
        st = tsr_status_make(TSR_INVALID_ARGUMENT, "it must be 1s or more");
      if (st) {
        slurm_error(
            "spank_tessera: plugstack.conf: %s: %s (a duration: 30d, 12h; at most tesserad's "
            "max_lease)",
            a, tsr_status_message(st));
        tsr_status_free(st);
        return -1;
      }
      tsr__o.max_lease_ns = u;
    } else if ((v = tsr__arg_value(a, "follow"))) {
      if ((st = tsr_slurm_follow_parse(v, &u))) {
        slurm_error(
            "spank_tessera: plugstack.conf: %s: %s (how often a running step asks slurmctld whether "
            "the job's end moved: a duration of 1s or more, 30s, 2m; 0 turns following off)",
            a, tsr_status_message(st));
        tsr_status_free(st);
        return -1;
      }
      tsr__o.follow_ns = u;
    } else {
      slurm_error(
          "spank_tessera: plugstack.conf argument '%s' is not one of socket=PATH, "
          "policy=required|optional, shim=PATH, shards_per_gpu=N, max_lease=DURATION, "
          "follow=DURATION",
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

/* The whole of the regular file `path` (at most TSR_SPANK_FILE_MAX bytes,
 * NUL-terminated; free() it), or NULL when it is not one or cannot be
 * read: a guess at submission looks, and moves on. O_NONBLOCK: a FIFO is
 * never waited on at open (tsr_fs_read_fd refuses it after). */
static char *tsr__peek(const char *path, size_t *out_len) {
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return NULL;
  char *text = NULL;
  tsr_status_t st = tsr_fs_read_fd(fd, TSR_SPANK_FILE_MAX, &text, out_len);
  close(fd);
  tsr_status_free(st);
  return text;
}

/* ---- at submission: a governed job must ask Slurm for a GPU -------------------
 *
 * Where the plugin can look. In srun, sbatch and salloc it runs before the
 * job exists: spank_get_item answers only the user's uid and gid there,
 * spank_getenv only works in slurmstepd, and none of the commands puts
 * its GPU options in the environment before slurm_spank_init_post_opt.
 * What the command will ask slurmctld for is only where the command reads
 * it itself: its command line (this process's argv), its input variables
 * (SLURM_GRES, SBATCH_GPUS, ...), and for sbatch the script's #SBATCH
 * lines; srun inside an allocation (SLURM_JOB_ID) takes the allocation's
 * GPUs without asking, and slurmctld's record of the job says whether it
 * has any. These are read the way Slurm reads them, and every one of them
 * is read: that is the most reliable this side can be. It is still a
 * courtesy, not the fence: a GPU asked for in a way not seen here (a
 * script piped into sbatch, a GRES a job_submit plugin adds) would be
 * refused by mistake, so only a job that asks for a GPU nowhere the plugin
 * can see is refused; an option it misreads the other way lets a job
 * through to slurmstepd, whose check (Slurm's own list of the step's GPUs)
 * is the one that holds. */

/* What this process's command line (split as the kernel keeps it) asks
 * for; with `scripts`, also sbatch's script. */
static unsigned tsr__argv_asks(bool scripts) {
  size_t len = 0;
  char *cmd = tsr__peek("/proc/self/cmdline", &len);
  if (!cmd) return 0;
  char *words[4096];
  int n = 0;
  for (size_t i = 0; i < len && n < 4096; i += strlen(cmd + i) + 1) words[n++] = cmd + i;
  unsigned asks = n > 1 ? tsr_slurm_words_ask(n - 1, words + 1) : 0;
  /* sbatch's script: the word naming a readable file (which word it is
   * needs every option of sbatch; trying each costs a stat) */
  for (int i = 1; scripts && !asks && i < n; i++) {
    if (words[i][0] == '-') continue;
    size_t slen = 0;
    char *text = tsr__peek(words[i], &slen);
    if (text) asks = tsr_slurm_script_asks(text, slen);
    free(text);
  }
  free(cmd);
  return asks;
}

static const char *tsr__getenv(const char *name) { return getenv(name); }

/* srun inside an allocation: what does the allocation hold, as far as
 * `need` (TSR_SLURM_ASKS_* bits) goes? The batch step's environment may say
 * so (SLURM_JOB_GPUS, and SLURM_SHARDS_ON_NODE for shards); where it does
 * not (salloc's says nothing), slurmctld is asked. */
static unsigned tsr__allocation_asks(unsigned need) {
  const char *gpus = getenv("SLURM_JOB_GPUS");
  uint32_t shards = 0;
  tsr_status_t st = tsr_slurm_shards_parse(getenv("SLURM_SHARDS_ON_NODE"), &shards);
  tsr_status_free(st);
  st = NULL;
  unsigned env = gpus && *gpus ? (shards ? TSR_SLURM_ASKS_SHARD : TSR_SLURM_ASKS_GPU) : 0;
  if (env & need) return env;
  const char *id = getenv("SLURM_JOB_ID");
  if (!id || !*id) id = getenv("SLURM_JOBID");
  uint64_t job = 0;
  if (!id || (st = tsr_parse_u64(id, &job)) || !job || job > UINT32_MAX) {
    tsr_status_free(st);
    return env;
  }
  job_info_msg_t *msg = NULL;
  unsigned asks = env;
  if (slurm_load_job(&msg, (uint32_t)job, SHOW_DETAIL) == 0 && msg && msg->record_count > 0) {
    /* what the job asked for ("gres:gpu:1"), and what it holds, which
     * lists GPUs only where accounting tracks them */
    const slurm_job_info_t *j = &msg->job_array[0];
    asks |= tsr_slurm_gres_spec_asks(j->tres_per_job) | tsr_slurm_gres_spec_asks(j->tres_per_node) |
            tsr_slurm_gres_spec_asks(j->tres_per_socket) | tsr_slurm_gres_spec_asks(j->tres_per_task) |
            tsr_slurm_tres_asks(j->tres_alloc_str);
  }
  if (msg) slurm_free_job_info_msg(msg);
  return asks;
}

static int tsr__check_submission(spank_context_t ctx) {
  if (!tsr__o.have_mem && !tsr__o.have_sm) return 0;
  tsr_slurm_command_t cmd = TSR_SLURM_SRUN;
  if (ctx == S_CTX_ALLOCATOR)
    cmd = strcmp(program_invocation_short_name, "salloc") == 0 ? TSR_SLURM_SALLOC : TSR_SLURM_SBATCH;
  unsigned asks = tsr__argv_asks(cmd == TSR_SLURM_SBATCH) | tsr_slurm_env_asks(cmd, tsr__getenv);
  if (!asks && cmd == TSR_SLURM_SBATCH) { /* a script redirected from a file: sbatch < job.sh */
    size_t len = 0;
    char *text = NULL;
    tsr_status_t st = tsr_fs_read_fd(STDIN_FILENO, TSR_SPANK_FILE_MAX, &text, &len); /* pread: sbatch reads it after */
    if (!st) asks = tsr_slurm_script_asks(text, len);
    tsr_status_free(st);
    free(text);
  }
  /* what a job needs: --gpu-mem, a GPU or shards; --gpu-sm alone, shards */
  unsigned need = tsr__o.have_mem ? TSR_SLURM_ASKS_GPU | TSR_SLURM_ASKS_SHARD : TSR_SLURM_ASKS_SHARD;
  /* srun asking for nothing itself takes the allocation's */
  if (!asks && cmd == TSR_SLURM_SRUN) asks = tsr__allocation_asks(need);
  if (!asks) {
    slurm_error(
        "tessera: %s%s%s asks for no GPU: tessera governs only the GPUs Slurm gives a job; ask for "
        "one with --gres=gpu:N, --gres=shard:N or --gpus=N",
        tsr__o.have_mem ? "--gpu-mem" : "", tsr__o.have_mem && tsr__o.have_sm ? " with " : "",
        tsr__o.have_sm ? "--gpu-sm" : "");
    return -1;
  }
  /* a job's share is --gpu-mem, or its shards: --gpu-sm alone on whole
   * GPUs would be a lease of nothing, and slurmstepd would not make one */
  if (!(asks & need)) {
    slurm_error(
        "tessera: --gpu-sm without --gpu-mem on a job without shards: the SM share goes with a "
        "lease of the GPU's memory; give --gpu-mem too (a size, 40GiB, or a fraction, 25%%), or "
        "ask for shards (--gres=shard:N)");
    return -1;
  }
  return 0;
}

/* ---- in slurmstepd: the step's GPUs ------------------------------------------- */

/* The step cannot be governed. policy=optional: it runs ungoverned, and
 * slurmd's log says why. policy=required: it must not run. The step is
 * not failed here: a step that fails in slurmstepd's plugin stack never
 * starts a task, and srun (22.05) takes its exit status from its tasks'
 * exits only, so it would exit 0 and the reason would reach slurmd's log
 * only. The reason is kept instead, and slurm_spank_task_init, which runs
 * in each task before it execs the user's program, with the task's stdio,
 * writes it to the task's stderr and fails the task: the program never
 * runs, srun says "Exited with exit code 1" and exits 1, and sbatch's job
 * fails. */
static void tsr__refuse(const char *what, const char *why) {
  if (tsr__o.optional) {
    slurm_info("tessera: %s: %s; the job runs without a GPU fence (policy=optional)", what, why);
    return;
  }
  slurm_error("tessera: %s: %s", what, why);
  if (!tsr__o.refusal[0]) snprintf(tsr__o.refusal, sizeof(tsr__o.refusal), "tessera: %s: %s", what, why);
}

/* Refuses with a status's message (and frees it). */
static void tsr__refuse_status(const char *what, tsr_status_t st) {
  tsr__refuse(what, tsr_status_message(st));
  tsr_status_free(st);
}

/* The node's GPUs as slurmd numbers them, from gres.conf beside slurm.conf
 * (where slurmd reads it). */
TSR_MUST_USE static tsr_status_t tsr__node_gpus(spank_t sp, tsr_slurm_gpus_t *out) {
  const char *conf = getenv("SLURM_CONF");
  char path[4096];
  snprintf(path, sizeof(path), "%s", conf && *conf ? conf : "/etc/slurm/slurm.conf");
  char *slash = strrchr(path, '/');
  if (!slash) return tsr_status_make(TSR_FAILED_PRECONDITION, "SLURM_CONF=%s is not a path", path);
  snprintf(slash + 1, sizeof(path) - (size_t)(slash + 1 - path), "gres.conf");
  char node[256] = "";
  if (spank_getenv(sp, "SLURMD_NODENAME", node, sizeof(node)) != ESPANK_SUCCESS || !node[0]) {
    gethostname(node, sizeof(node) - 1); /* slurmd's default name: the short host name */
    node[strcspn(node, ".")] = '\0';
  }
  /* a plain open, as slurmd's: gres.conf is often a link to a managed copy
   * (O_NONBLOCK only keeps a FIFO from holding the open; tsr_fs_read_fd
   * refuses anything but a regular file) */
  char *text = NULL;
  size_t len = 0;
  tsr_status_t st = NULL;
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    st = tsr_status_from_errno(errno, "open");
  else
    st = tsr_fs_read_fd(fd, TSR_SPANK_FILE_MAX, &text, &len);
  if (fd >= 0) close(fd);
  if (st) return tsr_status_annotate(st, "cannot read %s, which says which device each of Slurm's GPUs is", path);
  st = tsr_slurm_gres_conf_parse(text, path, node, out);
  free(text);
  return st;
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

/* Sends the request `w` wrote and finds the reply's member `key` of type
 * `type`; it points into the client's buffer until the next call. False
 * with `why` set when the daemon refused or the reply does not read. */
static bool tsr__call_member(tsr_proto_client_t *c, tsr_json_writer_t *w, const char *op, const char *key,
                             tsr_json_type_t type, tsr_json_member_t *out, char *why, size_t cap) {
  size_t len = 0;
  const char *reply = tsr__call(c, w, &len, why, cap);
  if (!reply) return false;
  tsr_json_member_t m[8];
  size_t n = 0;
  tsr_json_error_t err;
  const tsr_json_member_t *a;
  if (!tsr_json_scan_object(reply, len, m, 8, &n, &err) || !(a = tsr_json_find(m, n, key)) || a->type != type) {
    snprintf(why, cap, "tesserad's reply to %s did not read", op);
    return false;
  }
  *out = *a;
  return true;
}

/* Sends op (devices; or lease.list of everyone's leases of job `job`)
 * and finds the reply's array `key`, as tsr__call_member. */
static bool tsr__call_array(tsr_proto_client_t *c, tsr_proto_op_t op, const char *job, const char *key,
                            tsr_json_member_t *out, char *why, size_t cap) {
  tsr_json_writer_t w = {0};
  if (op == TSR_PROTO_LEASE_LIST) {
    tsr_proto_list_t q = {.all = true};
    snprintf(q.job, sizeof(q.job), "%s", job); /* Slurm's job ids are numbers: they fit */
    tsr_proto_list_write(&w, &q);
  } else {
    tsr_proto_plain_write(&w, op);
  }
  bool ok = tsr__call_member(c, &w, tsr_proto_op_name(op), key, TSR_JSON_ARRAY, out, why, cap);
  tsr_json_writer_free(&w);
  return ok;
}

/* tesserad's devices: index, minor and memory of each, read by proto's
 * device reader (as the CLI reads them). */
static bool tsr__devices(tsr_proto_client_t *c, tsr_slurm_device_t *out, size_t cap, size_t *count, char *why,
                         size_t wcap) {
  tsr_json_member_t devs;
  *count = 0;
  if (!tsr__call_array(c, TSR_PROTO_DEVICES, NULL, "devices", &devs, why, wcap)) return false;
  size_t cur = 0;
  tsr_json_member_t e;
  while (*count < cap && tsr_json_array_next(devs.value, devs.value_len, &cur, &e)) {
    tsr_proto_device_t d;
    tsr_status_t st = tsr_proto_device_parse(e.value, e.value_len, &d);
    if (st) {
      snprintf(why, wcap, "tesserad's device list: %s", tsr_status_message(st));
      tsr_status_free(st);
      return false;
    }
    /* no "minor" (a daemon before it) or null: unknown, never matched */
    out[(*count)++] = (tsr_slurm_device_t){
        .index = d.index, .has_minor = d.has_minor, .minor = d.minor, .memory_bytes = d.memory_bytes};
  }
  return true;
}

/* A lease of the job's, as the tasks are told of it. */
typedef struct {
  uint64_t id;
  uint64_t deadline_ns;                                        /* wall clock, as tesserad gave it */
  char region[sizeof(((tsr_proto_lease_usage_t *)0)->region)]; /* its region file; "" when none */
} tsr__lease_t;

/* Reads a lease object as tesserad writes it (with its usage where it has
 * a region). */
TSR_MUST_USE static tsr_status_t tsr__lease_read(const char *text, size_t len, tsr_lease_t *l, tsr__lease_t *out) {
  TSR_RETURN_IF_ERROR(tsr_proto_lease_parse(text, len, l));
  tsr_proto_lease_usage_t u;
  out->id = l->id;
  out->deadline_ns = l->deadline_wall_ns;
  out->region[0] = '\0';
  if (tsr_proto_lease_usage_parse(text, len, &u)) memcpy(out->region, u.region, sizeof(out->region));
  return NULL;
}

/* The job's active lease for `uid` on `device`, if any. */
static bool tsr__find(tsr_proto_client_t *c, const char *job, uint32_t uid, uint32_t device, tsr__lease_t *out,
                      char *why, size_t cap) {
  tsr_json_member_t leases;
  if (!tsr__call_array(c, TSR_PROTO_LEASE_LIST, job, "leases", &leases, why, cap)) return false;
  size_t cur = 0;
  tsr_json_member_t e;
  while (tsr_json_array_next(leases.value, leases.value_len, &cur, &e)) {
    tsr_lease_t l;
    tsr_status_t st = tsr__lease_read(e.value, e.value_len, &l, out);
    if (st) {
      tsr_status_free(st);
      continue;
    }
    if (l.owner_uid == uid && l.device == device && l.state == TSR_LEASE_ACTIVE) return true;
  }
  return false;
}

/* Releases lease `id` (of job `jobid`); a failure is logged, and the
 * lease's deadline, the job's end, still ends it. */
static void tsr__release(tsr_proto_client_t *c, const char *jobid, uint64_t id) {
  char why[256];
  size_t len = 0;
  tsr_json_writer_t w = {0};
  tsr_proto_id_write(&w, TSR_PROTO_LEASE_RELEASE, id);
  if (!tsr__call(c, &w, &len, why, sizeof(why)))
    slurm_info("tessera: job %s: lease %" PRIu64 " not released: %s", jobid, id, why);
  tsr_json_writer_free(&w);
}

/* What slurmctld says of the job's end (answered false when it says
 * nothing within MessageTimeout, or does not know the job). */
static tsr_slurm_job_time_t tsr__job_time(uint32_t job) {
  tsr_slurm_job_time_t t = {0};
  job_info_msg_t *msg = NULL;
  if (slurm_load_job(&msg, job, SHOW_DETAIL) == 0 && msg && msg->record_count > 0) {
    slurm_job_info_t *j = &msg->job_array[0];
    t.answered = true;
    t.unlimited = j->time_limit == INFINITE;
    t.end = (int64_t)j->end_time;
  }
  if (msg) slurm_free_job_info_msg(msg);
  return t;
}

/* slurmctld's answer for the job's end, asked at most once a step start. */
typedef struct {
  bool asked;
  tsr_slurm_job_time_t time;
} tsr__job_end_t;

static const tsr_slurm_job_time_t *tsr__job_end(uint32_t job, tsr__job_end_t *e) {
  if (!e->asked) e->time = tsr__job_time(job), e->asked = true;
  return &e->time;
}

/* One of the step's GPUs: Slurm's, and the tesserad device it is. */
typedef struct {
  uint32_t slurm;   /* Slurm's index */
  uint32_t device;  /* tesserad's */
  uint64_t memory;  /* the device's bytes */
  uint32_t shards;  /* its shards (0: unknown) */
  const char *file; /* gres.conf's */
} tsr__gpu_t;

/* The lease's share of `g` in ppm: --gpu-mem's, or the step's shards
 * (`shards_on_node`; 0: not a shard step). --gpu-mem on a shard step may
 * not pass its shards: Slurm counts the rest of the GPU's shards free, and
 * gives them to other jobs. False once refused. */
static bool tsr__share(const tsr__gpu_t *g, uint32_t shards_on_node, uint32_t *out_ppm) {
  char why[512];
  uint32_t ppm = tsr__o.mem_ppm;
  if (tsr__o.have_mem && !ppm) {
    if (tsr__o.mem_bytes > g->memory) {
      snprintf(why, sizeof(why), "--gpu-mem=%s is more than the GPU's %" PRIu64 " bytes (%s)", tsr__o.mem, g->memory,
               g->file);
      return tsr__refuse("--gpu-mem", why), false;
    }
    unsigned __int128 p = ((unsigned __int128)tsr__o.mem_bytes * 1000000u + g->memory - 1) / g->memory;
    ppm = p ? (uint32_t)p : 1;
  }
  if (shards_on_node) {
    uint32_t per = tsr__o.shards_per_gpu ? tsr__o.shards_per_gpu : g->shards;
    if (!per || shards_on_node > per) {
      snprintf(why, sizeof(why),
               "the shards of %s are unknown (gres.conf's Name=shard, or shards_per_gpu=N in "
               "plugstack.conf)",
               g->file);
      return tsr__refuse("--gres=shard", why), false;
    }
    if (!tsr__o.have_mem) {
      ppm = (uint32_t)((uint64_t)shards_on_node * 1000000u / per);
    } else if ((uint64_t)ppm * per > (uint64_t)shards_on_node * 1000000u) {
      char share[32];
      tsr_format_percent((uint32_t)((uint64_t)shards_on_node * 1000000u / per), share, sizeof(share));
      snprintf(why, sizeof(why),
               "--gpu-mem=%s is more than the step's shards give: %" PRIu32 " of the %" PRIu32
               " shards of %s (%s of it); ask for more shards (--gres=shard:N) or less --gpu-mem",
               tsr__o.mem, shards_on_node, per, g->file, share);
      return tsr__refuse("--gpu-mem with --gres=shard", why), false;
    }
  }
  *out_ppm = ppm;
  return true;
}

/* The job's lease on `g` for `uid`: the one an earlier step made, or a
 * new one until the job's end (*created says which; slurmctld is asked for
 * the end by the first lease this step makes, into `end`). False once
 * refused (tsr__refuse has said why). */
static bool tsr__lease_on(tsr_proto_client_t *c, uint32_t job, const char *jobid, uid_t uid, const tsr__gpu_t *g,
                          uint32_t shards_on_node, tsr__job_end_t *end, tsr__lease_t *out, bool *created) {
  char why[512] = "";
  *created = false;
  if (tsr__find(c, jobid, (uint32_t)uid, g->device, out, why, sizeof(why))) return true;
  if (why[0]) return tsr__refuse("the job's lease", why), false;
  uint32_t ppm = 0;
  if (!tsr__share(g, shards_on_node, &ppm)) return false;
  uint64_t duration = 0;
  tsr_status_t st =
      tsr_slurm_lease_duration(tsr__job_end(job, end), tsr_time_wall_ns(), tsr__o.max_lease_ns, &duration);
  if (st) return tsr__refuse_status("no lease", st), false;
  char user[16];
  snprintf(user, sizeof(user), "%u", (unsigned)uid);
  tsr_proto_create_t r = {.device = g->device,
                          .fraction_ppm = ppm,
                          .duration_ns = duration,
                          .sm_ppm = tsr__o.have_sm ? tsr__o.sm_ppm : 0,
                          .has_user = true};
  snprintf(r.user, sizeof(r.user), "%s", user);
  snprintf(r.job, sizeof(r.job), "%s", jobid);
  tsr_json_writer_t w = {0};
  tsr_proto_create_write(&w, &r);
  tsr_json_member_t lm;
  bool ok = tsr__call_member(c, &w, "lease.create", "lease", TSR_JSON_OBJECT, &lm, why, sizeof(why));
  tsr_json_writer_free(&w);
  if (!ok) return tsr__refuse("lease not created", why), false;
  /* the reply carries the lease and its region */
  tsr_lease_t l;
  st = tsr__lease_read(lm.value, lm.value_len, &l, out);
  if (st) return tsr__refuse_status("the new lease", st), false;
  *created = true;
  slurm_info("tessera: job %s: lease %" PRIu64 " on tesserad device %" PRIu32 " (Slurm's GPU %" PRIu32 ", %s)", jobid,
             out->id, g->device, g->slurm, g->file);
  return true;
}

/* The step's GPUs, mapped to tesserad's devices. False once refused. */
static bool tsr__step_gpus(spank_t sp, tsr_proto_client_t *c, tsr__gpu_t *out, size_t *count, tsr_slurm_gpus_t *node) {
  /* Slurm sets SLURM_STEP_GPUS in each step's environment, and clears it
   * in a step without a GPU; the batch step has SLURM_JOB_GPUS, which
   * slurmd sets for it. Any other step's SLURM_JOB_GPUS is whatever the
   * user's srun had in its environment, so it is not read there. */
  uint32_t step = 0;
  char list[256] = "";
  bool batch = spank_get_item(sp, S_JOB_STEPID, &step) == ESPANK_SUCCESS && step == SLURM_BATCH_SCRIPT;
  const char *var = batch ? "SLURM_JOB_GPUS" : "SLURM_STEP_GPUS";
  if (spank_getenv(sp, var, list, sizeof(list)) != ESPANK_SUCCESS || !list[0])
    return tsr__refuse("this step",
                       "Slurm gave it no GPU (--gpu-mem and --gpu-sm, and shards, need one: "
                       "--gres=gpu:N, --gres=shard:N or --gpus=N)"),
           false;
  uint32_t idx[TSR_SLURM_GPUS_MAX];
  size_t n = 0;
  tsr_status_t st = tsr_slurm_index_list_parse(list, idx, TSR_SLURM_GPUS_MAX, &n);
  if (st) return tsr__refuse_status(var, st), false;
  if ((st = tsr__node_gpus(sp, node))) return tsr__refuse_status("gres.conf", st), false;
  tsr_slurm_device_t devs[TSR_SLURM_GPUS_MAX];
  size_t ndev = 0;
  char why[512];
  if (!tsr__devices(c, devs, TSR_SLURM_GPUS_MAX, &ndev, why, sizeof(why)))
    return tsr__refuse("tesserad's devices", why), false;
  for (size_t k = 0; k < n; k++) {
    if (idx[k] >= node->count) {
      snprintf(why, sizeof(why), "%s names Slurm's GPU %" PRIu32 ", and gres.conf lists %zu for this node", var, idx[k],
               node->count);
      return tsr__refuse("the step's GPUs", why), false;
    }
    tsr__gpu_t *g = &out[k];
    g->slurm = idx[k];
    g->file = node->gpu[idx[k]].file;
    g->shards = node->gpu[idx[k]].shards;
    const tsr_slurm_device_t *d = NULL;
    if ((st = tsr_slurm_device_find(devs, ndev, node->gpu[idx[k]].dev_num, g->file, &d))) {
      char what[64];
      snprintf(what, sizeof(what), "Slurm's GPU %" PRIu32, idx[k]);
      return tsr__refuse_status(what, st), false;
    }
    g->device = d->index;
    g->memory = d->memory_bytes;
    if (!g->memory) return tsr__refuse("tesserad's devices", "a device without its memory size"), false;
  }
  *count = n;
  return true;
}

/* ---- in slurmstepd while the step runs: the leases follow the job's end ---------
 *
 * An admin may move a running job's end (scontrol update JobId=N
 * TimeLimit=..., later or earlier). Its leases ended at its end when they
 * were made, and must move with it. When a step starts, a lease an earlier
 * step made is renewed to the job's end if it is more than a second off
 * it; then, every follow= (plugstack.conf, default 30s), the step's
 * follower asks slurmctld for the job's end, as the step's start did, and
 * when it moved renews each of the step's leases (lease.renew, as root:
 * an admin to tesserad) to the new end. A job's lease on this node is used
 * only by its steps here, so each step follows its own: while one runs, it
 * keeps the lease at the job's end, and between steps (salloc's) the next
 * one's start does; two steps of a job renew the same lease to the same
 * end, which does no harm. A renewal
 * that fails is logged and tried again at the next poll; an end already
 * past is left to Slurm, which ends the job (the epilog releases the
 * leases).
 *
 * The follower is a thread of slurmstepd, not a forked helper: slurmstepd
 * has threads of its own, and a child forked from it without exec may call
 * only async-signal-safe functions, not slurm_load_job (another thread may
 * have held one of libslurm's locks at the fork); a helper to exec would
 * be a program to install and keep in step with the plugin. The thread:
 *   - starts in slurm_spank_task_post_fork, once the step's tasks are all
 *     forked and slurmstepd has its privileges back (root, to tesserad):
 *     no task is forked while the thread may hold a lock or a descriptor,
 *     and what it opens is close-on-exec anyway (tesserad's socket, and
 *     Slurm's own), so no descriptor reaches a task;
 *   - blocks every signal: slurmstepd's signals are its own threads';
 *   - sleeps on a condition variable (no descriptor to leak or close) and
 *     is told to stop by slurm_spank_exit, which waits for it
 *     TSR_SPANK_FOLLOW_JOIN_NS at most: a question to slurmctld (up to
 *     MessageTimeout) or a hung tesserad never keeps the step from ending.
 *     A thread still out then is left to end with slurmstepd, which exits
 *     right after; the plugin is pinned in memory (RTLD_NODELETE) before
 *     the thread starts, so Slurm's dlclose after slurm_spank_exit never
 *     unmaps code the thread still runs. */

/* A lease the follower keeps at the job's end. */
typedef struct {
  uint64_t id;
  uint64_t deadline_ns; /* wall clock, as tesserad last gave it */
} tsr__followed_t;

static struct {
  /* Set by slurm_spank_init_post_opt (slurmstepd's main thread), then the
   * thread's alone once it starts (pthread_create orders the two). */
  uint32_t job;
  char jobid[32];
  char socket[sizeof(tsr__o.socket)];
  uint64_t max_lease_ns;
  uint64_t every_ns;        /* follow=; 0: no follower */
  tsr_slurm_job_time_t end; /* the job's end as last followed (not answered: unknown) */
  tsr__followed_t leases[TSR_SLURM_GPUS_MAX];
  size_t count;
  bool behind; /* a renewal failed: tried again at the next poll */
  bool silent; /* slurmctld did not answer the last poll (said once) */
  /* The thread: `started` is the main thread's; `stop` and `done` are
   * under `lock`, and `wake` (CLOCK_MONOTONIC) signals either. */
  pthread_t thread;
  bool started;
  pthread_mutex_t lock;
  pthread_cond_t wake;
  bool stop, done;
} tsr__f = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* CLOCK_MONOTONIC's time `after_ns` from now, as pthread_cond_timedwait takes it. */
static struct timespec tsr__mono_after(uint64_t after_ns) {
  uint64_t at = tsr_time_add_sat(tsr_time_mono_ns(), after_ns);
  return (struct timespec){.tv_sec = (time_t)(at / TSR_NS_PER_S), .tv_nsec = (long)(at % TSR_NS_PER_S)};
}

static bool tsr__follow_stopping(void) {
  pthread_mutex_lock(&tsr__f.lock);
  bool stop = tsr__f.stop;
  pthread_mutex_unlock(&tsr__f.lock);
  return stop;
}

/* The job's end for people: "2026-11-27T10:20:00Z", or "no time limit". */
static void tsr__format_end(const tsr_slurm_job_time_t *t, char *buf, size_t cap) {
  if (t->unlimited || t->end <= 0 || !tsr_time_format_rfc3339((uint64_t)t->end * TSR_NS_PER_S, 0, buf, cap))
    snprintf(buf, cap, "no time limit");
}

/* lease.renew of lease `id` to `until_ns` (wall clock); *out_lease is the
 * lease as tesserad renewed it. */
TSR_MUST_USE static tsr_status_t tsr__renew(tsr_proto_client_t *c, uint64_t id, uint64_t until_ns,
                                            tsr_lease_t *out_lease) {
  tsr_json_writer_t w = {0};
  tsr_proto_renew_write(&w, &(tsr_proto_renew_t){.id = id, .until_ns = until_ns});
  tsr_status_t st = w.failed ? tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory")
                             : tsr_proto_client_call_lease(c, w.buf, w.len, out_lease);
  tsr_json_writer_free(&w);
  return st;
}

/* Renews each followed lease whose deadline is more than
 * TSR_SLURM_DEADLINE_SLACK_NS off the deadline the job's end `t` (answered)
 * gives it, and logs each move. A lease that failed leaves the follower
 * behind (tried again at the next poll); a lease tesserad no longer has
 * (released) is followed no more. */
static void tsr__follow_sync(const tsr_slurm_job_time_t *t) {
  char end[48], to[48], retry[64];
  tsr__format_end(t, end, sizeof(end));
  tsr__f.behind = false;
  uint64_t target = 0;
  tsr_status_t st = tsr_slurm_lease_deadline(t, tsr_time_wall_ns(), tsr__f.max_lease_ns, &target);
  if (st) { /* past: Slurm ends the job, and the epilog releases the leases */
    slurm_info("tessera: job %s: end moved to %s, already past: its leases are left to Slurm, which ends the job (%s)",
               tsr__f.jobid, end, tsr_status_message(st));
    tsr_status_free(st);
    return;
  }
  if (tsr__f.every_ns) {
    char every[32];
    tsr_time_format_duration(tsr__f.every_ns, every, sizeof(every));
    snprintf(retry, sizeof(retry), "tried again in %s", every);
  } else {
    snprintf(retry, sizeof(retry), "not tried again (follow=0)");
  }
  tsr_proto_client_t *c = NULL;
  for (size_t k = 0; k < tsr__f.count;) {
    tsr__followed_t *l = &tsr__f.leases[k];
    if (!tsr_slurm_deadline_off(l->deadline_ns, target)) {
      k++;
      continue;
    }
    if (tsr__follow_stopping()) break;
    tsr_time_format_rfc3339(target, 0, to, sizeof(to));
    tsr_lease_t got;
    if (!c) st = tsr_proto_client_connect(tsr__f.socket, &c);
    if (!st) st = tsr__renew(c, l->id, target, &got);
    if (!st) {
      l->deadline_ns = got.deadline_wall_ns;
      tsr_time_format_rfc3339(got.deadline_wall_ns, 0, to, sizeof(to));
      slurm_info("tessera: job %s: end moved to %s; lease %" PRIu64 " renewed to %s", tsr__f.jobid, end, l->id, to);
      k++;
      continue;
    }
    if (tsr_status_code(st) == TSR_NOT_FOUND && c) { /* tesserad answered: released, or ended */
      slurm_info("tessera: job %s: lease %" PRIu64 " is no longer followed: %s", tsr__f.jobid, l->id,
                 tsr_status_message(st));
      *l = tsr__f.leases[--tsr__f.count];
    } else {
      slurm_info("tessera: job %s: end moved to %s; lease %" PRIu64 " not renewed to %s: %s; %s", tsr__f.jobid, end,
                 l->id, to, tsr_status_message(st), retry);
      tsr__f.behind = true;
      k++;
    }
    tsr_status_free(st);
    st = NULL;
    tsr_proto_client_close(c); /* the next lease on a connection of its own: this one may be broken */
    c = NULL;
  }
  tsr_proto_client_close(c);
}

/* One poll: slurmctld's end for the job, and the leases moved to it if it
 * moved (or a renewal is behind). */
static void tsr__follow_poll(void) {
  tsr_slurm_job_time_t t = tsr__job_time(tsr__f.job);
  if (!t.answered) {
    if (!tsr__f.silent) {
      char every[32];
      tsr_time_format_duration(tsr__f.every_ns, every, sizeof(every));
      slurm_info(
          "tessera: job %s: slurmctld did not answer with the job's end: its leases keep their deadlines, and it "
          "is asked again every %s",
          tsr__f.jobid, every);
    }
    tsr__f.silent = true;
    return;
  }
  tsr__f.silent = false;
  bool moved = tsr_slurm_job_end_moved(&tsr__f.end, &t);
  tsr__f.end = t;
  if (moved || tsr__f.behind) tsr__follow_sync(&t);
}

static void *tsr__follow_main(void *arg) {
  (void)arg;
  pthread_mutex_lock(&tsr__f.lock);
  while (!tsr__f.stop) {
    struct timespec at = tsr__mono_after(tsr__f.every_ns);
    /* 0: woken (by slurm_spank_exit, or for nothing): stop, or sleep on */
    while (!tsr__f.stop && pthread_cond_timedwait(&tsr__f.wake, &tsr__f.lock, &at) == 0) continue;
    if (tsr__f.stop) break;
    pthread_mutex_unlock(&tsr__f.lock);
    tsr__follow_poll();
    pthread_mutex_lock(&tsr__f.lock);
  }
  tsr__f.done = true;
  pthread_cond_broadcast(&tsr__f.wake);
  pthread_mutex_unlock(&tsr__f.lock);
  return NULL;
}

/* At the step's start (slurm_spank_init_post_opt, the step's leases in
 * tsr__f.leases): the leases an earlier step made are moved to the job's
 * end `t` if it moved since, and the follower is made ready for
 * slurm_spank_task_post_fork to start. */
static void tsr__follow_begin(uint32_t job, const char *jobid, const tsr_slurm_job_time_t *t) {
  tsr__f.job = job;
  snprintf(tsr__f.jobid, sizeof(tsr__f.jobid), "%s", jobid);
  snprintf(tsr__f.socket, sizeof(tsr__f.socket), "%s", tsr__o.socket);
  tsr__f.max_lease_ns = tsr__o.max_lease_ns;
  tsr__f.every_ns = tsr__o.follow_ns;
  tsr__f.end = *t;
  tsr__f.behind = tsr__f.silent = false;
  if (t->answered)
    tsr__follow_sync(t);
  else /* a step reusing its leases runs on them; the follower asks again */
    slurm_info("tessera: job %s: slurmctld did not answer with the job's end: its leases keep their deadlines%s", jobid,
               tsr__f.every_ns ? " until it does" : " (follow=0: not asked again)");
}

/* Starts the follower (see above); a step without leases, or with
 * follow=0, has none. Its failure to start is logged: the leases still end
 * at the job's end as it was, and the step runs. */
static void tsr__follow_start(void) {
  if (tsr__f.started || !tsr__f.count || !tsr__f.every_ns) return;
  Dl_info info;
  void *pinned = NULL;
  if (dladdr((void *)tsr__follow_main, &info) && info.dli_fname)
    pinned = dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE); /* never closed: pinned for good */
  if (!pinned) {
    const char *why = dlerror();
    slurm_error(
        "tessera: job %s: its leases do not follow its end: the plugin cannot stay loaded for its follower (%s)",
        tsr__f.jobid, why ? why : "dladdr found no file");
    return;
  }
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&tsr__f.wake, &ca);
  pthread_condattr_destroy(&ca);
  tsr__f.stop = tsr__f.done = false;
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old); /* the thread inherits it */
  int err = pthread_create(&tsr__f.thread, NULL, tsr__follow_main, NULL);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (err) {
    slurm_error("tessera: job %s: its leases do not follow its end: no thread for the follower (%s)", tsr__f.jobid,
                strerror(err));
    return;
  }
  tsr__f.started = true;
}

/* Stops the follower, waiting TSR_SPANK_FOLLOW_JOIN_NS at most (see above). */
static void tsr__follow_stop(void) {
  if (!tsr__f.started) return;
  tsr__f.started = false;
  pthread_mutex_lock(&tsr__f.lock);
  tsr__f.stop = true;
  pthread_cond_broadcast(&tsr__f.wake);
  struct timespec at = tsr__mono_after(TSR_SPANK_FOLLOW_JOIN_NS);
  while (!tsr__f.done && pthread_cond_timedwait(&tsr__f.wake, &tsr__f.lock, &at) == 0) continue;
  bool done = tsr__f.done;
  pthread_mutex_unlock(&tsr__f.lock);
  if (done) {
    pthread_join(tsr__f.thread, NULL);
    return;
  }
  pthread_detach(tsr__f.thread);
  slurm_info("tessera: job %s: the lease follower still waits for slurmctld or tesserad; the step ends without it",
             tsr__f.jobid);
}

int slurm_spank_init_post_opt(spank_t sp, int ac, char **av) {
  if (!spank_remote(sp)) return tsr__check_submission(spank_context());
  if (tsr__args(ac, av)) return -1;
  tsr__o.refusal[0] = '\0';
  char shards_env[64] = "";
  uint32_t shards = 0;
  spank_err_t se = spank_getenv(sp, "SLURM_SHARDS_ON_NODE", shards_env, sizeof(shards_env));
  tsr_status_t st = NULL;
  tsr__f.count = 0; /* the leases the step's follower keeps at the job's end */
  if (se == ESPANK_SUCCESS)
    st = tsr_slurm_shards_parse(shards_env, &shards);
  else if (se != ESPANK_ENV_NOEXIST)
    st = tsr_status_make(TSR_INVALID_ARGUMENT, "SLURM_SHARDS_ON_NODE cannot be read (%s)", spank_strerror(se));
  /* whether the step is governed cannot be told */
  if (st) return tsr__refuse_status("the step's shards", st), 0;
  if (!tsr__o.have_mem && !shards) {
    /* tsr__check_submission refuses it; a step that came by all the same
     * (a shard job's step without shards) is not run ungoverned quietly */
    if (tsr__o.have_sm)
      tsr__refuse("--gpu-sm",
                  "this step has no --gpu-mem and no shards: an SM share needs a lease of the "
                  "GPU's memory (give --gpu-mem, or --gres=shard:N)");
    return 0; /* not a governed job */
  }
  uint32_t job = 0;
  uid_t uid = 0;
  if (spank_get_item(sp, S_JOB_ID, &job) != ESPANK_SUCCESS || spank_get_item(sp, S_JOB_UID, &uid) != ESPANK_SUCCESS)
    return tsr__refuse("the job", "Slurm did not give its id and user"), 0;
  char jobid[32];
  snprintf(jobid, sizeof(jobid), "%" PRIu32, job);
  tsr_proto_client_t *c = NULL;
  st = tsr_proto_client_connect(tsr__o.socket, &c);
  if (st) return tsr__refuse_status("no tesserad", st), 0;
  static tsr_slurm_gpus_t node; /* static: 17 KiB, off slurmstepd's thread stack */
  tsr__gpu_t gpus[TSR_SLURM_GPUS_MAX];
  size_t ngpus = 0;
  char ids[TSR_SLURM_GPUS_MAX * 24] = "";
  tsr__lease_t lease = {0};
  tsr__job_end_t end = {0};
  uint64_t made[TSR_SLURM_GPUS_MAX]; /* the leases this step created */
  size_t nmade = 0;
  bool ok = tsr__step_gpus(sp, c, gpus, &ngpus, &node);
  if (ok && shards && ngpus > 1) { /* SLURM_SHARDS_ON_NODE counts them all */
    tsr__refuse("--gres=shard",
                "the step's shards are on more than one GPU, and Slurm does not say how many "
                "on each");
    ok = false;
  }
  for (size_t k = 0; ok && k < ngpus; k++) {
    bool created = false;
    ok = tsr__lease_on(c, job, jobid, uid, &gpus[k], shards, &end, &lease, &created);
    if (ok && created) made[nmade++] = lease.id;
    if (ok) tsr__f.leases[tsr__f.count++] = (tsr__followed_t){.id = lease.id, .deadline_ns = lease.deadline_ns};
    size_t used = strlen(ids);
    if (ok) snprintf(ids + used, sizeof(ids) - used, "%s%" PRIu64, used ? "," : "", lease.id);
  }
  /* refused on one GPU: the leases made on the others go now, not at the
   * job's end (an earlier step's stay: that step may still run on them) */
  for (size_t k = 0; !ok && k < nmade; k++) tsr__release(c, jobid, made[k]);
  tsr_proto_client_close(c);
  if (!ok) { /* refused (required: the tasks fail), or ungoverned (optional) */
    tsr__f.count = 0;
    return 0;
  }
  tsr__follow_begin(job, jobid, tsr__job_end(job, &end));
  /* TESSERA_LEASE lists the leases, one a GPU, as the shim reads it; each
   * lease's region names its GPU's UUID, so the job's own
   * CUDA_VISIBLE_DEVICES (Slurm's, left as it is) does not matter */
  spank_setenv(sp, "TESSERA_LEASE", ids, 1);
  char *slash = strrchr(lease.region, '/');
  if (slash && slash != lease.region) {
    *slash = '\0';
    spank_setenv(sp, "TESSERA_REGION_DIR", lease.region, 1);
  }
  tsr__default_shim();
  char preload[8192] = "";
  char old[4096] = "";
  if (spank_getenv(sp, "LD_PRELOAD", old, sizeof(old)) == ESPANK_SUCCESS && old[0] && !strstr(old, tsr__o.shim))
    snprintf(preload, sizeof(preload), "%s %s", tsr__o.shim, old);
  else
    snprintf(preload, sizeof(preload), "%s", tsr__o.shim);
  spank_setenv(sp, "LD_PRELOAD", preload, 1);
  return 0;
}

/* In each task, as its user, with its stdio, before it execs: a refused
 * step's tasks end here (see tsr__refuse). The first task on each node
 * writes why. */
int slurm_spank_task_init(spank_t sp, int ac, char **av) {
  (void)ac, (void)av;
  if (!spank_remote(sp) || !tsr__o.refusal[0]) return 0;
  int task = 0;
  if (spank_get_item(sp, S_TASK_ID, &task) != ESPANK_SUCCESS || task == 0)
    dprintf(STDERR_FILENO, "%s; the step does not run (policy=required)\n", tsr__o.refusal);
  return -1;
}

/* In slurmstepd, as root, after each of the step's tasks is forked (all of
 * them are by the first call): the follower starts. */
int slurm_spank_task_post_fork(spank_t sp, int ac, char **av) {
  (void)ac, (void)av;
  if (spank_remote(sp)) tsr__follow_start();
  return 0;
}

/* In slurmstepd when the step ends (and in srun, sbatch, salloc, which
 * have no follower): the follower stops. */
int slurm_spank_exit(spank_t sp, int ac, char **av) {
  (void)sp, (void)ac, (void)av;
  tsr__follow_stop();
  return 0;
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
    size_t n = 0;
    char why[256];
    tsr_json_member_t leases;
    if (!tsr__call_array(c, TSR_PROTO_LEASE_LIST, jobid, "leases", &leases, why, sizeof(why))) break;
    size_t cur = 0;
    tsr_json_member_t e;
    while (n < 64 && tsr_json_array_next(leases.value, leases.value_len, &cur, &e)) {
      tsr_lease_t l;
      tsr_status_t ps = tsr_proto_lease_parse(e.value, e.value_len, &l);
      if (ps)
        tsr_status_free(ps);
      else
        ids[n++] = l.id;
    }
    if (n == 0) break;
    for (size_t i = 0; i < n; i++) tsr__release(c, jobid, ids[i]);
  }
  tsr_proto_client_close(c);
  return 0;
}
