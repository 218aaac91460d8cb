/* demo.c: `tessera demo`: a private daemon in a temporary state directory,
 * the devices, a few leases (one refused), one that expires, the audit log,
 * then a clean stop. What `make demo` runs. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/time.h"
#include "cli/cli.h"
#include "device/device.h"

static void tsr__sleep_ms(unsigned ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* Prints "$ tessera ARGS" and runs the command in this process. */
static int tsr__run(const tsr_cli_globals_t *g, const char *line) {
  char buf[256];
  snprintf(buf, sizeof(buf), "%s", line);
  char *argv[16];
  int argc = 0;
  for (char *tok = strtok(buf, " "); tok && argc < 15; tok = strtok(NULL, " ")) argv[argc++] = tok;
  argv[argc] = NULL;
  if (argc == 0) return TSR_EXIT_INTERNAL; /* every line this file runs names a command */
  printf("\n$ tessera %s\n", line);
  fflush(stdout);
  int rc;
  if (!strcmp(argv[0], "lease"))
    rc = tsr_cli_lease_main(g, argc, argv);
  else
    rc = tsr_cli_devices_main(g, argc, argv);
  fflush(stdout);
  fflush(stderr);
  return rc;
}

static bool tsr__wait_for_socket(const char *path, pid_t daemon) {
  for (int i = 0; i < 500; i++) {
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    size_t n = strlen(path);
    if (n >= sizeof(addr.sun_path)) n = sizeof(addr.sun_path) - 1;
    memcpy(addr.sun_path, path, n);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&addr, sizeof(addr)) == 0) {
      close(fd);
      return true;
    }
    if (fd >= 0) close(fd);
    if (waitpid(daemon, NULL, WNOHANG) == daemon) return false;
    tsr__sleep_ms(10);
  }
  return false;
}

static void tsr__cat(const char *path, const char *indent) {
  FILE *f = fopen(path, "r");
  if (!f) return;
  char line[1024];
  while (fgets(line, sizeof(line), f)) printf("%s%s", indent, line);
  fclose(f);
}

int tsr_cli_demo_main(const tsr_cli_globals_t *g, int argc, char **argv) {
  (void)g;
  if (argc > 1) {
    bool help = !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h");
    fprintf(help ? stdout : stderr, "%s",
            "usage: tessera demo\n\n"
            "Starts a private daemon in a temporary directory, shows the devices, creates\n"
            "and lists leases, lets one expire, shows the audit log, and stops the daemon.\n"
            "It needs no root and touches nothing outside the temporary directory.\n");
    return help ? TSR_EXIT_OK : TSR_EXIT_USAGE;
  }
  char tesserad[PATH_MAX];
  int found = tsr_cli_find_tesserad(tesserad, sizeof(tesserad));
  if (found) return found;
  const char *tmp = getenv("TMPDIR");
  char dir[256];
  snprintf(dir, sizeof(dir), "%s/tessera-demo-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(dir)) {
    tsr_cli_error("cannot create a temporary directory: %s", strerror(errno));
    return TSR_EXIT_INTERNAL;
  }
  char conf[300], sock[300], state[300], log[300], audit[300];
  snprintf(conf, sizeof(conf), "%s/tessera.conf", dir);
  snprintf(sock, sizeof(sock), "%s/tessera.sock", dir);
  snprintf(state, sizeof(state), "%s/state", dir);
  snprintf(log, sizeof(log), "%s/tesserad.log", dir);
  snprintf(audit, sizeof(audit), "%s/state/audit.log", dir);

  if (strlen(sock) >= sizeof(((struct sockaddr_un *)0)->sun_path)) {
    tsr_cli_error("the temporary directory %s is too long for a socket path; set TMPDIR=/tmp", dir);
    rmdir(dir);
    return TSR_EXIT_INTERNAL;
  }
  printf("tessera demo: a private daemon in %s\n", dir);
  tsr_device_t *gpus = NULL;
  size_t ngpu = 0;
  tsr_status_t st = tsr_device_discover_nvml(NULL, &gpus, &ngpu);
  free(gpus);
  FILE *f = fopen(conf, "w");
  if (!f) {
    tsr_cli_error("cannot write %s: %s", conf, strerror(errno));
    rmdir(dir);
    return TSR_EXIT_INTERNAL;
  }
  fprintf(f, "[daemon]\nsync = none\nlog_level = warn\n");
  if (!st && ngpu > 0) {
    printf(
        "NVML found %zu GPU(s): the demo leases them (leases only book memory; nothing is\n"
        "allocated on the GPU).\n",
        ngpu);
  } else {
    printf(
        "No GPU found (%s):\nthe demo uses a declared inventory of two GPUs instead, as "
        "/etc/tessera/tessera.conf would declare them.\n",
        st ? tsr_status_message(st) : "NVML sees none");
    fprintf(f,
            "devices = config\n\n[device.0]\nname = Demo GPU A (declared)\nmemory = 80GiB\nsms = 132\n"
            "\n[device.1]\nname = Demo GPU B (declared)\nmemory = 40GiB\nsms = 108\n");
  }
  tsr_status_free(st);
  fclose(f);

  pid_t pid = fork();
  if (pid < 0) {
    tsr_cli_error("fork: %s", strerror(errno));
    unlink(conf);
    rmdir(dir);
    return TSR_EXIT_INTERNAL;
  }
  if (pid == 0) {
    int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      dup2(fd, 2);
      close(fd);
    }
    execl(tesserad, "tesserad", "--config", conf, "--state-dir", state, "--socket", sock, (char *)NULL);
    fprintf(stderr, "cannot run %s: %s\n", tesserad, strerror(errno)); /* into the log */
    _exit(127);
  }
  int rc = TSR_EXIT_OK;
  tsr_cli_globals_t dg = {.socket_path = sock};
  if (!tsr__wait_for_socket(sock, pid)) {
    tsr_cli_error("the demo daemon did not start; its log:");
    tsr__cat(log, "  ");
    rc = TSR_EXIT_INTERNAL;
    goto stop;
  }
  printf("tesserad is up (pid %d).\n", (int)pid);
  tsr__run(&dg, "devices");
  tsr__run(&dg, "lease create --device 0 --mem 50% --for 2h");
  tsr__run(&dg, "lease create --device 0 --mem 25% --for 3s --sm 30%");
  printf("# 75%% of device 0 is now held, so 40%% more does not fit:\n");
  if (tsr__run(&dg, "lease create --device 0 --mem 40% --for 1h") != TSR_EXIT_REFUSED) {
    tsr_cli_error("the over-commit was not refused");
    rc = TSR_EXIT_INTERNAL;
  }
  tsr__run(&dg, "lease list");
  printf(
      "\n# lease 2 ends 3 s after it began; the daemon's deadline timer releases it\n"
      "# within milliseconds (no polling). Waiting...\n");
  fflush(stdout);
  tsr__sleep_ms(3300);
  tsr__run(&dg, "lease show 2");
  tsr__run(&dg, "lease release 1");
  tsr__run(&dg, "devices");
  printf("\n# the audit log (%s):\n", audit);
  tsr__cat(audit, "  ");
stop:
  kill(pid, SIGTERM);
  int status = 0;
  waitpid(pid, &status, 0);
  if (rc == TSR_EXIT_OK && (!WIFEXITED(status) || WEXITSTATUS(status) != 0)) {
    if (WIFSIGNALED(status))
      tsr_cli_error("the demo daemon was killed by signal %d instead of stopping; its log:", WTERMSIG(status));
    else
      tsr_cli_error("the demo daemon stopped with status %d; its log:", WEXITSTATUS(status));
    tsr__cat(log, "  ");
    rc = TSR_EXIT_INTERNAL;
  }
  char cmd[400];
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
  if (system(cmd) != 0) tsr_cli_error("could not remove %s", dir);
  if (rc == TSR_EXIT_OK) printf("\ndaemon stopped, %s removed. Demo done.\n", dir);
  return rc;
}
