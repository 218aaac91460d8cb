/* check.c: the orchestrator and checker of the shim's integration tests.
 * It starts tenants (tenant.c) with the shim preloaded, releases them at
 * once through a pipe, samples the lease's region and the fake driver's
 * device counters while they run, and says what it saw. It never preloads
 * the shim itself. Every wait is bounded.
 *
 *   tsr_shim_check stress TENANT SHIM REGION N KILL DURATION_MS EXTRA SHOW_CMD
 *       N stress tenants for DURATION_MS, KILL of them SIGKILLed at a third
 *       of it; checks that the region's used and the driver's bytes never
 *       pass the limit, every path succeeded and was refused, the killed
 *       tenants' slots are reaped within 2 s, everything comes back (the
 *       region's used, SHOW_CMD's "used_bytes", after exit)
 *   tsr_shim_check start TENANT SHIM|- REGION|- N
 *       N tenants released together: cuInit, a context, one allocation;
 *       checks they all finish within 20 s in distinct slots, the region
 *       counts N processes at once; prints the spread of attach times
 *   tsr_shim_check stale REGION PID BYTES   a slot for PID with another start
 *                                          time (a reused pid) holding BYTES
 *   tsr_shim_check fill REGION PID          every free slot, for PID with
 *                                          another start time
 *   tsr_shim_check stats REGION             "used=N processes=N peak=N ..." */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ctl.h"
#include "fake_cuda_state.h"
#include "region/layout.h"
#include "region/region.h"

static int fails;
#define FAIL(...)        \
  do {                   \
    printf("FAIL: ");    \
    printf(__VA_ARGS__); \
    putchar('\n');       \
    fflush(stdout);      \
    fails++;             \
  } while (0)

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void nap_us(long us) {
  struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
  nanosleep(&ts, NULL);
}

static double ms(uint64_t ns) { return (double)ns / 1e6; }

static tsr_region_t *region_open(const char *path) {
  tsr_region_t *r = NULL;
  tsr_status_t st = tsr_region_open(AT_FDCWD, path, 0, &r);
  if (st) {
    printf("FAIL: %s\n", tsr_status_message(st));
    tsr_status_free(st);
    exit(1);
  }
  return r;
}

static tsr_ctl_t *ctl_create(char *path_out, size_t cap) {
  const char *tmp = getenv("TMPDIR");
  snprintf(path_out, cap, "%s/tsr-shim-ctl-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  int fd = mkstemp(path_out);
  if (fd < 0 || fchmod(fd, 0666) != 0 || ftruncate(fd, sizeof(tsr_ctl_t)) != 0) {
    perror("ctl file");
    exit(1);
  }
  void *p = mmap(NULL, sizeof(tsr_ctl_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) {
    perror("mmap");
    exit(1);
  }
  return p;
}

/* Forks and execs `argv` with the shim preloaded (unless shim is "-"). */
static pid_t spawn(const char *shim, char **argv) {
  pid_t pid = fork();
  if (pid == 0) {
    if (strcmp(shim, "-") != 0)
      setenv("LD_PRELOAD", shim, 1);
    else
      unsetenv("LD_PRELOAD");
    execv(argv[0], argv);
    _exit(127);
  }
  return pid;
}

/* A pipe whose read end children inherit and whose write end they do not:
 * closing the write end here wakes every reader at once. */
static void barrier_pipe(int *out_read, int *out_write) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    perror("pipe");
    exit(1);
  }
  *out_read = dup(fds[0]); /* dup clears close-on-exec */
  close(fds[0]);
  *out_write = fds[1];
}

static bool wait_count(_Atomic uint32_t *v, uint32_t n, uint64_t limit_ns) {
  uint64_t end = now_ns() + limit_ns;
  while (atomic_load(v) < n && now_ns() < end) nap_us(1000);
  return atomic_load(v) >= n;
}

static int exit_status_check(pid_t pid, const char *who) {
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return -1;
  if (WIFSIGNALED(status))
    FAIL("%s %d died of signal %d", who, (int)pid, WTERMSIG(status));
  else if (WEXITSTATUS(status) != 0)
    FAIL("%s %d exited with %d", who, (int)pid, WEXITSTATUS(status));
  return status;
}

/* ---- the sampler ---------------------------------------------------------- */

typedef struct {
  tsr_region_t *r;
  fake_cuda_state_t *fake;
  uint64_t limit;
  _Atomic bool stop;
  _Atomic bool fake_paused; /* while tenants are killed and the fake reaped */
  uint64_t samples, max_used, max_fake, over_used, over_fake, corrupt;
} sampler_t;

static void *sampler_main(void *arg) {
  sampler_t *s = arg;
  while (!atomic_load(&s->stop)) {
    tsr_region_stats_t st;
    tsr_region_stats(s->r, &st);
    s->samples++;
    if (st.used_bytes > s->max_used) s->max_used = st.used_bytes;
    if (st.used_bytes > s->limit) s->over_used++;
    if (st.corrupt) s->corrupt++;
    if (s->fake && !atomic_load(&s->fake_paused)) {
      uint64_t f = fake_cuda_state_used(s->fake, 0);
      if (f > s->max_fake) s->max_fake = f;
      if (f > s->limit) s->over_fake++;
    }
  }
  return NULL;
}

/* "used_bytes" from SHOW_CMD's JSON, or UINT64_MAX. */
static uint64_t show_used(const char *cmd) {
  FILE *f = popen(cmd, "r");
  if (!f) return UINT64_MAX;
  char buf[8192];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = '\0';
  pclose(f);
  const char *p = strstr(buf, "\"used_bytes\":");
  return p ? strtoull(p + strlen("\"used_bytes\":"), NULL, 10) : UINT64_MAX;
}

static bool pid_has_slot(tsr_region_t *r, int32_t pid) {
  tsr_region_slot_info_t info[TSR_REGION_SLOTS];
  uint32_t n = tsr_region_slots(r, info, TSR_REGION_SLOTS);
  for (uint32_t i = 0; i < n; i++)
    if (info[i].proc.pid == pid) return true;
  return false;
}

/* ---- stress --------------------------------------------------------------- */

static int run_stress(int argc, char **argv) {
  if (argc != 10) return 2;
  const char *tenant = argv[2], *shim = argv[3], *region = argv[4], *show = argv[9];
  int n = atoi(argv[5]), nkill = atoi(argv[6]);
  long duration = atol(argv[7]);
  bool extra = atoi(argv[8]) != 0;
  if (n < 1 || n > TSR_CTL_TENANTS || nkill < 0 || nkill >= n || duration < 100) return 2;
  tsr_region_t *r = region_open(region);
  tsr_region_stats_t st;
  tsr_region_stats(r, &st);
  printf("stress: %d tenants (%d SIGKILLed), %ld ms, arrays and graphs %s, limit %" PRIu64 "\n", n, nkill, duration,
         extra ? "on" : "off", st.limit_bytes);
  char ctl_path[4096];
  tsr_ctl_t *ctl = ctl_create(ctl_path, sizeof ctl_path);
  int go_r, go_w;
  barrier_pipe(&go_r, &go_w);
  pid_t pids[TSR_CTL_TENANTS];
  for (int i = 0; i < n; i++) {
    char idx[16], seed[32], dur[32], fd[16];
    snprintf(idx, sizeof idx, "%d", i);
    snprintf(seed, sizeof seed, "%u", (unsigned)(now_ns() ^ (uint64_t)i * 2654435761u));
    snprintf(dur, sizeof dur, "%ld", duration);
    snprintf(fd, sizeof fd, "%d", go_r);
    char *args[] = {(char *)tenant, "stress", ctl_path, idx, seed, dur, extra ? "1" : "0", fd, NULL};
    pids[i] = spawn(shim, args);
  }
  close(go_r);
  if (!wait_count(&ctl->ready, (uint32_t)n, 20000000000u) || atomic_load(&ctl->failed))
    FAIL("only %u of %d tenants set up (%u failed)", atomic_load(&ctl->ready), n, atomic_load(&ctl->failed));
  sampler_t smp = {.r = r, .limit = st.limit_bytes};
  char err[256];
  const char *fpath = getenv("FAKE_CUDA_STATE");
  if (!fpath || fake_cuda_state_open(fpath, 0, NULL, &smp.fake, err, sizeof err) != 0)
    FAIL("FAKE_CUDA_STATE: %s", fpath ? err : "unset");
  pthread_t th;
  pthread_create(&th, NULL, sampler_main, &smp);
  uint64_t t_go = now_ns();
  close(go_w);
  bool killed[TSR_CTL_TENANTS] = {false};
  if (nkill > 0) {
    nap_us(duration * 1000 / 3);
    /* a killed tenant's bytes leave a GPU when it dies; the fake keeps them
     * until someone reaps its table: do that before sampling it again */
    atomic_store(&smp.fake_paused, true);
    uint64_t t_kill = now_ns();
    for (int k = 0; k < nkill; k++) {
      int i = k * n / nkill + 1;
      kill(pids[i], SIGKILL);
      killed[i] = true;
    }
    for (int i = 0; i < n; i++)
      if (killed[i]) waitpid(pids[i], NULL, 0); /* a zombie would still look alive */
    if (smp.fake) fake_cuda_state_reap(smp.fake);
    atomic_store(&smp.fake_paused, false);
    /* the daemon's reaper frees their slots, crediting what they held */
    uint64_t t_reaped = 0;
    while (!t_reaped && now_ns() - t_kill < 3000000000u) {
      bool any = false;
      for (int i = 0; i < n && !any; i++) any = killed[i] && pid_has_slot(r, pids[i]);
      if (!any)
        t_reaped = now_ns();
      else
        nap_us(2000);
    }
    if (!t_reaped)
      FAIL("the killed tenants' slots were still held 3 s after SIGKILL");
    else if (t_reaped - t_kill > 2000000000u)
      FAIL("the killed tenants' slots were reaped %.0f ms after SIGKILL (more than 2 s)", ms(t_reaped - t_kill));
    else
      printf("killed %d tenants at %.0f ms; their slots were reaped %.0f ms later\n", nkill, ms(t_kill - t_go),
             ms(t_reaped - t_kill));
  }
  while (now_ns() - t_go < (uint64_t)duration * 1000000u) nap_us(2000);
  atomic_store(&ctl->stop, 1);
  uint32_t alive = (uint32_t)(n - nkill);
  if (!wait_count(&ctl->freed, alive, 20000000000u))
    FAIL("only %u of %u tenants finished freeing within 20 s", atomic_load(&ctl->freed), alive);
  /* everything freed while the tenants still live: every byte was credited */
  tsr_region_stats(r, &st);
  if (st.used_bytes != 0) {
    FAIL("%" PRIu64 " bytes still charged after every live tenant freed everything", st.used_bytes);
    tsr_region_slot_info_t info[TSR_REGION_SLOTS];
    uint32_t m = tsr_region_slots(r, info, TSR_REGION_SLOTS);
    for (uint32_t i = 0; i < m; i++)
      printf("  slot %u: pid %d holds %" PRIu64 "\n", info[i].slot, (int)info[i].proc.pid, info[i].used_bytes);
  }
  if (st.processes != alive) FAIL("%u processes in the region, %u tenants alive", st.processes, alive);
  uint64_t shown = show_used(show);
  if (shown != 0) FAIL("lease show --json: used_bytes %" PRIu64 " once every tenant freed", shown);
  atomic_store(&smp.stop, true);
  pthread_join(th, NULL);
  atomic_store(&ctl->release, 1);
  for (int i = 0; i < n; i++)
    if (!killed[i]) exit_status_check(pids[i], "tenant");
  tsr_region_stats(r, &st);
  printf("sampled %" PRIu64 " times: region used at most %" PRIu64
         " (%.1f%% of the limit), "
         "the driver's bytes at most %" PRIu64 "; peak %" PRIu64 ", %" PRIu64 " charges denied\n",
         smp.samples, smp.max_used, 100.0 * (double)smp.max_used / (double)st.limit_bytes, smp.max_fake, st.peak_bytes,
         st.denied);
  if (smp.samples < 100) FAIL("only %" PRIu64 " samples", smp.samples);
  if (smp.over_used)
    FAIL("region used passed the limit in %" PRIu64 " samples (max %" PRIu64 ")", smp.over_used, smp.max_used);
  if (st.peak_bytes > st.limit_bytes) FAIL("region peak %" PRIu64 " passed the limit", st.peak_bytes);
  if (smp.over_fake)
    FAIL("the driver held more than the limit for the lease's processes in %" PRIu64 " samples (max %" PRIu64 ")",
         smp.over_fake, smp.max_fake);
  if (smp.corrupt) FAIL("the region read as corrupt in %" PRIu64 " samples", smp.corrupt);
  uint64_t oom = 0;
  for (int p = 0; p < (extra ? TSR_P_COUNT : TSR_P_ARRAY); p++) {
    printf("  %-34s ok=%-6" PRIu64 " out-of-memory=%" PRIu64 "\n", tsr_ctl_path_name(p), atomic_load(&ctl->ok[p]),
           atomic_load(&ctl->oom[p]));
    if (atomic_load(&ctl->ok[p]) == 0) FAIL("%s never succeeded: the test proves nothing of it", tsr_ctl_path_name(p));
    oom += atomic_load(&ctl->oom[p]);
  }
  printf("  frees through the other path: cuMemFreeAsync of cuMemAlloc'd %" PRIu64
         ", cuMemFree of stream-ordered %" PRIu64 "; %" PRIu64 " operations\n",
         atomic_load(&ctl->cross[TSR_X_ASYNC_OF_SYNC]), atomic_load(&ctl->cross[TSR_X_SYNC_OF_ASYNC]),
         atomic_load(&ctl->ops));
  if (oom == 0) FAIL("no allocation was ever refused: the limit was never reached");
  if (atomic_load(&ctl->failed))
    FAIL("%u tenants' own checks failed (their stderr says which)", atomic_load(&ctl->failed));
  if (st.used_bytes != 0 || st.processes != 0)
    FAIL("after every tenant exited: used %" PRIu64 ", %u processes", st.used_bytes, st.processes);
  fake_cuda_state_close(smp.fake);
  tsr_region_close(r);
  unlink(ctl_path);
  printf("stress: %s\n", fails ? "FAILED" : "ok");
  return fails ? 1 : 0;
}

/* ---- start-up ------------------------------------------------------------- */

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

static int run_start(int argc, char **argv) {
  if (argc != 6) return 2;
  const char *tenant = argv[2], *shim = argv[3], *region = argv[4];
  int n = atoi(argv[5]);
  if (n < 1 || n > TSR_CTL_TENANTS) return 2;
  bool governed = strcmp(region, "-") != 0;
  tsr_region_t *r = governed ? region_open(region) : NULL;
  char ctl_path[4096];
  tsr_ctl_t *ctl = ctl_create(ctl_path, sizeof ctl_path);
  int go_r, go_w, exit_r, exit_w;
  barrier_pipe(&go_r, &go_w);
  barrier_pipe(&exit_r, &exit_w);
  pid_t pids[TSR_CTL_TENANTS];
  for (int i = 0; i < n; i++) {
    char idx[16], gfd[16], efd[16];
    snprintf(idx, sizeof idx, "%d", i);
    snprintf(gfd, sizeof gfd, "%d", go_r);
    snprintf(efd, sizeof efd, "%d", exit_r);
    char *args[] = {(char *)tenant, "start", ctl_path, idx, gfd, efd, (char *)region, NULL};
    pids[i] = spawn(shim, args);
  }
  close(go_r);
  close(exit_r);
  if (!wait_count(&ctl->ready, (uint32_t)n, 20000000000u))
    FAIL("only %u of %d tenants reached the barrier", atomic_load(&ctl->ready), n);
  uint64_t t_go = now_ns();
  close(go_w);
  uint32_t most = 0;
  uint64_t end = t_go + 20000000000u;
  while (atomic_load(&ctl->done) < (uint32_t)n && now_ns() < end) {
    if (r) {
      tsr_region_stats_t st;
      tsr_region_stats(r, &st);
      if (st.processes > most) most = st.processes;
    }
    nap_us(200);
  }
  uint64_t t_all = now_ns();
  if (atomic_load(&ctl->done) < (uint32_t)n)
    FAIL("only %u of %d tenants attached and allocated within 20 s", atomic_load(&ctl->done), n);
  if (r) {
    tsr_region_stats_t st;
    tsr_region_stats(r, &st);
    if (st.processes > most) most = st.processes;
    if (most != (uint32_t)n) FAIL("the region counted at most %u processes at once, not %d", most, n);
    if (st.used_bytes < (uint64_t)n * (2u << 20))
      FAIL("%d tenants holding 2 MiB and a context each, the region holds %" PRIu64, n, st.used_bytes);
    bool seen[TSR_REGION_SLOTS] = {false};
    for (int i = 0; i < n; i++) {
      int s = atomic_load(&ctl->slot[i]);
      if (s < 0 || s >= TSR_REGION_SLOTS)
        FAIL("tenant %d holds no slot", i);
      else if (seen[s])
        FAIL("slot %d is held by two tenants", s);
      else
        seen[s] = true;
    }
  }
  uint64_t attach[TSR_CTL_TENANTS], finish[TSR_CTL_TENANTS], wmin = UINT64_MAX, wmax = 0;
  for (int i = 0; i < n; i++) {
    uint64_t w = atomic_load(&ctl->woke_ns[i]), d = atomic_load(&ctl->done_ns[i]);
    attach[i] = d > w ? d - w : 0;
    finish[i] = d > t_go ? d - t_go : 0;
    if (w < wmin) wmin = w;
    if (w > wmax) wmax = w;
  }
  qsort(attach, (size_t)n, sizeof attach[0], cmp_u64);
  qsort(finish, (size_t)n, sizeof finish[0], cmp_u64);
  printf(
      "start-up %s: %d processes released together (woke within %.1f ms); "
      "cuInit+context+allocation took min %.2f / median %.2f / p90 %.2f / max %.2f ms; "
      "all done %.1f ms after the release (last finished at %.1f ms)\n",
      governed ? "under the shim" : "native", n, ms(wmax - wmin), ms(attach[0]), ms(attach[n / 2]),
      ms(attach[n * 9 / 10]), ms(attach[n - 1]), ms(t_all - t_go), ms(finish[n - 1]));
  if (r) printf("the region counted %u processes at once\n", most);
  close(exit_w);
  for (int i = 0; i < n; i++) exit_status_check(pids[i], "tenant");
  if (atomic_load(&ctl->failed)) FAIL("%u tenants failed (their stderr says why)", atomic_load(&ctl->failed));
  if (r) {
    tsr_region_stats_t st;
    tsr_region_stats(r, &st);
    if (st.used_bytes != 0 || st.processes != 0)
      FAIL("after every tenant exited: used %" PRIu64 ", %u processes", st.used_bytes, st.processes);
    tsr_region_close(r);
  }
  unlink(ctl_path);
  printf("start: %s\n", fails ? "FAILED" : "ok");
  return fails ? 1 : 0;
}

/* ---- writing slots as a crashed tenant would have left them ---------------- */

static tsr__region_file_t *region_raw(const char *path) {
  int fd = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    perror(path);
    exit(1);
  }
  void *p = mmap(NULL, TSR_REGION_FILE_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) {
    perror("mmap");
    exit(1);
  }
  return p;
}

/* Claims slot k for `pid` under a start time that is not its own. */
static bool stale_claim(tsr__region_file_t *f, uint32_t k, int32_t pid, uint64_t ticks) {
  tsr__region_slot_t *s = &f->slots[k];
  uint32_t expected = TSR_SLOT_FREE;
  if (!tsr_atomic_cas32_strong_acq_rel(&s->pid, &expected, TSR_SLOT_BUSY)) return false;
  tsr_atomic_store_relaxed(&s->start_ticks, ticks + 7919); /* the pid's earlier holder */
  tsr_atomic_store_relaxed(&s->pidns, 0);
  tsr_atomic_store_relaxed(&s->used, 0);
  tsr_atomic_store32_release(&s->pid, (uint32_t)pid);
  return true;
}

static int run_stale(int argc, char **argv, bool fill) {
  if (argc != (fill ? 4 : 5)) return 2;
  tsr__region_file_t *f = region_raw(argv[2]);
  int32_t pid = (int32_t)atoi(argv[3]);
  uint64_t ticks = 0;
  if (!tsr_region_proc_start(pid, &ticks)) {
    printf("no process %d\n", (int)pid);
    return 1;
  }
  if (fill) {
    uint32_t n = 0;
    for (uint32_t k = 0; k < TSR_REGION_SLOTS; k++) n += stale_claim(f, k, pid, ticks);
    printf("filled=%u\n", n);
    return 0;
  }
  uint64_t bytes = strtoull(argv[4], NULL, 10);
  /* the slot `pid` would try first: its own, as a reused pid finds it */
  uint32_t first = ((uint32_t)pid * 2654435761u) % TSR_REGION_SLOTS;
  for (uint32_t i = 0; i < TSR_REGION_SLOTS; i++) {
    uint32_t k = (first + i) % TSR_REGION_SLOTS;
    if (!stale_claim(f, k, pid, ticks)) continue;
    /* the bytes it held, as an admitted charge does: reserved, used, slot */
    tsr_atomic_add_acq_rel(&f->reserved, bytes);
    tsr_atomic_add_acq_rel(&f->used, bytes);
    tsr_atomic_add_relaxed(&f->slots[k].used, bytes);
    printf("slot=%u first=%u\n", k, first);
    return 0;
  }
  printf("no free slot\n");
  return 1;
}

static int run_stats(int argc, char **argv) {
  if (argc != 3) return 2;
  tsr_region_t *r = region_open(argv[2]);
  tsr_region_stats_t st;
  tsr_region_stats(r, &st);
  printf("used=%" PRIu64 " processes=%u peak=%" PRIu64 " denied=%" PRIu64 " corrupt=%d\n", st.used_bytes, st.processes,
         st.peak_bytes, st.denied, st.corrupt);
  tsr_region_close(r);
  return 0;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  signal(SIGPIPE, SIG_IGN);
  int rc = 2;
  if (argc >= 2 && strcmp(argv[1], "stress") == 0)
    rc = run_stress(argc, argv);
  else if (argc >= 2 && strcmp(argv[1], "start") == 0)
    rc = run_start(argc, argv);
  else if (argc >= 2 && strcmp(argv[1], "stale") == 0)
    rc = run_stale(argc, argv, false);
  else if (argc >= 2 && strcmp(argv[1], "fill") == 0)
    rc = run_stale(argc, argv, true);
  else if (argc >= 2 && strcmp(argv[1], "stats") == 0)
    rc = run_stats(argc, argv);
  if (rc == 2) fprintf(stderr, "usage: tsr_shim_check stress|start|stale|fill|stats ... (see check.c)\n");
  return rc;
}
