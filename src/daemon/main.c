/* main.c: tesserad start-up and shutdown.
 *
 * Order: options -> configuration -> devices -> the state directory's lock
 * (one daemon per state directory) -> leases restored from lock files -> audit
 * log -> socket -> event loop. Any failure before the loop is one clear line
 * on stderr and exit status 1, with nothing changed on disk. */
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
#include "daemon/daemon.h"
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

/* Holds an exclusive lock on <state_dir>/tesserad.pid for the daemon's life;
 * the kernel drops it when the process dies, however it dies. The file is
 * opened without following links and must be a regular file (a FIFO there
 * would hang an open that waits for a writer). */
static tsr_status_t tsr__lock_state_dir(const char *dir, int *out_fd) {
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

static tsr_status_t tsr__mkdir_parent(const char *path) {
  char dir[256];
  snprintf(dir, sizeof(dir), "%s", path);
  char *slash = strrchr(dir, '/');
  if (!slash || slash == dir) return NULL;
  *slash = '\0';
  if (mkdir(dir, 0755) != 0 && errno != EEXIST) return tsr_status_from_errno(errno, "create socket directory %s", dir);
  return NULL;
}

static tsr_status_t tsr__listen(const tsr_config_t *c, int *out_fd) {
  struct sockaddr_un addr = {.sun_family = AF_UNIX};
  if (strlen(c->socket) >= sizeof(addr.sun_path))
    return tsr_status_make(TSR_INVALID_ARGUMENT, "socket path %s is too long", c->socket);
  strcpy(addr.sun_path, c->socket);
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

static const char *const tsr__declare_help =
    "declare the node's GPUs in the configuration file (/etc/tessera/tessera.conf or --config), "
    "one section per device, e.g.\n  [device.0]\n  name = NVIDIA H100\n  memory = 80GiB\n  sms = 132";

/* Chooses the device list: NVML, or the config's [device.N]. */
static tsr_status_t tsr__devices(tsr_config_t *c, const char *nvml_library) {
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

int tsr_daemon_main(int argc, char **argv) {
  const char *config_path = NULL, *state_dir = NULL, *socket_path = NULL, *devices = NULL, *sync = NULL,
             *log_level = NULL, *nvml_library = NULL, *metrics = NULL;
  bool check = false;
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
      case 'c': config_path = optarg; break;
      case 'd': state_dir = optarg; break;
      case 's': socket_path = optarg; break;
      case 'D': devices = optarg; break;
      case 'y': sync = optarg; break;
      case 'l': log_level = optarg; break;
      case 'n': nvml_library = optarg; break;
      case 'm': metrics = optarg; break;
      case 'k': check = true; break;
      case 'h': tsr__usage(stdout); return 0;
      case 'V': printf("tesserad %s\n", TESSERA_VERSION); return 0;
      default: fprintf(stderr, "tesserad: try --help\n"); return 2;
    }
  }
  if (optind < argc) {
    fprintf(stderr, "tesserad: unexpected argument '%s' (try --help)\n", argv[optind]);
    return 2;
  }
  tsr_log_init("tesserad", TSR_LOG_INFO);

  /* Block the signals the event loop takes through its signalfd now, before
   * anything (NVML) can start threads: threads inherit the mask, and a
   * thread with SIGTERM unblocked would let it kill the process outright. */
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGTERM);
  sigaddset(&mask, SIGINT);
  sigaddset(&mask, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &mask, NULL);
  /* Their default actions, whatever the parent left: an ignored SIGTERM is
   * inherited across exec, and one that comes while start-up has it
   * unblocked (below) would be thrown away instead of ending the daemon. */
  signal(SIGTERM, SIG_DFL);
  signal(SIGINT, SIG_DFL);
  signal(SIGHUP, SIG_DFL);

  tsr_config_t *c = calloc(1, sizeof(*c));
  tsr_daemon_t *d = calloc(1, sizeof(*d));
  int lock_fd = -1, listen_fd = -1, rc = 1;
  tsr_status_t st = NULL;
  if (!c || !d) {
    st = tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory");
    goto fail;
  }

  /* relative paths on the command line are taken from the current directory */
  static char abs_state[PATH_MAX], abs_socket[PATH_MAX];
  if ((state_dir && state_dir[0] != '/') || (socket_path && socket_path[0] != '/')) {
    char cwd[PATH_MAX];
    if (!getcwd(cwd, sizeof(cwd))) {
      st = tsr_status_from_errno(errno,
                                 "relative --state-dir or --socket, but the current "
                                 "directory is unknown; give absolute paths");
      goto fail;
    }
    if (state_dir && state_dir[0] != '/') {
      if ((size_t)snprintf(abs_state, sizeof(abs_state), "%s/%s", cwd, state_dir) >= sizeof(abs_state)) {
        st = tsr_status_make(TSR_INVALID_ARGUMENT, "--state-dir path is too long");
        goto fail;
      }
      state_dir = abs_state;
    }
    if (socket_path && socket_path[0] != '/') {
      if ((size_t)snprintf(abs_socket, sizeof(abs_socket), "%s/%s", cwd, socket_path) >= sizeof(abs_socket)) {
        st = tsr_status_make(TSR_INVALID_ARGUMENT, "--socket path is too long");
        goto fail;
      }
      socket_path = abs_socket;
    }
  }
  const char *opt_values[] = {state_dir, socket_path, devices, sync, log_level, metrics};
  for (size_t i = 0; i < sizeof(opt_values) / sizeof(opt_values[0]); i++)
    if (opt_values[i] && strpbrk(opt_values[i], "\n\r")) {
      fprintf(stderr, "tesserad: option values may not contain line breaks\n");
      rc = 2;
      goto done;
    }

  /* configuration: file, then options */
  tsr_config_defaults(c);
  st = tsr_config_load(config_path ? config_path : TSR_DEFAULT_CONFIG, c);
  if (st && !config_path && tsr_status_code(st) == TSR_NOT_FOUND) {
    tsr_status_free(st);
    st = NULL;
  }
  if (st) goto fail;
  /* Options may repeat a key the file set: parse them, as the file's own
   * syntax, into a scratch copy and take over only what they set. */
  static const char *const keys[] = {"state_dir", "socket", "devices", "sync", "log_level", "metrics"};
  const char *values[] = {state_dir, socket_path, devices, sync, log_level, metrics};
  char overrides[4 * PATH_MAX];
  size_t used = (size_t)snprintf(overrides, sizeof(overrides), "[daemon]\n");
  bool any = false;
  for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
    if (!values[i]) continue;
    int n = snprintf(overrides + used, sizeof(overrides) - used, "%s = %s\n", keys[i], values[i]);
    if (n < 0 || (size_t)n >= sizeof(overrides) - used) {
      st = tsr_status_make(TSR_INVALID_ARGUMENT, "the value of --%s is too long", keys[i]);
      goto fail;
    }
    used += (size_t)n;
    any = true;
  }
  if (any) {
    tsr_config_t *scratch = calloc(1, sizeof(*scratch));
    if (!scratch) {
      st = tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory");
      goto fail;
    }
    tsr_config_defaults(scratch);
    st = tsr_config_parse(overrides, "command line", scratch);
    if (!st) {
      if (state_dir) memcpy(c->state_dir, scratch->state_dir, sizeof(c->state_dir));
      if (socket_path) memcpy(c->socket, scratch->socket, sizeof(c->socket));
      if (devices) c->devices_from = scratch->devices_from;
      if (sync) c->sync = scratch->sync;
      if (log_level) c->log_level = scratch->log_level;
      if (metrics) memcpy(c->metrics, scratch->metrics, sizeof(c->metrics));
    }
    free(scratch);
    if (st) goto fail;
  }
  tsr_log_init("tesserad", (tsr_log_level_t)c->log_level);

  st = tsr__devices(c, nvml_library);
  if (st) goto fail;
  if (check) {
    for (size_t i = 0; i < c->device_count; i++) {
      char size[32];
      tsr_format_size(c->devices[i].total_bytes, size, sizeof(size));
      const tsr_device_t *dv = &c->devices[i];
      printf("device %zu: %s, %s (%llu bytes), %u SMs, MIG %s, uuid %s, %s, pci %s, opencl %s (%s)\n", i, dv->name,
             size, (unsigned long long)dv->total_bytes, dv->sm_count, tsr_device_mig_name(dv->mig),
             dv->uuid[0] ? dv->uuid : "-", tsr_device_kind_name(dv->kind), dv->pci[0] ? dv->pci : "-",
             dv->opencl[0] ? dv->opencl : "-", dv->source == TSR_DEVICE_FROM_NVML ? "nvml" : "config");
    }
    rc = 0;
    goto done;
  }

  /* NVML's threads exist now, with the signals blocked. Until the event
   * loop takes them, let SIGTERM and SIGINT end the daemon at once (their
   * default action), so that nothing in start-up can make it ignore them. */
  sigset_t stop_mask;
  sigemptyset(&stop_mask);
  sigaddset(&stop_mask, SIGTERM);
  sigaddset(&stop_mask, SIGINT);
  pthread_sigmask(SIG_UNBLOCK, &stop_mask, NULL);

  /* The state directory must be this user's alone: whoever else could write
   * there could plant links or FIFOs under names the daemon opens as root. */
  st = tsr_fs_make_private_dir(c->state_dir, 0755, "state directory");
  if (st) goto fail;
  st = tsr__lock_state_dir(c->state_dir, &lock_fd);
  if (st) goto fail;

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
  st = tsr_lease_service_open(&lc, c->devices, c->device_count, now, &d->leases, &quarantined);
  if (st) goto fail;
  tsr_daemon_lease_hooks(d); /* regions and audit exist before the first request */
  const tsr_lease_table_t *t = tsr_lease_service_table(d->leases);
  tsr_log_info("state %s: %zu lease(s) restored, %zu file(s) quarantined", c->state_dir, tsr_lease_table_count(t),
               quarantined);

  char audit_path[PATH_MAX];
  if (c->audit_log[0])
    snprintf(audit_path, sizeof(audit_path), "%s", c->audit_log);
  else if ((size_t)snprintf(audit_path, sizeof(audit_path), "%s/audit.log", c->state_dir) >= sizeof(audit_path)) {
    st = tsr_status_make(TSR_INVALID_ARGUMENT, "state directory path is too long");
    goto fail;
  }
  tsr_audit_config_t ac = {
      .path = audit_path, .max_bytes = c->audit_max_bytes, .keep = c->audit_keep, .deny_rate = c->audit_deny_rate};
  st = tsr_audit_open(&ac, &d->audit);
  if (st) goto fail;

  /* one shared region per active lease: kept if a tenant still maps it */
  char region_dir[PATH_MAX];
  if (c->region_dir[0])
    snprintf(region_dir, sizeof(region_dir), "%s", c->region_dir);
  else if (state_dir &&
           (size_t)snprintf(region_dir, sizeof(region_dir), "%s/regions", c->state_dir) >= sizeof(region_dir)) {
    st = tsr_status_make(TSR_INVALID_ARGUMENT, "state directory path is too long");
    goto fail;
  } else if (!state_dir) {
    snprintf(region_dir, sizeof(region_dir), "%s", TSR_DEFAULT_REGION_DIR);
  }
  st = tsr_regions_open(region_dir, &d->regions);
  if (st) goto fail;
  tsr_regions_set_compute(d->regions, c->stream_share_ppm, c->share_burst_ns);
  tsr_regions_on_damage(d->regions, tsr_daemon_region_damaged, d);
  for (size_t i = 0; i < tsr_lease_table_count(t); i++) {
    const tsr_lease_t *l = tsr_lease_table_at(t, i);
    st = tsr_regions_add(d->regions, l, tsr_lease_table_device(t, l->device));
    if (st) goto fail;
  }
  tsr_regions_sweep(d->regions);
  tsr_user_index_rebuild(tsr_regions_dir_fd(d->regions), t);
  st = tsr_node_policy_write(tsr_regions_dir_fd(d->regions), c->policy_deny);
  if (st) goto fail;

  st = tsr_actions_create(c->expiry_grace_ns, tsr_identity_exempt_fn, c->admin_group, &d->actions);
  if (st) goto fail;
  /* The backstop watches GPUs NVML knows; declared devices have no NVML. */
  if (c->backstop_period_ns == 0) {
    tsr_log_info("backstop off (backstop_period = 0)");
  } else if (c->device_count == 0 || c->devices[0].source != TSR_DEVICE_FROM_NVML) {
    tsr_log_info("backstop off: the devices are declared, not found by NVML");
  } else {
    tsr_status_t bst = tsr_backstop_open(nvml_library, c->devices, c->device_count, &d->backstop);
    if (bst) {
      tsr_log_warn("backstop off: %s", tsr_status_message(bst));
      tsr_status_free(bst);
    }
  }

  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
    if (rl.rlim_cur < rl.rlim_max) {
      rl.rlim_cur = rl.rlim_max;
      setrlimit(RLIMIT_NOFILE, &rl);
      getrlimit(RLIMIT_NOFILE, &rl);
    }
    /* each client is one descriptor; keep 64 for files, NVML and the loop,
     * and what /metrics may hold (its connections, those shut down but not
     * yet closed, a batch being let in) */
    const rlim_t reserve = 64 + 2 * TSR_METRICS_CONNECTIONS + 8;
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < (rlim_t)d->config.max_clients + reserve) {
      uint32_t fit = rl.rlim_cur > reserve + 64 ? (uint32_t)(rl.rlim_cur - reserve) : 64;
      tsr_log_warn("max_clients = %u does not fit the file descriptor limit (%llu); using %u", d->config.max_clients,
                   (unsigned long long)rl.rlim_cur, fit);
      d->config.max_clients = fit;
      if (d->config.admin_reserved_clients >= fit) d->config.admin_reserved_clients = fit / 8;
    }
  }
  st = tsr__listen(c, &listen_fd);
  if (st) goto fail;
  tsr_log_info("serving %zu device(s) on %s (sync=%s)", c->device_count, c->socket,
               c->sync == TSR_LEASE_SYNC_FULL ? "full" : "none");
  /* /metrics: on by default on a node; a test daemon (--state-dir) serves
   * it only when asked (--metrics, or another address in the file). The
   * default address that cannot listen (the port is taken) is logged; an
   * address that was asked for must work. */
  bool asked = metrics || strcmp(c->metrics, TSR_METRICS_DEFAULT) != 0;
  if (strcmp(c->metrics, "off") != 0 && (!state_dir || asked)) {
    st = tsr_metrics_start(c, &d->metrics);
    if (st && asked) goto fail;
    if (st) {
      tsr_log_warn("no /metrics: %s", tsr_status_message(st));
      tsr_status_free(st);
      st = NULL;
    } else {
      tsr_log_info("metrics at http://%s/metrics", c->metrics);
      tsr_daemon_metrics_publish(d, tsr_time_mono_ns());
    }
  }
  pthread_sigmask(SIG_BLOCK, &mask, NULL); /* from here the loop's signalfd takes them */
  rc = tsr_server_run(d, listen_fd);
  unlink(c->socket);
  tsr_log_info("stopped");
  goto done;
fail:
  fprintf(stderr, "tesserad: %s\n", tsr_status_message(st));
  tsr_status_free(st);
done:
  if (listen_fd >= 0) close(listen_fd);
  if (d) {
    tsr_metrics_stop(d->metrics);
    tsr_backstop_close(d->backstop);
    tsr_actions_free(d->actions);
    tsr_procs_free(&d->procs);
    tsr_roots_free(&d->roots);
    tsr_audit_close(d->audit);
    tsr_regions_close(d->regions);
    tsr_lease_service_close(d->leases);
  }
  if (lock_fd >= 0) close(lock_fd);
  free(d);
  free(c);
  return rc;
}
