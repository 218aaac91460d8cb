/* main.c: tesserad start-up and shutdown.
 *
 * Order: options -> configuration -> devices -> the state directory's lock
 * (one daemon per state directory) -> leases restored from lock files -> audit
 * log -> regions -> signal actions and the backstop -> socket -> /metrics ->
 * event loop; one shutdown path (tsr__shutdown) closes whatever was reached.
 * Any failure before the loop is one clear line on stderr and exit status 1,
 * with nothing changed on disk. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "base/fs.h"
#include "base/log.h"
#include "base/time.h"
#include "base/units.h"
#include "daemon/actions.h"
#include "daemon/audit.h"
#include "daemon/backstop.h"
#include "daemon/config.h"
#include "daemon/daemon.h"
#include "daemon/enforce.h"
#include "daemon/identity.h"
#include "daemon/lifecycle.h"
#include "daemon/main.h"
#include "daemon/metrics.h"
#include "daemon/metrics_http.h"
#include "daemon/procs.h"
#include "daemon/regions.h"
#include "daemon/roots.h"
#include "daemon/server.h"
#include "daemon/userindex.h"
#include "proto/proto.h"

static void tsr__usage(FILE *out) {
  fprintf(out,
          "usage: tesserad [options]        (also: tessera daemon [options])\n"
          "\n"
          "The tessera node daemon: holds the node's GPU leases, expires them on time,\n"
          "and serves the `tessera` command over a Unix socket.\n"
          "\n"
          "options:\n"
          "  --config FILE       configuration file (default " TSR_DEFAULT_CONFIG
          "; a missing\n"
          "                      default is fine, a missing FILE is an error)\n"
          "  --state-dir DIR     lock files, id counter, audit log (default " TSR_DEFAULT_STATE_DIR
          ")\n"
          "  --socket PATH       where clients connect (default " TSR_PROTO_DEFAULT_SOCKET
          ")\n"
          "  --devices WHERE     auto (NVML, else the config's [device.N]), nvml, or config\n"
          "  --sync MODE         full (fsync every change; survives power loss) or none\n"
          "                      (atomic renames only; survives a killed daemon)\n"
          "  --log-level LEVEL   error, warn, info (default) or debug\n"
          "  --nvml-library PATH load NVML from PATH instead of libnvidia-ml.so.1\n"
          "  --metrics ADDR      serve Prometheus metrics at http://ADDR/metrics (HOST:PORT,\n"
          "                      default " TSR_METRICS_DEFAULT
          "), or off; with --state-dir\n"
          "                      only when this option or the file asks\n"
          "  --check             load everything, print the devices, and exit\n"
          "  --help, --version\n"
          "\n"
          "Options override the configuration file. Run as root on a node (state in\n" TSR_DEFAULT_STATE_DIR
          ", socket in /run/tessera), or as any user with\n"
          "--state-dir and --socket.\n");
}

/* ---- options ------------------------------------------------------------- */

/* What the command line says; NULL (false): not given. */
typedef struct {
  const char *config_path, *state_dir, *socket_path, *devices, *sync, *log_level, *nvml_library, *metrics;
  bool check;
} tsr__options_t;

#define TSR__START (-1) /* tsr__options_parse: no exit status, start the daemon */

/* Reads the options into *o. Returns TSR__START, or the exit status when
 * there is nothing to start (--help, --version: 0; a bad option: 2). */
static int tsr__options_parse(int argc, char **argv, tsr__options_t *o) {
  *o = (tsr__options_t){0};
  static const struct option opts[] = {
      {"config", required_argument, NULL, 'c'},
      {"state-dir", required_argument, NULL, 'd'},
      {"socket", required_argument, NULL, 's'},
      {"devices", required_argument, NULL, 'D'},
      {"sync", required_argument, NULL, 'y'},
      {"log-level", required_argument, NULL, 'l'},
      {"nvml-library", required_argument, NULL, 'n'},
      {"check", no_argument, NULL, 'k'},
      {"metrics", required_argument, NULL, 'm'},
      {"help", no_argument, NULL, 'h'},
      {"version", no_argument, NULL, 'V'},
      {NULL, 0, NULL, 0},
  };
  int opt;
  while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    switch (opt) {
      case 'c': o->config_path = optarg; break;
      case 'd': o->state_dir = optarg; break;
      case 's': o->socket_path = optarg; break;
      case 'D': o->devices = optarg; break;
      case 'y': o->sync = optarg; break;
      case 'l': o->log_level = optarg; break;
      case 'n': o->nvml_library = optarg; break;
      case 'm': o->metrics = optarg; break;
      case 'k': o->check = true; break;
      case 'h': tsr__usage(stdout); return 0;
      case 'V': printf("tesserad %s\n", TESSERA_VERSION); return 0;
      default: fprintf(stderr, "tesserad: try --help\n"); return 2;
    }
  }
  if (optind < argc) {
    fprintf(stderr, "tesserad: unexpected argument '%s' (try --help)\n", argv[optind]);
    return 2;
  }
  return TSR__START;
}

/* Relative paths on the command line are taken from the current directory. */
TSR_MUST_USE static tsr_status_t tsr__options_absolute(tsr__options_t *o) {
  static char abs_state[PATH_MAX], abs_socket[PATH_MAX];
  bool state_relative = o->state_dir && o->state_dir[0] != '/';
  bool socket_relative = o->socket_path && o->socket_path[0] != '/';
  if (!state_relative && !socket_relative) return NULL;
  char cwd[PATH_MAX];
  if (!getcwd(cwd, sizeof(cwd)))
    return tsr_status_from_errno(errno,
                                 "relative --state-dir or --socket, but the current "
                                 "directory is unknown; give absolute paths");
  if (state_relative) {
    if ((size_t)snprintf(abs_state, sizeof(abs_state), "%s/%s", cwd, o->state_dir) >= sizeof(abs_state))
      return tsr_status_make(TSR_INVALID_ARGUMENT, "--state-dir path is too long");
    o->state_dir = abs_state;
  }
  if (socket_relative) {
    if ((size_t)snprintf(abs_socket, sizeof(abs_socket), "%s/%s", cwd, o->socket_path) >= sizeof(abs_socket))
      return tsr_status_make(TSR_INVALID_ARGUMENT, "--socket path is too long");
    o->socket_path = abs_socket;
  }
  return NULL;
}

/* Whether a value that becomes a configuration line holds a line break. */
static bool tsr__options_break_lines(const tsr__options_t *o) {
  const char *values[] = {o->state_dir, o->socket_path, o->devices, o->sync, o->log_level, o->metrics};
  for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++)
    if (values[i] && strpbrk(values[i], "\n\r")) return true;
  return false;
}

/* ---- signals ------------------------------------------------------------- */

/* Blocks the signals the event loop takes through its signalfd (*out_mask)
 * now, before anything (NVML) can start threads: threads inherit the mask,
 * and a thread with SIGTERM unblocked would let it kill the process
 * outright. */
static void tsr__signals_block(sigset_t *out_mask) {
  sigemptyset(out_mask);
  sigaddset(out_mask, SIGTERM);
  sigaddset(out_mask, SIGINT);
  sigaddset(out_mask, SIGHUP);
  pthread_sigmask(SIG_BLOCK, out_mask, NULL);
  /* Their default actions, whatever the parent left: an ignored SIGTERM is
   * inherited across exec, and one that comes while start-up has it
   * unblocked (tsr__signals_let_stop) would be thrown away instead of ending
   * the daemon. */
  signal(SIGTERM, SIG_DFL);
  signal(SIGINT, SIG_DFL);
  signal(SIGHUP, SIG_DFL);
}

/* Once the devices are found, NVML's threads exist, with the signals
 * blocked. Until the event loop takes them, let SIGTERM and SIGINT end the
 * daemon at once (their default action), so that nothing in start-up can
 * make it ignore them. */
static void tsr__signals_let_stop(void) {
  sigset_t stop_mask;
  sigemptyset(&stop_mask);
  sigaddset(&stop_mask, SIGTERM);
  sigaddset(&stop_mask, SIGINT);
  pthread_sigmask(SIG_UNBLOCK, &stop_mask, NULL);
}

/* ---- configuration and devices ------------------------------------------- */

/* Options may repeat a key the file set: parse them, as the file's own
 * syntax, into a scratch copy and take over only what they set. */
TSR_MUST_USE static tsr_status_t tsr__config_override(tsr_config_t *c, const tsr__options_t *o) {
  static const char *const keys[] = {"state_dir", "socket", "devices", "sync", "log_level", "metrics"};
  const char *values[] = {o->state_dir, o->socket_path, o->devices, o->sync, o->log_level, o->metrics};
  char overrides[4 * PATH_MAX];
  size_t used = (size_t)snprintf(overrides, sizeof(overrides), "[daemon]\n");
  bool any = false;
  for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
    if (!values[i]) continue;
    int n = snprintf(overrides + used, sizeof(overrides) - used, "%s = %s\n", keys[i], values[i]);
    if (n < 0 || (size_t)n >= sizeof(overrides) - used)
      return tsr_status_make(TSR_INVALID_ARGUMENT, "the value of --%s is too long", keys[i]);
    used += (size_t)n;
    any = true;
  }
  if (!any) return NULL;
  tsr_config_t *scratch = calloc(1, sizeof(*scratch));
  if (!scratch) return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory");
  tsr_config_defaults(scratch);
  tsr_status_t st = tsr_config_parse(overrides, "command line", scratch);
  if (!st) {
    if (o->state_dir) memcpy(c->state_dir, scratch->state_dir, sizeof(c->state_dir));
    if (o->socket_path) memcpy(c->socket, scratch->socket, sizeof(c->socket));
    if (o->devices) c->devices_from = scratch->devices_from;
    if (o->sync) c->sync = scratch->sync;
    if (o->log_level) c->log_level = scratch->log_level;
    if (o->metrics) memcpy(c->metrics, scratch->metrics, sizeof(c->metrics));
  }
  free(scratch);
  return st;
}

/* The configuration: the defaults, the file (a missing default file is
 * fine, a missing --config is not), then the options. */
TSR_MUST_USE static tsr_status_t tsr__config_load(tsr_config_t *c, const tsr__options_t *o) {
  tsr_config_defaults(c);
  tsr_status_t st = tsr_config_load(o->config_path ? o->config_path : TSR_DEFAULT_CONFIG, c);
  if (st && !o->config_path && tsr_status_code(st) == TSR_NOT_FOUND) {
    tsr_status_free(st);
    st = NULL;
  }
  TSR_RETURN_IF_ERROR(st);
  return tsr__config_override(c, o);
}

static const char *const tsr__declare_help =
    "declare the node's GPUs in the configuration file (/etc/tessera/tessera.conf or --config), "
    "one section per device, e.g.\n  [device.0]\n  name = NVIDIA H100\n  memory = 80GiB\n  sms = 132";

/* Chooses the device list: NVML, or the config's [device.N]. */
TSR_MUST_USE static tsr_status_t tsr__devices(tsr_config_t *c, const char *nvml_library) {
  if (c->devices_from == TSR_DEVICES_CONFIG) {
    if (c->device_count == 0)
      return tsr_status_make(TSR_FAILED_PRECONDITION, "devices = config, but no device is declared; %s",
                             tsr__declare_help);
    tsr_log_info("using %zu device(s) declared in the configuration", c->device_count);
    return NULL;
  }
  tsr_device_t *found = NULL;
  size_t n = 0;
  tsr_status_t st = tsr_device_discover_nvml(nvml_library, &found, &n);
  if (!st && n > 0) {
    if (n > TSR_CONFIG_MAX_DEVICES) n = TSR_CONFIG_MAX_DEVICES;
    /* NVML's GPUs first, then the declared OpenCL devices (NVML cannot see
     * them), numbered on from NVML's */
    tsr_device_t opencl[TSR_CONFIG_MAX_DEVICES];
    size_t nopencl = 0, unused = 0;
    for (size_t i = 0; i < c->device_count; i++) {
      if (c->devices[i].kind != TSR_DEVICE_KIND_OPENCL)
        unused++;
      else if (n + nopencl < TSR_CONFIG_MAX_DEVICES)
        opencl[nopencl++] = c->devices[i];
    }
    if (unused) tsr_log_info("NVML found %zu GPU(s); %zu declared CUDA device(s) are not used", n, unused);
    memcpy(c->devices, found, n * sizeof(*found));
    for (size_t k = 0; k < nopencl; k++) {
      c->devices[n + k] = opencl[k];
      c->devices[n + k].index = (uint32_t)(n + k);
    }
    c->device_count = n + nopencl;
    free(found);
    tsr_log_info("using %zu GPU(s) found by NVML and %zu declared OpenCL device(s)", n, nopencl);
    return NULL;
  }
  free(found);
  char why[512];
  snprintf(why, sizeof(why), "%s", st ? tsr_status_message(st) : "NVML sees no GPU");
  tsr_status_free(st);
  if (c->devices_from == TSR_DEVICES_NVML)
    return tsr_status_make(TSR_FAILED_PRECONDITION, "devices = nvml, but %s", why);
  if (c->device_count == 0)
    return tsr_status_make(TSR_FAILED_PRECONDITION, "no GPU found (%s) and none declared; %s", why, tsr__declare_help);
  tsr_log_info("no GPU from NVML (%s); using %zu device(s) declared in the configuration", why, c->device_count);
  return NULL;
}

/* --check: the devices as the daemon would serve them. */
static void tsr__devices_print(const tsr_config_t *c) {
  for (size_t i = 0; i < c->device_count; i++) {
    char size[32];
    tsr_format_size(c->devices[i].total_bytes, size, sizeof(size));
    const tsr_device_t *dv = &c->devices[i];
    printf("device %zu: %s, %s (%llu bytes), %u SMs, MIG %s, uuid %s, %s, pci %s, opencl %s (%s)\n", i, dv->name, size,
           (unsigned long long)dv->total_bytes, dv->sm_count, tsr_device_mig_name(dv->mig),
           dv->uuid[0] ? dv->uuid : "-", tsr_device_kind_name(dv->kind), dv->pci[0] ? dv->pci : "-",
           dv->opencl[0] ? dv->opencl : "-", dv->source == TSR_DEVICE_FROM_NVML ? "nvml" : "config");
  }
}

/* ---- the state directory, the leases, the audit log, the regions --------- */

/* Holds an exclusive lock on <state_dir>/tesserad.pid for the daemon's life;
 * the kernel drops it when the process dies, however it dies. The file is
 * opened without following links and must be a regular file (a FIFO there
 * would hang an open that waits for a writer). */
TSR_MUST_USE static tsr_status_t tsr__lock_state_dir(const char *dir, int *out_fd) {
  int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dfd < 0) return tsr_status_from_errno(errno, "open state directory %s", dir);
  int fd;
  tsr_status_t st = tsr_fs_open_regular(dfd, "tesserad.pid", O_RDWR | O_CREAT, 0644, &fd);
  close(dfd);
  if (st) return tsr_status_annotate(st, "state directory %s", dir);
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    char pid[32] = "?";
    ssize_t n = pread(fd, pid, sizeof(pid) - 1, 0);
    if (n > 0) {
      pid[n] = '\0';
      pid[strcspn(pid, "\n")] = '\0';
    }
    close(fd);
    return tsr_status_make(TSR_FAILED_PRECONDITION, "another tesserad (pid %s) already serves state directory %s", pid,
                           dir);
  }
  char buf[32];
  int n = snprintf(buf, sizeof(buf), "%d\n", (int)getpid());
  if (ftruncate(fd, 0) != 0 || pwrite(fd, buf, (size_t)n, 0) != n) {
    /* the lock holds even if the pid note cannot be written */
  }
  *out_fd = fd;
  return NULL;
}

/* The state directory must be this user's alone: whoever else could write
 * there could plant links or FIFOs under names the daemon opens as root.
 * Then its lock: one daemon per state directory. */
TSR_MUST_USE static tsr_status_t tsr__state_dir_open(const tsr_config_t *c, int *out_lock_fd) {
  TSR_RETURN_IF_ERROR(tsr_fs_make_private_dir(c->state_dir, 0755, "state directory"));
  return tsr__lock_state_dir(c->state_dir, out_lock_fd);
}

/* The daemon takes the configuration, and the lease service restores the
 * leases its lock files hold (quarantining what cannot be restored); the
 * daemon's hooks are in place before the first request. */
TSR_MUST_USE static tsr_status_t tsr__leases_recover(tsr_daemon_t *d, const tsr_config_t *c) {
  char host[TSR_LEASE_NAME_MAX] = "localhost";
  if (gethostname(host, sizeof(host)) != 0 || !host[0]) snprintf(host, sizeof(host), "localhost");
  host[sizeof(host) - 1] = '\0';
  tsr_lease_service_config_t lc = {.state_dir = c->state_dir,
                                   .sync = c->sync,
                                   .host = host,
                                   .group_commit = true,
                                   .limits = {.max_duration_ns = c->max_lease_ns,
                                              .min_fraction_ppm = c->min_lease_ppm,
                                              .min_bytes = c->min_lease_bytes,
                                              .max_per_owner = c->max_leases_per_user}};
  tsr_lease_now_t now = {tsr_time_mono_ns(), tsr_time_wall_ns()};
  size_t quarantined = 0;
  d->config = *c;
  d->started_wall_ns = now.wall_ns;
  if (!tsr_waits_init(&d->waits, c->max_queued_per_user)) return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory");
  TSR_RETURN_IF_ERROR(tsr_lease_service_open(&lc, c->devices, c->device_count, now, &d->leases, &quarantined));
  tsr_daemon_lease_hooks(d); /* regions and audit exist before the first request */
  const tsr_lease_table_t *t = tsr_lease_service_table(d->leases);
  tsr_log_info("state %s: %zu lease(s) restored, %zu file(s) quarantined", c->state_dir, tsr_lease_table_count(t),
               quarantined);
  return NULL;
}

/* The audit log: audit_log, else <state_dir>/audit.log. */
TSR_MUST_USE static tsr_status_t tsr__audit_open(tsr_daemon_t *d, const tsr_config_t *c) {
  char audit_path[PATH_MAX];
  if (c->audit_log[0])
    snprintf(audit_path, sizeof(audit_path), "%s", c->audit_log);
  else if ((size_t)snprintf(audit_path, sizeof(audit_path), "%s/audit.log", c->state_dir) >= sizeof(audit_path))
    return tsr_status_make(TSR_INVALID_ARGUMENT, "state directory path is too long");
  tsr_audit_config_t ac = {
      .path = audit_path, .max_bytes = c->audit_max_bytes, .keep = c->audit_keep, .deny_rate = c->audit_deny_rate};
  return tsr_audit_open(&ac, &d->audit);
}

/* One shared region per active lease: kept if a tenant still maps it. Then
 * the files beside them that the shim reads (the lease indexes, the node's
 * policy). The directory: region_dir, else <state_dir>/regions when
 * --state-dir was given, else TSR_DEFAULT_REGION_DIR. */
TSR_MUST_USE static tsr_status_t tsr__regions_open(tsr_daemon_t *d, const tsr_config_t *c, bool state_dir_given) {
  char region_dir[PATH_MAX];
  if (c->region_dir[0])
    snprintf(region_dir, sizeof(region_dir), "%s", c->region_dir);
  else if (!state_dir_given)
    snprintf(region_dir, sizeof(region_dir), "%s", TSR_DEFAULT_REGION_DIR);
  else if ((size_t)snprintf(region_dir, sizeof(region_dir), "%s/regions", c->state_dir) >= sizeof(region_dir))
    return tsr_status_make(TSR_INVALID_ARGUMENT, "state directory path is too long");
  TSR_RETURN_IF_ERROR(tsr_regions_open(region_dir, &d->regions));
  tsr_regions_set_compute(d->regions, c->stream_share_ppm, c->share_burst_ns);
  tsr_regions_on_damage(d->regions, tsr_daemon_region_damaged, d);
  const tsr_lease_table_t *t = tsr_lease_service_table(d->leases);
  for (size_t i = 0; i < tsr_lease_table_count(t); i++) {
    const tsr_lease_t *l = tsr_lease_table_at(t, i);
    TSR_RETURN_IF_ERROR(tsr_regions_add(d->regions, l, tsr_lease_table_device(t, l->device)));
  }
  tsr_regions_sweep(d->regions);
  tsr_user_index_rebuild(tsr_regions_dir_fd(d->regions), t);
  return tsr_node_policy_write(tsr_regions_dir_fd(d->regions), c->policy_deny);
}

/* ---- the backstop -------------------------------------------------------- */

/* The backstop watches GPUs NVML knows; declared devices have no NVML. One
 * that cannot start is logged, and the daemon runs without it. Its context
 * is the daemon's state, which outlives it. */
static void tsr__backstop_open(tsr_daemon_t *d, const char *nvml_library) {
  const tsr_config_t *c = &d->config;
  if (c->backstop_period_ns == 0) {
    tsr_log_info("backstop off (backstop_period = 0)");
    return;
  }
  if (c->device_count == 0 || c->devices[0].source != TSR_DEVICE_FROM_NVML) {
    tsr_log_info("backstop off: the devices are declared, not found by NVML");
    return;
  }
  tsr_backstop_ctx_t ctx = {.devices = c->devices,
                            .device_count = c->device_count,
                            .leases = d->leases,
                            .regions = d->regions,
                            .roots = &d->roots,
                            .actions = d->actions,
                            .audit = d->audit,
                            .acts = &d->counters.backstop_actions,
                            .admin_group = c->admin_group,
                            .over_limit = c->over_limit,
                            .expiry_grace_ns = c->expiry_grace_ns,
                            .policy_deny = c->policy_deny};
  tsr_status_t st = tsr_backstop_open(nvml_library, &ctx, &d->backstop);
  if (st) {
    tsr_log_warn("backstop off: %s", tsr_status_message(st));
    tsr_status_free(st);
  }
}

/* ---- the socket, /metrics, the loop -------------------------------------- */

TSR_MUST_USE static tsr_status_t tsr__mkdir_parent(const char *path) {
  char dir[256];
  snprintf(dir, sizeof(dir), "%s", path);
  char *slash = strrchr(dir, '/');
  if (!slash || slash == dir) return NULL;
  *slash = '\0';
  if (mkdir(dir, 0755) != 0 && errno != EEXIST) return tsr_status_from_errno(errno, "create socket directory %s", dir);
  return NULL;
}

TSR_MUST_USE static tsr_status_t tsr__listen(const tsr_config_t *c, int *out_fd) {
  struct sockaddr_un addr = {.sun_family = AF_UNIX};
  size_t len = strlen(c->socket);
  if (len >= sizeof(addr.sun_path))
    return tsr_status_make(TSR_INVALID_ARGUMENT, "socket path %s is too long", c->socket);
  memcpy(addr.sun_path, c->socket, len + 1);
  TSR_RETURN_IF_ERROR(tsr__mkdir_parent(c->socket));
  /* Someone answering there already? Then refuse; a dead socket file is removed. */
  int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (probe >= 0) {
    if (connect(probe, (struct sockaddr *)&addr, sizeof(addr)) == 0) {
      close(probe);
      return tsr_status_make(TSR_FAILED_PRECONDITION,
                             "a daemon already listens on %s (stop it first, or use another --socket)", c->socket);
    }
    close(probe);
  }
  struct stat st;
  if (lstat(c->socket, &st) == 0) {
    if (!S_ISSOCK(st.st_mode))
      return tsr_status_make(TSR_FAILED_PRECONDITION, "%s exists and is not a socket", c->socket);
    unlink(c->socket);
  }
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return tsr_status_from_errno(errno, "socket");
  /* The socket file gets its mode from the umask at bind: no chmod by path
   * afterwards, which a link swapped in between could redirect. */
  mode_t old_mask = umask(~c->socket_mode & 0777);
  int bound = bind(fd, (struct sockaddr *)&addr, sizeof(addr));
  int bind_err = errno;
  umask(old_mask);
  if (bound != 0) {
    close(fd);
    return tsr_status_from_errno(bind_err, "bind %s", c->socket);
  }
  if (listen(fd, 512) != 0) {
    int err = errno;
    close(fd);
    unlink(c->socket);
    return tsr_status_from_errno(err, "listen on %s", c->socket);
  }
  *out_fd = fd;
  return NULL;
}

/* Each client is one descriptor: max_clients (and the admins' reserve)
 * shrink to what the descriptor limit, raised to its hard limit, leaves. */
static void tsr__clients_fit(tsr_config_t *config) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return;
  if (rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
    getrlimit(RLIMIT_NOFILE, &rl);
  }
  /* keep 64 for files, NVML and the loop, and what /metrics may hold (its
   * connections, those shut down but not yet closed, a batch being let in) */
  const rlim_t reserve = 64 + 2 * TSR_METRICS_CONNECTIONS + 8;
  if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < (rlim_t)config->max_clients + reserve) {
    uint32_t fit = rl.rlim_cur > reserve + 64 ? (uint32_t)(rl.rlim_cur - reserve) : 64;
    tsr_log_warn("max_clients = %u does not fit the file descriptor limit (%llu); using %u", config->max_clients,
                 (unsigned long long)rl.rlim_cur, fit);
    config->max_clients = fit;
    if (config->admin_reserved_clients >= fit) config->admin_reserved_clients = fit / 8;
  }
}

/* The clients' socket, with as many clients as the descriptors allow. */
TSR_MUST_USE static tsr_status_t tsr__server_open(tsr_daemon_t *d, const tsr_config_t *c, int *out_listen_fd) {
  tsr__clients_fit(&d->config);
  TSR_RETURN_IF_ERROR(tsr__listen(c, out_listen_fd));
  tsr_log_info("serving %zu device(s) on %s (sync=%s)", c->device_count, c->socket,
               c->sync == TSR_LEASE_SYNC_FULL ? "full" : "none");
  return NULL;
}

/* /metrics: on by default on a node; a test daemon (--state-dir) serves it
 * only when asked (--metrics, or another address in the file). The default
 * address that cannot listen (the port is taken) is logged; an address that
 * was asked for must work. */
TSR_MUST_USE static tsr_status_t tsr__metrics_start(tsr_daemon_t *d, const tsr_config_t *c, const tsr__options_t *o) {
  bool asked = o->metrics || strcmp(c->metrics, TSR_METRICS_DEFAULT) != 0;
  if (strcmp(c->metrics, "off") == 0 || (o->state_dir && !asked)) return NULL;
  tsr_status_t st = tsr_metrics_start(c, &d->metrics);
  if (st && asked) return st;
  if (st) {
    tsr_log_warn("no /metrics: %s", tsr_status_message(st));
    tsr_status_free(st);
    return NULL;
  }
  tsr_log_info("metrics at http://%s/metrics", c->metrics);
  tsr_daemon_metrics_publish(d, tsr_time_mono_ns());
  return NULL;
}

/* The event loop until SIGTERM or SIGINT; then the socket file goes.
 * Returns the loop's exit status. */
static int tsr__serve(tsr_daemon_t *d, const tsr_config_t *c, int listen_fd, const sigset_t *loop_signals) {
  pthread_sigmask(SIG_BLOCK, loop_signals, NULL); /* from here the loop's signalfd takes them */
  int rc = tsr_server_run(d, listen_fd);
  unlink(c->socket);
  tsr_log_info("stopped");
  return rc;
}

/* ---- start-up and shutdown ----------------------------------------------- */

/* What a run holds, for the one clean-up path (tsr__shutdown). */
typedef struct {
  tsr_config_t *c; /* as loaded: defaults, file, options, devices */
  tsr_daemon_t *d; /* takes a copy of *c when the leases are restored */
  int lock_fd;     /* <state_dir>/tesserad.pid, locked; -1: none */
  int listen_fd;   /* the clients' socket; -1: none */
  int rc;          /* the exit status: 1 until a phase says otherwise */
} tsr__run_t;

/* Start-up, phase by phase in the order at the top of the file, then the
 * loop. A failure is returned (the caller prints it; exit status 1); a run
 * that ends otherwise (the loop stopped, --check, an option value with a
 * line break) leaves its exit status in r->rc. */
TSR_MUST_USE static tsr_status_t tsr__run(tsr__run_t *r, tsr__options_t *o, const sigset_t *loop_signals) {
  r->c = calloc(1, sizeof(*r->c));
  r->d = calloc(1, sizeof(*r->d));
  if (!r->c || !r->d) return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory");
  tsr_config_t *c = r->c;
  tsr_daemon_t *d = r->d;

  TSR_RETURN_IF_ERROR(tsr__options_absolute(o));
  if (tsr__options_break_lines(o)) {
    fprintf(stderr, "tesserad: option values may not contain line breaks\n");
    r->rc = 2;
    return NULL;
  }
  TSR_RETURN_IF_ERROR(tsr__config_load(c, o));
  tsr_log_init("tesserad", (tsr_log_level_t)c->log_level);
  TSR_RETURN_IF_ERROR(tsr__devices(c, o->nvml_library));
  if (o->check) {
    tsr__devices_print(c);
    r->rc = 0;
    return NULL;
  }
  tsr__signals_let_stop();

  TSR_RETURN_IF_ERROR(tsr__state_dir_open(c, &r->lock_fd));
  TSR_RETURN_IF_ERROR(tsr__leases_recover(d, c));
  TSR_RETURN_IF_ERROR(tsr__audit_open(d, c));
  TSR_RETURN_IF_ERROR(tsr__regions_open(d, c, o->state_dir != NULL));
  TSR_RETURN_IF_ERROR(tsr_actions_create(c->expiry_grace_ns, tsr_identity_exempt_fn, c->admin_group, &d->actions));
  tsr__backstop_open(d, o->nvml_library);
  TSR_RETURN_IF_ERROR(tsr__server_open(d, c, &r->listen_fd));
  TSR_RETURN_IF_ERROR(tsr__metrics_start(d, c, o));

  r->rc = tsr__serve(d, c, r->listen_fd, loop_signals);
  return NULL;
}

/* The one clean-up path, whatever the run reached: the socket, /metrics'
 * thread, then each part the daemon holds (every close takes what was never
 * opened), the lease service last; then the state directory's lock. */
static void tsr__shutdown(tsr__run_t *r) {
  if (r->listen_fd >= 0) close(r->listen_fd);
  tsr_daemon_t *d = r->d;
  if (d) {
    tsr_metrics_stop(d->metrics);
    tsr_backstop_close(d->backstop);
    tsr_actions_free(d->actions);
    tsr_procs_free(&d->procs);
    tsr_roots_free(&d->roots);
    tsr_audit_close(d->audit);
    tsr_regions_close(d->regions);
    tsr_lease_service_close(d->leases);
    tsr_waits_free(&d->waits);
  }
  if (r->lock_fd >= 0) close(r->lock_fd);
  free(d);
  free(r->c);
}

int tsr_daemon_main(int argc, char **argv) {
  tsr__options_t o;
  int rc = tsr__options_parse(argc, argv, &o);
  if (rc != TSR__START) return rc;
  tsr_log_init("tesserad", TSR_LOG_INFO);
  sigset_t loop_signals;
  tsr__signals_block(&loop_signals);

  tsr__run_t r = {.lock_fd = -1, .listen_fd = -1, .rc = 1};
  tsr_status_t st = tsr__run(&r, &o, &loop_signals);
  if (st) {
    fprintf(stderr, "tesserad: %s\n", tsr_status_message(st));
    tsr_status_free(st);
    r.rc = 1;
  }
  tsr__shutdown(&r);
  return r.rc;
}
