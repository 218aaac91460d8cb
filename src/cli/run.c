/* run.c: `tessera run`: a command under a lease.
 *
 *   tessera run [--lease ID[,ID...] | --device N --mem SHARE|SIZE --for DURATION [--sm SHARE]
 *               [--on-expiry revoke|signal] [--over-limit signal|log] [--wait DURATION]]
 *               [--policy pass|deny]
 *               [--api A] -- CMD [ARGS...]
 *
 * Takes lease ID (it must be active and have a region; several, comma
 * separated, one a GPU, for a command that uses several GPUs: torchrun, an
 * MPI job; each process charges the lease of the GPU it uses) or creates
 * one, attaches itself to each (lease.attach: the daemon then counts every process
 * of CMD's tree as the lease's, with or without the shim), then runs CMD with the shims preloaded (libtessera-cuda.so and
 * libtessera-opencl.so for a CUDA device, libtessera-opencl.so for an
 * OpenCL device, or as --api says) and TESSERA_LEASE and
 * TESSERA_REGION_DIR set, forwards SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1
 * and SIGUSR2 to it, and exits with its status (128 + N when a signal N
 * ended it, 127 when it could not be started). A lease that `run` created
 * lasts as long as the command: it is renewed to --for from now each time
 * half of that has passed, and released when the command ends; one given
 * with --lease is left as it is. */
#include <errno.h>
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/time.h"
#include "base/units.h"
#include "cli/cli.h"
#include "cli/client.h"
#include "proto/requests.h"

static const char tsr__run_usage[] =
    "usage: tessera run [--lease ID[,ID...] | --device N --mem SHARE|SIZE --for DURATION [--sm SHARE]\n"
    "                   [--on-expiry revoke|signal] [--over-limit signal|log]\n"
    "                   [--wait DURATION]]\n"
    "                   [--policy pass|deny] [--api A] -- CMD [ARGS...]\n"
    "\n"
    "Runs CMD under a lease: its processes are held to the lease's memory by the\n"
    "shims (preloaded: libtessera-cuda.so for CUDA, libtessera-opencl.so for\n"
    "OpenCL), and they see the lease as the device's memory.\n"
    "\n"
    "  --lease ID[,ID...] an active lease of yours; several, one a GPU, for a\n"
    "                     command that uses several GPUs (torchrun, MPI)\n"
    "  --device, --mem, --for, --sm\n"
    "                     or create one, as `tessera lease create` does; it\n"
    "                     lasts as long as CMD: renewed to --for from now each\n"
    "                     time half of that has passed, released when CMD ends\n"
    "  --on-expiry A      for a lease it creates: revoke or signal (see\n"
    "                     `tessera lease create --help`)\n"
    "  --over-limit A     for a lease it creates: signal or log, what the backstop\n"
    "                     does when CMD's processes hold more than the lease\n"
    "  --wait DURATION    for a lease it creates: if the device has no room now,\n"
    "                     wait up to DURATION for it (`tessera lease create\n"
    "                     --help`); CMD starts once it is granted\n"
    "  --policy P         pass (default): a device without a lease is not limited;\n"
    "                     deny: allocations on it fail\n"
    "  --api A            the shims to preload: auto (default: cuda and opencl for\n"
    "                     a CUDA device, opencl for an OpenCL device), cuda,\n"
    "                     opencl, or both\n"
    "\n"
    "Exit status: CMD's; 128+N if signal N ended it; 127 if it could not start;\n"
    "otherwise tessera's own (1 refused, 2 usage, 3 no daemon, 4 internal).\n"
    "Environment: TESSERA_SHIM and TESSERA_OPENCL_SHIM name libtessera-cuda.so and\n"
    "libtessera-opencl.so if they are not beside tessera.\n";

static volatile sig_atomic_t tsr__child_pid;

static void tsr__forward(int sig) {
  if (tsr__child_pid > 0) kill((pid_t)tsr__child_pid, sig);
}

/* A shim: $<env>, else beside the tessera binary (../lib/ of a build, or
 * the same directory), else the installed place. */
static bool tsr__find_shim(const char *env_name, const char *file, char *out, size_t cap) {
  const char *env = getenv(env_name);
  if (env && *env) {
    snprintf(out, cap, "%s", env);
    return access(out, R_OK) == 0;
  }
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n > 0) {
    self[n] = '\0';
    const char *dir = dirname(self);
    static const char *const rel[] = {"../lib/", "", "../lib/tessera/"};
    for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
      snprintf(out, cap, "%s/%s%s", dir, rel[i], file);
      if (access(out, R_OK) == 0) {
        char real[PATH_MAX];
        if (realpath(out, real)) snprintf(out, cap, "%s", real);
        return true;
      }
    }
  }
  snprintf(out, cap, "/usr/lib/tessera/%s", file);
  return access(out, R_OK) == 0;
}

/* The kind of the lease's device ("cuda" or "opencl"), from the daemon's
 * device list; "cuda" when it cannot be told. */
static void tsr__device_kind(const tsr_cli_globals_t *g, uint32_t device, char *kind, size_t cap) {
  snprintf(kind, cap, "cuda");
  tsr_cli_reply_t r = {0};
  const tsr_json_member_t *list = NULL;
  if (tsr_cli_devices_call(g, &r, &list) == TSR_EXIT_OK) {
    tsr_json_member_t item;
    for (size_t cur = 0; tsr_json_array_next(list->value, list->value_len, &cur, &item);) {
      tsr_cli_device_t d;
      tsr_status_t st = tsr_cli_device_parse(item.value, item.value_len, &d);
      if (!st && d.index == device) snprintf(kind, cap, "%s", d.kind);
      tsr_status_free(st);
    }
  }
  tsr_cli_reply_close(&r);
}

/* Sends the request in `w` (freed here), whose reply carries a lease, on a
 * connection of its own. */
TSR_MUST_USE static tsr_status_t tsr__lease_request(const tsr_cli_globals_t *g, tsr_json_writer_t *w) {
  tsr_proto_client_t *c = NULL;
  tsr_status_t st =
      w->failed ? tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory") : tsr_proto_client_connect(g->socket_path, &c);
  tsr_lease_t l;
  if (!st) st = tsr_proto_client_call_lease(c, w->buf, w->len, &l);
  tsr_proto_client_close(c);
  tsr_json_writer_free(w);
  return st;
}

/* Releases the lease `run` created. One that ended meanwhile (it expired
 * while CMD ran) needs nothing and is not an error. */
static void tsr__release(const tsr_cli_globals_t *g, uint64_t id) {
  tsr_json_writer_t w = {0};
  tsr_proto_id_write(&w, TSR_PROTO_LEASE_RELEASE, id);
  tsr_status_t st = tsr__lease_request(g, &w);
  if (st && tsr_status_code(st) != TSR_NOT_FOUND)
    tsr_cli_error("lease %llu was not released (%s); it ends at its deadline", (unsigned long long)id,
                  tsr_status_message(st));
  tsr_status_free(st);
}

/* Renews the lease `run` created to `span_ns` from now. False when it was
 * not renewed; *out_gone when it has ended (expired, say), so that there is
 * nothing left to renew. Said on stderr once (`*warned`). */
static bool tsr__renew(const tsr_cli_globals_t *g, uint64_t id, uint64_t span_ns, bool *out_gone, bool *warned) {
  tsr_json_writer_t w = {0};
  tsr_proto_renew_write(&w, &(tsr_proto_renew_t){.id = id, .duration_ns = span_ns});
  tsr_status_t st = tsr__lease_request(g, &w);
  *out_gone = tsr_status_code(st) == TSR_NOT_FOUND;
  if (st && !*warned) {
    tsr_cli_error("lease %llu was not renewed (%s)%s", (unsigned long long)id, tsr_status_message(st),
                  *out_gone ? "" : "; trying again, and it ends at its deadline if that fails");
    *warned = true;
  }
  bool ok = st == NULL;
  tsr_status_free(st);
  return ok;
}

/* Waits for CMD and returns its wait status. With `renew_id` (a lease run
 * created, for `span_ns` at a time), renews it to `span_ns` from now each
 * time half of that has passed, so that it lasts as long as CMD does; a
 * renewal that fails is tried again sooner. SIGCHLD is blocked (the caller
 * blocked it before the fork): it ends the wait at once. */
static int tsr__wait(const tsr_cli_globals_t *g, pid_t pid, uint64_t renew_id, uint64_t span_ns) {
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  uint64_t next = tsr_time_mono_ns() + span_ns / 2;
  bool warned = false;
  for (;;) {
    int status = 0;
    pid_t r = waitpid(pid, &status, renew_id ? WNOHANG : 0);
    if (r == pid) return status;
    if (r < 0 && errno != EINTR) return 127 << 8;
    if (!renew_id) continue; /* a forwarded signal interrupted the wait */
    uint64_t now = tsr_time_mono_ns();
    if (now >= next) {
      bool gone = false;
      bool ok = tsr__renew(g, renew_id, span_ns, &gone, &warned);
      uint64_t retry = span_ns / 8 < 10 * TSR_NS_PER_S ? span_ns / 8 : 10 * TSR_NS_PER_S;
      next = now + (ok ? span_ns / 2 : retry);
      if (gone) renew_id = 0;
      continue;
    }
    uint64_t left = next - now;
    struct timespec ts = {.tv_sec = (time_t)(left / TSR_NS_PER_S), .tv_nsec = (long)(left % TSR_NS_PER_S)};
    sigtimedwait(&chld, NULL, &ts); /* SIGCHLD, the time, or a forwarded signal */
  }
}

#define TSR__RUN_LEASES_MAX 16 /* leases one command runs under (one a GPU) */

/* --lease's value: lease ids, comma separated, each once. False (said
 * on stderr) when it does not read. */
static bool tsr__parse_leases(const char *text, uint64_t *ids, size_t *n) {
  char buf[512];
  if (strlen(text) >= sizeof(buf)) {
    tsr_cli_error("--lease: too long (at most %d lease ids)", TSR__RUN_LEASES_MAX);
    return false;
  }
  snprintf(buf, sizeof(buf), "%s", text);
  *n = 0;
  char *save = NULL;
  for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    uint64_t id = 0;
    tsr_status_t st = tsr_parse_u64(tok, &id);
    if (st || id == 0 || id > TSR_LEASE_ID_MAX) {
      tsr_status_free(st);
      tsr_cli_error("--lease: '%s' is not a lease id", tok);
      return false;
    }
    if (*n == TSR__RUN_LEASES_MAX) {
      tsr_cli_error("--lease: more than %d leases", TSR__RUN_LEASES_MAX);
      return false;
    }
    for (size_t k = 0; k < *n; k++)
      if (ids[k] == id) {
        tsr_cli_error("--lease: lease %llu is named twice", (unsigned long long)id);
        return false;
      }
    ids[(*n)++] = id;
  }
  /* "", ",", "3,": nothing, or an empty name */
  if (*n == 0 || text[0] == ',' || text[strlen(text) - 1] == ',' || strstr(text, ",,")) {
    tsr_cli_error("--lease: '%s' is not a list of lease ids (3, or 3,4)", text);
    return false;
  }
  return true;
}

int tsr_cli_run_main(const tsr_cli_globals_t *g, int argc, char **argv) {
  static const struct option opts[] = {{"lease", required_argument, NULL, 'l'},
                                       {"device", required_argument, NULL, 'd'},
                                       {"mem", required_argument, NULL, 'm'},
                                       {"for", required_argument, NULL, 'f'},
                                       {"sm", required_argument, NULL, 's'},
                                       {"policy", required_argument, NULL, 'p'},
                                       {"on-expiry", required_argument, NULL, 'e'},
                                       {"api", required_argument, NULL, 'a'},
                                       {"over-limit", required_argument, NULL, 'o'},
                                       {"wait", required_argument, NULL, 'w'},
                                       {"help", no_argument, NULL, 'h'},
                                       {NULL, 0, NULL, 0}};
  const char *lease = NULL, *policy = NULL, *api = "auto";
  tsr_cli_lease_options_t o = {0}; /* a lease to create */
  int c;
  opterr = 0;
  /* '+': options end at the command (or at "--") */
  while ((c = getopt_long(argc, argv, "+:h", opts, NULL)) != -1) {
    switch (c) {
      case 'l': lease = optarg; break;
      case 'd': o.device = optarg; break;
      case 'm': o.mem = optarg; break;
      case 'f': o.dur = optarg; break;
      case 's': o.sm = optarg; break;
      case 'p': policy = optarg; break;
      case 'e': o.on_expiry = optarg; break;
      case 'o': o.over_limit = optarg; break;
      case 'w': o.wait = optarg; break;
      case 'a': api = optarg; break;
      case 'h': printf("%s", tsr__run_usage); return TSR_EXIT_OK;
      default: return tsr_cli_option_error(c, argv);
    }
  }
  if (optind >= argc) {
    tsr_cli_error("run needs a command after the options, e.g. tessera run --lease 3 -- python train.py");
    return TSR_EXIT_USAGE;
  }
  bool create = o.device || o.mem || o.dur || o.sm || o.on_expiry || o.over_limit || o.wait;
  if (lease && create) {
    tsr_cli_error("give --lease, or --device/--mem/--for to create one, not both");
    return TSR_EXIT_USAGE;
  }
  if (!lease && !(o.device && o.mem && o.dur)) {
    tsr_cli_error("run needs --lease ID, or --device, --mem and --for (try --help)");
    return TSR_EXIT_USAGE;
  }
  if (policy && strcmp(policy, "pass") != 0 && strcmp(policy, "deny") != 0) {
    tsr_cli_error("--policy: '%s' is neither pass nor deny", policy);
    return TSR_EXIT_USAGE;
  }
  if (strcmp(api, "auto") != 0 && strcmp(api, "cuda") != 0 && strcmp(api, "opencl") != 0 && strcmp(api, "both") != 0) {
    tsr_cli_error("--api: '%s' is none of auto, cuda, opencl, both", api);
    return TSR_EXIT_USAGE;
  }

  /* the leases: the one to create, or those of --lease */
  uint64_t ids[TSR__RUN_LEASES_MAX];
  size_t nids = 0;
  if (lease && !tsr__parse_leases(lease, ids, &nids)) return TSR_EXIT_USAGE;
  if (!lease) nids = 1;
  tsr_lease_t leases[TSR__RUN_LEASES_MAX];
  uint64_t made = 0; /* the lease run created, once the daemon said which */
  char region_dir[sizeof(((tsr_proto_lease_usage_t *)0)->region)] = "";
  tsr_json_writer_t w = {0};
  int rc = TSR_EXIT_OK;
  for (size_t i = 0; i < nids && !rc; i++) {
    if (lease) {
      tsr_proto_id_write(&w, TSR_PROTO_LEASE_SHOW, ids[i]);
    } else {
      rc = tsr_cli_lease_create_request(g, &o, &w);
    }
    tsr_lease_t *l = &leases[i];
    tsr_proto_lease_usage_t usage;
    bool has_usage = false;
    if (!rc) rc = tsr_cli_lease_fetch(g, &w, l, &usage, &has_usage);
    tsr_json_writer_free(&w);
    if (rc) break;
    if (create) made = l->id;
    if (l->state != TSR_LEASE_ACTIVE || (lease && l->owner_uid != getuid())) {
      tsr_cli_error("lease %llu is %s", (unsigned long long)l->id,
                    l->state != TSR_LEASE_ACTIVE ? "not active" : "not yours");
      rc = TSR_EXIT_REFUSED;
      break;
    }
    if (!has_usage) {
      tsr_cli_error("the daemon keeps no shared region for lease %llu (an older tesserad?)", (unsigned long long)l->id);
      rc = TSR_EXIT_INTERNAL;
      break;
    }
    for (size_t k = 0; k < i; k++)
      if (leases[k].device == l->device) {
        tsr_cli_error("--lease: leases %llu and %llu are both on device %u: give one a GPU",
                      (unsigned long long)leases[k].id, (unsigned long long)l->id, l->device);
        rc = TSR_EXIT_USAGE;
      }
    if (rc) break;
    char dir[sizeof(usage.region)];
    snprintf(dir, sizeof(dir), "%s", usage.region);
    char *slash = strrchr(dir, '/');
    if (slash && slash != dir) *slash = '\0';
    if (i == 0)
      snprintf(region_dir, sizeof(region_dir), "%s", dir);
    else if (strcmp(dir, region_dir) != 0) { /* one TESSERA_REGION_DIR names them all */
      tsr_cli_error("leases %llu and %llu keep their regions in different directories",
                    (unsigned long long)leases[0].id, (unsigned long long)l->id);
      rc = TSR_EXIT_INTERNAL;
    }
  }
  if (rc) {
    if (made) tsr__release(g, made);
    return rc;
  }
  const tsr_lease_t *first = &leases[0];

  /* the shims: by the device's kind unless --api says */
  /* (auto: CUDA's shim when any of the leases is on a CUDA device) */
  bool any_cuda = false;
  for (size_t i = 0; i < nids && strcmp(api, "auto") == 0 && !any_cuda; i++) {
    char kind[16];
    tsr__device_kind(g, leases[i].device, kind, sizeof(kind));
    any_cuda = strcmp(kind, "opencl") != 0;
  }
  bool want_cuda = strcmp(api, "cuda") == 0 || strcmp(api, "both") == 0 || (strcmp(api, "auto") == 0 && any_cuda);
  bool want_opencl = strcmp(api, "cuda") != 0;
  char shims[2 * PATH_MAX + 2] = "", shim[PATH_MAX];
  if (want_cuda) {
    if (!tsr__find_shim("TESSERA_SHIM", "libtessera-cuda.so", shim, sizeof(shim))) {
      tsr_cli_error("libtessera-cuda.so not found (looked at %s; set TESSERA_SHIM)", shim);
      if (create) tsr__release(g, first->id);
      return TSR_EXIT_INTERNAL;
    }
    snprintf(shims, sizeof(shims), "%s", shim);
  }
  if (want_opencl) {
    bool found = tsr__find_shim("TESSERA_OPENCL_SHIM", "libtessera-opencl.so", shim, sizeof(shim));
    if (!found && (strcmp(api, "auto") != 0 || !want_cuda)) {
      tsr_cli_error("libtessera-opencl.so not found (looked at %s; set TESSERA_OPENCL_SHIM)", shim);
      if (create) tsr__release(g, first->id);
      return TSR_EXIT_INTERNAL;
    }
    /* auto on a CUDA device: OpenCL is governed where its shim was built */
    if (found) {
      size_t len = strlen(shims);
      snprintf(shims + len, sizeof(shims) - len, "%s%s", len ? ":" : "", shim);
    }
  }

  /* this process becomes a root of each lease before CMD exists: CMD's
   * whole tree is the leases' from its first instruction */
  for (size_t i = 0; i < nids && !rc; i++) {
    tsr_proto_id_write(&w, TSR_PROTO_LEASE_ATTACH, leases[i].id);
    tsr_cli_reply_t attach = {0};
    rc = tsr_cli_call(g, &w, &attach);
    tsr_cli_reply_close(&attach);
    tsr_json_writer_free(&w);
  }
  if (rc) {
    if (create) tsr__release(g, first->id);
    return rc;
  }

  /* the environment the shim reads: TESSERA_LEASE lists the leases */
  char id_text[TSR__RUN_LEASES_MAX * 21], preload[3 * PATH_MAX + 3];
  id_text[0] = '\0';
  for (size_t i = 0; i < nids; i++) {
    size_t used = strlen(id_text);
    snprintf(id_text + used, sizeof(id_text) - used, "%s%llu", i ? "," : "", (unsigned long long)leases[i].id);
  }
  const char *old = getenv("LD_PRELOAD");
  if (old && *old)
    snprintf(preload, sizeof(preload), "%s:%.*s", shims, PATH_MAX, old);
  else
    snprintf(preload, sizeof(preload), "%s", shims);

  struct sigaction sa = {0};
  sa.sa_handler = tsr__forward;
  sigemptyset(&sa.sa_mask);
  static const int forwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
  for (size_t i = 0; i < sizeof(forwarded) / sizeof(forwarded[0]); i++) sigaction(forwarded[i], &sa, NULL);

  /* SIGCHLD held, so that the wait (renewing the lease meanwhile) sees CMD
   * end at once; CMD gets the mask as it was */
  sigset_t chld, mask;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  sigprocmask(SIG_BLOCK, &chld, &mask);
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) {
    tsr_cli_error("fork: %s", strerror(errno));
    sigprocmask(SIG_SETMASK, &mask, NULL);
    if (create) tsr__release(g, first->id);
    return TSR_EXIT_INTERNAL;
  }
  if (pid == 0) {
    sigprocmask(SIG_SETMASK, &mask, NULL);
    struct sigaction dfl = {0};
    dfl.sa_handler = SIG_DFL;
    for (size_t i = 0; i < sizeof(forwarded) / sizeof(forwarded[0]); i++) sigaction(forwarded[i], &dfl, NULL);
    setenv("LD_PRELOAD", preload, 1);
    setenv("TESSERA_LEASE", id_text, 1);
    setenv("TESSERA_REGION_DIR", region_dir, 1);
    if (policy) setenv("TESSERA_POLICY", policy, 1);
    execvp(argv[optind], argv + optind);
    fprintf(stderr, "tessera: cannot run %s: %s\n", argv[optind], strerror(errno));
    _exit(errno == ENOENT ? 127 : 126);
  }
  tsr__child_pid = pid;
  uint64_t span = tsr_time_sub_sat(first->deadline_wall_ns, first->start_wall_ns);
  int status = tsr__wait(g, pid, create ? first->id : 0, span);
  tsr__child_pid = 0;
  sigprocmask(SIG_SETMASK, &mask, NULL);
  if (create) tsr__release(g, first->id);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WIFEXITED(status) ? WEXITSTATUS(status) : TSR_EXIT_INTERNAL;
}
