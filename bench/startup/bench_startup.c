/* bench_startup: what preloading the shims costs a process that never
 * touches a GPU (issue: "node-wide mode harmless").
 *
 * In the node-wide mode /etc/ld.so.preload puts the shims into every process
 * on the node: every shell, every `ls`, every cron job. This program starts
 * a command many times, in turns plain, with the two shims preloaded apart
 * (libtessera-cuda.so and libtessera-opencl.so), and with both in one
 * object (libtessera-preload.so, what the node-wide mode lists), through
 * LD_PRELOAD (the dynamic loader maps, relocates and initialises a library
 * named there exactly as one named in /etc/ld.so.preload), and prints the
 * wall time from spawn to exit of each: p10, p50, p90, and the p50
 * difference from the plain runs, which the target bounds (both shims
 * together: at most 50 us at p50 on /bin/true). With --empty SO (a shared
 * object with nothing in it) it also shows what loading any library costs.
 *
 *   bench_startup [--runs N] [--cuda SO] [--opencl SO] [--preload SO] [--empty SO]
 *                 [--] [COMMAND ARGS...]
 *
 * Defaults: 3000 runs of each, /bin/true, the shims of the build (lib/
 * beside this program's bench/). The turns alternate so that a slow moment
 * of the machine falls on every side alike. The environment is the same on
 * every side but for LD_PRELOAD; TESSERA_* variables are removed, as in a
 * login shell of a user with no lease. */
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_record.h"

extern char **environ;

static uint64_t tsr__now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int tsr__cmp(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* A command named without a slash, looked up in PATH as a shell would, into
 * out; false when no executable of that name is found. */
static bool tsr__which(const char *name, char *out, size_t cap) {
  if (strchr(name, '/')) return snprintf(out, cap, "%s", name) < (int)cap && access(out, X_OK) == 0;
  const char *path = getenv("PATH");
  for (const char *p = path ? path : "/usr/bin:/bin";; p++) {
    const char *end = strchr(p, ':');
    size_t n = end ? (size_t)(end - p) : strlen(p);
    int w = n ? snprintf(out, cap, "%.*s/%s", (int)n, p, name) : snprintf(out, cap, "./%s", name);
    if (w > 0 && (size_t)w < cap && access(out, X_OK) == 0) return true;
    if (!end) return false;
    p = end;
  }
}

/* One run of argv under envp: its wall time in ns, or 0 if it failed. */
static uint64_t tsr__run(char *const argv[], char *const envp[]) {
  pid_t pid;
  uint64_t t0 = tsr__now_ns();
  if (posix_spawn(&pid, argv[0], NULL, NULL, argv, envp) != 0) return 0;
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  uint64_t t = tsr__now_ns() - t0;
  return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? t : 0;
}

/* The environment without TESSERA_* and LD_PRELOAD, plus `preload` if any. */
static char **tsr__env(const char *preload) {
  size_t n = 0;
  while (environ[n]) n++;
  char **e = calloc(n + 2, sizeof(*e));
  if (!e) return NULL;
  size_t k = 0;
  for (size_t i = 0; i < n; i++)
    if (strncmp(environ[i], "TESSERA_", 8) != 0 && strncmp(environ[i], "LD_PRELOAD=", 11) != 0) e[k++] = environ[i];
  if (preload) {
    size_t len = strlen(preload) + 12;
    e[k] = malloc(len);
    if (!e[k]) return NULL;
    snprintf(e[k], len, "LD_PRELOAD=%s", preload);
    k++;
  }
  e[k] = NULL;
  return e;
}

static void tsr__print(const char *what, uint64_t *v, size_t n) {
  qsort(v, n, sizeof(*v), tsr__cmp);
  printf("%-28s p10 %8.1f us   p50 %8.1f us   p90 %8.1f us   (%zu runs)\n", what, v[n / 10] / 1e3, v[n / 2] / 1e3,
         v[n * 9 / 10] / 1e3, n);
}

int main(int argc, char **argv) {
  long runs = 3000;
  char cuda[PATH_MAX] = "", opencl[PATH_MAX] = "", preload[PATH_MAX] = "", empty[PATH_MAX] = "";
  int i = 1;
  for (; i < argc; i++) {
    if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc) {
      char *end = NULL;
      runs = strtol(argv[++i], &end, 10);
      if (!end || *end || runs < 10 || runs > 10000000) {
        fprintf(stderr, "bench_startup: --runs takes a count from 10 to 10000000\n");
        return 2;
      }
    } else if (strcmp(argv[i], "--cuda") == 0 && i + 1 < argc) {
      snprintf(cuda, sizeof(cuda), "%s", argv[++i]);
    } else if (strcmp(argv[i], "--opencl") == 0 && i + 1 < argc) {
      snprintf(opencl, sizeof(opencl), "%s", argv[++i]);
    } else if (strcmp(argv[i], "--preload") == 0 && i + 1 < argc) {
      snprintf(preload, sizeof(preload), "%s", argv[++i]);
    } else if (strcmp(argv[i], "--empty") == 0 && i + 1 < argc) {
      snprintf(empty, sizeof(empty), "%s", argv[++i]);
    } else if (strcmp(argv[i], "--help") == 0) {
      printf(
          "usage: bench_startup [--runs N] [--cuda SO] [--opencl SO] [--preload SO] [--empty SO]\n"
          "                     [--] [COMMAND ARGS...]\n"
          "Starts COMMAND (default /bin/true) N times (default 3000) plain, N times with the\n"
          "two shims preloaded apart and N times with libtessera-preload.so (both in one), in\n"
          "turns, and prints the wall time of each; --empty SO adds a side with an empty\n"
          "shared object preloaded.\n");
      return 0;
    } else if (strcmp(argv[i], "--") == 0) {
      i++;
      break;
    } else if (argv[i][0] == '-') {
      fprintf(stderr, "bench_startup: unknown option '%s' (try --help)\n", argv[i]);
      return 2;
    } else {
      break;
    }
  }
  char *deflt[] = {"/bin/true", NULL};
  char **cmd = i < argc ? &argv[i] : deflt;
  { /* the build's: <build>/bench/this -> <build>/lib/ */
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n <= 0) return 1;
    self[n] = '\0';
    const char *dir = dirname(dirname(self));
    if (!cuda[0]) snprintf(cuda, sizeof(cuda), "%s/lib/libtessera-cuda.so", dir);
    if (!opencl[0]) snprintf(opencl, sizeof(opencl), "%s/lib/libtessera-opencl.so", dir);
    if (!preload[0]) snprintf(preload, sizeof(preload), "%s/lib/libtessera-preload.so", dir);
  }
  const char *need[] = {cuda, opencl, preload, empty[0] ? empty : cuda};
  for (size_t k = 0; k < 4; k++)
    if (access(need[k], R_OK) != 0) {
      fprintf(stderr, "bench_startup: cannot read %s\n", need[k]);
      return 1;
    }
  static char exe[PATH_MAX];
  if (!tsr__which(cmd[0], exe, sizeof(exe))) {
    fprintf(stderr, "bench_startup: cannot run %s (not an executable, nor found in PATH)\n", cmd[0]);
    return 1;
  }
  cmd[0] = exe;
  char both[2 * PATH_MAX + 2];
  snprintf(both, sizeof(both), "%s:%s", cuda, opencl);
  struct {
    const char *name;
    char **env;
    uint64_t *t;
  } side[4] = {{"plain", tsr__env(NULL), NULL},
               {"both shims, apart", tsr__env(both), NULL},
               {"libtessera-preload.so", tsr__env(preload), NULL},
               {"an empty library", empty[0] ? tsr__env(empty) : NULL, NULL}};
  size_t nside = empty[0] ? 4 : 3;
  for (size_t s = 0; s < nside; s++) {
    side[s].t = calloc((size_t)runs, sizeof(uint64_t));
    if (!side[s].env || !side[s].t) return 1;
  }
  for (long k = 0; k < 50; k++) tsr__run(cmd, side[k % nside].env); /* warm the page cache */
  for (long k = 0; k < runs; k++)
    for (size_t s = 0; s < nside; s++) {
      side[s].t[k] = tsr__run(cmd, side[s].env);
      if (!side[s].t[k]) {
        fprintf(stderr, "bench_startup: %s failed (run %ld, %s)\n", cmd[0], k, side[s].name);
        return 1;
      }
    }
  printf("bench_startup: %s, %ld runs each, in turns\n", cmd[0], runs);
  for (size_t s = 0; s < nside; s++) tsr__print(side[s].name, side[s].t, (size_t)runs);
  uint64_t base = side[0].t[runs / 2];
  for (size_t s = 1; s < nside; s++)
    printf("added by %-21s %+7.1f us at p50%s\n", side[s].name, ((double)side[s].t[runs / 2] - (double)base) / 1e3,
           s == 2 ? " (the node-wide mode; target: at most +50 us on /bin/true)" : "");
  for (size_t s = 0; s < nside; s++) { /* each side's times are sorted (tsr__print) */
    const uint64_t *v = side[s].t;
    tsr_bench_record_t *rec = tsr_bench_record_begin("startup", "%s", side[s].name);
    tsr_bench_record_figure(rec, (double)v[runs / 10], "p10_ns");
    tsr_bench_record_figure(rec, (double)v[runs / 2], "p50_ns");
    tsr_bench_record_figure(rec, (double)v[runs * 9 / 10], "p90_ns");
    if (s > 0) tsr_bench_record_figure(rec, (double)v[runs / 2] - (double)base, "added_p50_ns");
    tsr_bench_record_figure(rec, (double)runs, "runs");
    tsr_bench_record_end(rec, s == 2 ? "added p50 <= 50 us on /bin/true" : NULL, NULL);
  }
  return 0;
}
