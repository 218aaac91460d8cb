/* The shared region of a lease (src/region/region.h): creation that no
 * one can swap, the seed's admission protocol across processes, slots keyed
 * by (pid, start time), the reaper, and files that are not regions. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "region/region.h"

static char dir[64];
static int dfd = -1;

static void setup(void) {
  snprintf(dir, sizeof dir, "/tmp/tsr-region-XXXXXX");
  cr_assert_not_null(mkdtemp(dir));
  dfd = open(dir, O_RDONLY | O_DIRECTORY);
  cr_assert_geq(dfd, 0);
}

static void teardown(void) {
  close(dfd);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  cr_assert_eq(system(cmd), 0);
}

TestSuite(region, .init = setup, .fini = teardown, .timeout = 60);

static tsr_region_params_t params_of(uint64_t id, uint64_t limit) {
  tsr_region_params_t p = {.lease_id = id,
                           .device = 0,
                           .device_uuid = "GPU-test",
                           .limit_bytes = limit,
                           .deadline_wall_ns = 1,
                           .owner_uid = geteuid(),
                           .generation = 1};
  return p;
}

static tsr_region_t *open_id(uint64_t id) {
  char name[64];
  tsr_region_file_name(id, name, sizeof name);
  tsr_region_t *r = NULL;
  tsr_status_t st = tsr_region_open(dfd, name, id, &r);
  cr_assert_null(st, "%s", tsr_status_message(st));
  return r;
}

/* The daemon makes the file; a tenant maps it. */
static tsr_region_t *make(uint64_t id, uint64_t limit) {
  tsr_region_params_t p = params_of(id, limit);
  tsr_status_t st = tsr_region_create(dfd, &p);
  cr_assert_null(st, "%s", tsr_status_message(st));
  return open_id(id);
}

static uint32_t attach_self(tsr_region_t *r) {
  tsr_region_proc_t self;
  tsr_region_proc_self(&self);
  cr_assert_neq(self.start_ticks, 0);
  cr_assert_neq(self.pidns, 0);
  uint32_t slot = 0;
  tsr_status_t st = tsr_region_attach(r, &self, &slot);
  cr_assert_null(st, "%s", tsr_status_message(st));
  return slot;
}

static uint64_t used(tsr_region_t *r) {
  tsr_region_stats_t s;
  tsr_region_stats(r, &s);
  return s.used_bytes;
}

Test(region, is_created_whole_private_and_opened_by_its_lease) {
  tsr_region_close(make(7, 1 << 20));
  struct stat sb;
  cr_assert_eq(fstatat(dfd, "lease-7.region", &sb, AT_SYMLINK_NOFOLLOW), 0);
  cr_assert(S_ISREG(sb.st_mode));
  cr_assert_eq(sb.st_mode & 0777, 0600);
  cr_assert_eq(sb.st_uid, geteuid());
  cr_assert_eq((size_t)sb.st_size, tsr_region_file_size());
  cr_assert_eq(faccessat(dfd, ".tmp-lease-7.region", F_OK, AT_SYMLINK_NOFOLLOW), -1, "temp file left");
  tsr_region_t *r = open_id(7);
  tsr_region_stats_t s;
  tsr_region_stats(r, &s);
  cr_assert_eq(s.lease_id, 7);
  cr_assert_eq(s.limit_bytes, 1 << 20);
  cr_assert_eq(s.state, TSR_REGION_ACTIVE);
  cr_assert_eq(s.used_bytes, 0);
  cr_assert_not(s.corrupt);
  tsr_region_close(r);
}

Test(region, charges_stop_exactly_at_the_limit) {
  tsr_region_t *r = make(1, 1000);
  uint32_t slot = attach_self(r);
  cr_assert(tsr_region_charge(r, slot, 0), "zero bytes are admitted");
  cr_assert(tsr_region_charge(r, slot, 600));
  cr_assert_not(tsr_region_charge(r, slot, 401), "past the limit");
  cr_assert(tsr_region_charge(r, slot, 400), "exactly to the limit");
  cr_assert_not(tsr_region_charge(r, slot, 1));
  cr_assert_not(tsr_region_charge(r, slot, UINT64_MAX), "an absurd size does not wrap");
  cr_assert_eq(used(r), 1000);
  tsr_region_credit(r, slot, 600);
  cr_assert_eq(used(r), 400);
  cr_assert(tsr_region_charge(r, slot, 600), "credited bytes can be charged again");
  tsr_region_stats_t s;
  tsr_region_stats(r, &s);
  cr_assert_eq(s.denied, 3);
  cr_assert_eq(s.peak_bytes, 1000);
  cr_assert_eq(s.processes, 1);
  tsr_region_detach(r, slot);
  cr_assert_eq(used(r), 0, "detaching gives back what the process held");
  tsr_region_close(r);
}

Test(region, an_over_credit_is_clamped_not_wrapped) {
  tsr_region_t *r = make(2, 1000);
  uint32_t slot = attach_self(r);
  cr_assert(tsr_region_charge(r, slot, 100));
  tsr_region_credit(r, slot, 500); /* corruption: logged once, clamped */
  cr_assert_eq(used(r), 0);
  cr_assert(tsr_region_charge(r, slot, 1000), "the counters did not wrap");
  tsr_region_close(r);
}

Test(region, an_ended_lease_admits_nothing) {
  tsr_region_t *r = make(3, 1000);
  uint32_t slot = attach_self(r);
  cr_assert(tsr_region_charge(r, slot, 10));
  cr_assert_null(tsr_region_write_state(dfd, 3, TSR_REGION_EXPIRED)); /* the daemon, by pwrite */
  cr_assert_not(tsr_region_charge(r, slot, 10), "the tenant's mapping sees the expiry at once");
  tsr_region_credit(r, slot, 10);
  cr_assert_eq(used(r), 0, "frees still count");
  tsr_region_close(r);
}

Test(region, slots_run_out_cleanly) {
  tsr_region_t *r = make(4, 1000);
  uint32_t slot;
  for (int i = 0; i < TSR_REGION_SLOTS; i++)
    cr_assert_null(tsr_region_attach(r, &(tsr_region_proc_t){100000 + i, 1, 0}, &slot));
  tsr_status_t st = tsr_region_attach(r, &(tsr_region_proc_t){99, 1, 0}, &slot);
  cr_assert_eq(tsr_status_code(st), TSR_RESOURCE_EXHAUSTED);
  tsr_status_free(st);
  st = tsr_region_attach(r, &(tsr_region_proc_t){0, 1, 0}, &slot);
  cr_assert_eq(tsr_status_code(st), TSR_INVALID_ARGUMENT);
  tsr_status_free(st);
  tsr_region_close(r);
}

Test(region, the_reaper_frees_the_dead_and_spares_the_living) {
  tsr_region_t *r = make(5, 1 << 30);
  /* a child that takes memory and is killed without cleaning up */
  int pipefd[2];
  cr_assert_eq(pipe(pipefd), 0);
  pid_t child = fork();
  if (child == 0) {
    tsr_region_t *c = open_id(5);
    uint32_t slot = attach_self(c);
    if (!tsr_region_charge(c, slot, 123456)) _exit(3);
    char ok = 1;
    if (write(pipefd[1], &ok, 1) != 1) _exit(4);
    pause();
    _exit(0);
  }
  char ok;
  cr_assert_eq(read(pipefd[0], &ok, 1), 1);
  uint32_t mine = attach_self(r);
  cr_assert(tsr_region_charge(r, mine, 1000));
  /* a slot naming a live pid with another start time: the pid was reused */
  uint32_t reused;
  cr_assert_null(tsr_region_attach(r, &(tsr_region_proc_t){getppid(), 1, 0}, &reused));
  uint64_t bytes = 0;
  cr_assert_eq(tsr_region_reap(r, NULL, NULL, &bytes), 1, "only the reused-pid slot goes while the child lives");
  cr_assert_eq(bytes, 0);
  kill(child, SIGKILL);
  waitpid(child, NULL, 0);
  cr_assert_eq(tsr_region_reap(r, NULL, NULL, &bytes), 1);
  cr_assert_eq(bytes, 123456, "the dead child's memory came back");
  cr_assert_eq(used(r), 1000, "ours is still charged");
  cr_assert_eq(tsr_region_reap(r, NULL, NULL, &bytes), 0, "the living are never reaped");
  tsr_region_close(r);
}

/* A child that attaches, charges `bytes` and waits to be killed; with
 * `leader_exits`, its main thread then exits and another thread lives on
 * (the leader shows as a zombie while the process runs). */
static void *tsr__park(void *arg) {
  (void)arg;
  for (;;) pause();
  return NULL;
}

static pid_t charged_child(uint64_t id, uint64_t bytes, bool leader_exits) {
  int pipefd[2];
  cr_assert_eq(pipe(pipefd), 0);
  pid_t child = fork();
  if (child == 0) {
    tsr_region_t *c = open_id(id);
    uint32_t slot = attach_self(c);
    if (!tsr_region_charge(c, slot, bytes)) _exit(3);
    pthread_t t;
    if (leader_exits && pthread_create(&t, NULL, tsr__park, NULL) != 0) _exit(5);
    char ok = 1;
    if (write(pipefd[1], &ok, 1) != 1) _exit(4);
    if (leader_exits) pthread_exit(NULL);
    pause();
    _exit(0);
  }
  char ok;
  cr_assert_eq(read(pipefd[0], &ok, 1), 1);
  close(pipefd[0]);
  close(pipefd[1]);
  return child;
}

/* /proc/PID/stat's state of `pid` ('?' when it cannot be read) */
static char proc_state(pid_t pid) {
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "r");
  if (!f) return '?';
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  char *p = strrchr(buf, ')');
  return p && p[1] == ' ' ? p[2] : '?';
}

Test(region, a_charge_that_does_not_fit_takes_back_a_killed_holders_bytes_at_once) {
  tsr_region_t *r = make(31, 1 << 20);
  uint32_t mine = attach_self(r);
  /* killed and waited for: /proc has no such process */
  pid_t child = charged_child(31, 3 << 18, false);
  cr_assert_not(tsr_region_charge(r, mine, 1 << 19), "full while the child lives");
  kill(child, SIGKILL);
  waitpid(child, NULL, 0);
  usleep(2000); /* a refused charge looks at most once a millisecond */
  cr_assert(tsr_region_charge(r, mine, 1 << 19), "no mark, no daemon: the refusal path took the bytes back");
  cr_assert_eq(used(r), 1 << 19);
  /* killed and not yet waited for: a zombie has exited */
  child = charged_child(31, 1 << 19, false);
  cr_assert_not(tsr_region_charge(r, mine, 1 << 18));
  kill(child, SIGKILL);
  for (int i = 0; i < 2000 && proc_state(child) != 'Z'; i++) usleep(1000);
  cr_assert_eq(proc_state(child), 'Z');
  usleep(2000);
  cr_assert(tsr_region_charge(r, mine, 1 << 18), "a zombie's bytes come back before its parent waits");
  waitpid(child, NULL, 0);
  cr_assert_eq(used(r), 3 << 18);
  tsr_region_close(r);
}

Test(region, a_process_whose_main_thread_exited_still_holds_its_bytes) {
  tsr_region_t *r = make(32, 1 << 20);
  uint32_t mine = attach_self(r);
  pid_t child = charged_child(32, 1 << 19, true);
  for (int i = 0; i < 2000 && proc_state(child) != 'Z'; i++) usleep(1000);
  cr_assert_eq(proc_state(child), 'Z', "the leader shows as a zombie");
  cr_assert(tsr_region_charge(r, mine, 1 << 19));
  cr_assert_not(tsr_region_charge(r, mine, 1), "its other thread runs: nothing is taken back");
  cr_assert_eq(used(r), 1 << 20);
  kill(child, SIGKILL);
  waitpid(child, NULL, 0);
  usleep(2000);
  cr_assert(tsr_region_charge(r, mine, 1), "gone now");
  tsr_region_close(r);
}

Test(region, start_time_is_read_past_odd_process_names) {
  int pipefd[2];
  cr_assert_eq(pipe(pipefd), 0);
  pid_t child = fork();
  if (child == 0) {
    prctl(PR_SET_NAME, "a) b (c) 9 9", 0, 0, 0);
    char ok = 1;
    if (write(pipefd[1], &ok, 1) != 1) _exit(4);
    pause();
    _exit(0);
  }
  char ok;
  cr_assert_eq(read(pipefd[0], &ok, 1), 1);
  uint64_t mine = 0, theirs = 0;
  cr_assert(tsr_region_proc_start(getpid(), &mine));
  cr_assert(tsr_region_proc_start(child, &theirs));
  cr_assert_geq(theirs, mine, "a child starts no earlier than its parent");
  cr_assert_lt(theirs - mine, 100 * 60 * 10, "and not ten minutes later");
  kill(child, SIGKILL);
  waitpid(child, NULL, 0);
  cr_assert_not(tsr_region_proc_start(child, &theirs), "a reaped child has no start time");
  cr_assert_not(tsr_region_proc_start(-1, &theirs));
}

Test(region, files_that_are_not_regions_are_refused) {
  tsr_region_close(make(6, 1000));
  tsr_region_t *r = NULL;
  tsr_status_t st = tsr_region_open(dfd, "lease-6.region", 9, &r);
  cr_assert_eq(tsr_status_code(st), TSR_DATA_LOSS, "another lease's region: %s", tsr_status_message(st));
  tsr_status_free(st);
  st = tsr_region_open(dfd, "lease-404.region", 404, &r);
  cr_assert_eq(tsr_status_code(st), TSR_NOT_FOUND);
  tsr_status_free(st);
  cr_assert_eq(symlinkat("lease-6.region", dfd, "lease-8.region"), 0);
  st = tsr_region_open(dfd, "lease-8.region", 8, &r);
  cr_assert_eq(tsr_status_code(st), TSR_FAILED_PRECONDITION, "a link: %s", tsr_status_message(st));
  tsr_status_free(st);
  cr_assert_eq(mkfifoat(dfd, "lease-10.region", 0600), 0);
  st = tsr_region_open(dfd, "lease-10.region", 10, &r); /* must not hang */
  cr_assert_eq(tsr_status_code(st), TSR_FAILED_PRECONDITION);
  tsr_status_free(st);
  /* truncated, and damaged headers */
  int fd = openat(dfd, "lease-6.region", O_RDWR);
  cr_assert_eq(pwrite(fd, "XXXXXXXX", 8, 0), 8); /* magic */
  st = tsr_region_open(dfd, "lease-6.region", 6, &r);
  cr_assert_eq(tsr_status_code(st), TSR_DATA_LOSS, "%s", tsr_status_message(st));
  tsr_status_free(st);
  tsr_region_close(make(6, 1000));
  fd = openat(dfd, "lease-6.region", O_RDWR);
  uint32_t v = 99;
  cr_assert_eq(pwrite(fd, &v, 4, 8), 4); /* version */
  st = tsr_region_open(dfd, "lease-6.region", 6, &r);
  cr_assert_eq(tsr_status_code(st), TSR_FAILED_PRECONDITION, "%s", tsr_status_message(st));
  cr_assert(strstr(tsr_status_message(st), "version 99"), "%s", tsr_status_message(st));
  tsr_status_free(st);
  cr_assert_eq(ftruncate(fd, 100), 0);
  st = tsr_region_open(dfd, "lease-6.region", 6, &r);
  cr_assert_eq(tsr_status_code(st), TSR_DATA_LOSS, "%s", tsr_status_message(st));
  tsr_status_free(st);
  close(fd);
  cr_assert_null(r);
}

Test(region, a_planted_temp_link_is_not_followed) {
  int vfd = openat(dfd, "victim", O_WRONLY | O_CREAT, 0644);
  cr_assert_eq(write(vfd, "precious", 8), 8);
  close(vfd);
  cr_assert_eq(symlinkat("victim", dfd, ".tmp-lease-11.region"), 0);
  tsr_region_close(make(11, 1000));
  struct stat sb;
  cr_assert_eq(fstatat(dfd, "victim", &sb, 0), 0);
  cr_assert_eq(sb.st_size, 8, "the link's target was written");
}

/* 16 processes charge and credit at random through one region while a
 * checker samples it: the admitted total never passes the limit at any
 * instant, and every byte comes back. */
Test(region, sixteen_processes_never_pass_the_limit) {
  enum { PROCS = 16, ROUNDS = 100000 };
  const uint64_t limit = 1 << 20;
  tsr_region_close(make(12, limit));
  _Atomic int *stop = mmap(NULL, sizeof(*stop), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  cr_assert_neq(stop, MAP_FAILED);
  atomic_store(stop, 0);
  pid_t checker = fork();
  if (checker == 0) {
    tsr_region_t *c = open_id(12);
    long samples = 0;
    while (!atomic_load(stop)) {
      tsr_region_stats_t s;
      tsr_region_stats(c, &s);
      if (s.used_bytes > limit || s.corrupt) _exit(10);
      samples++;
    }
    _exit(samples > 1000 ? 0 : 11);
  }
  pid_t kids[PROCS];
  for (int k = 0; k < PROCS; k++) {
    kids[k] = fork();
    if (kids[k] == 0) {
      tsr_region_t *c = open_id(12);
      uint32_t slot = attach_self(c);
      unsigned seed = (unsigned)k * 7919u + 1;
      uint64_t held[32] = {0};
      for (int i = 0; i < ROUNDS; i++) {
        int j = rand_r(&seed) % 32;
        if (held[j]) {
          tsr_region_credit(c, slot, held[j]);
          held[j] = 0;
        } else {
          uint64_t want = 1 + (uint64_t)(rand_r(&seed) % (limit / 2));
          if (tsr_region_charge(c, slot, want)) held[j] = want;
        }
      }
      for (int j = 0; j < 32; j++) tsr_region_credit(c, slot, held[j]);
      tsr_region_detach(c, slot);
      _exit(0);
    }
  }
  for (int k = 0; k < PROCS; k++) {
    int st;
    waitpid(kids[k], &st, 0);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "worker %d failed", k);
  }
  atomic_store(stop, 1);
  int st;
  waitpid(checker, &st, 0);
  cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "checker saw the limit passed (exit %d)",
            WIFEXITED(st) ? WEXITSTATUS(st) : -1);
  tsr_region_t *r = open_id(12);
  tsr_region_stats_t s;
  tsr_region_stats(r, &s);
  cr_assert_eq(s.used_bytes, 0, "%llu bytes never came back", (unsigned long long)s.used_bytes);
  cr_assert_eq(s.processes, 0);
  cr_assert_gt(s.denied, 0, "the workload never reached the limit: the test proves nothing");
  cr_assert_leq(s.peak_bytes, limit);
  /* the admission counter is back to zero too: the whole limit is free */
  uint32_t slot = attach_self(r);
  cr_assert(tsr_region_charge(r, slot, limit));
  tsr_region_close(r);
  munmap(stop, sizeof(*stop));
}

static bool never_alive(void *ctx, const tsr_region_proc_t *proc) {
  (*(int *)ctx)++;
  (void)proc;
  return false;
}

Test(region, slots_list_the_holders_and_the_reaper_asks_the_resolver) {
  tsr_region_t *r = make(6, 1 << 30);
  uint32_t a, b;
  uint64_t ours = 0;
  cr_assert(tsr_region_proc_pidns(0, &ours));
  /* pid 4242 of our namespace with a start time no live process has */
  cr_assert_null(tsr_region_attach(r, &(tsr_region_proc_t){4242, 77, ours}, &a));
  cr_assert_null(tsr_region_attach(r, &(tsr_region_proc_t){4343, 78, 1}, &b));
  cr_assert(tsr_region_charge(r, b, 4096));
  tsr_region_slot_info_t info[4];
  cr_assert_eq(tsr_region_slots(r, info, 4), 2);
  bool seen_a = false, seen_b = false;
  for (int i = 0; i < 2; i++) {
    if (info[i].proc.pid == 4242) {
      seen_a =
          info[i].slot == a && info[i].proc.start_ticks == 77 && info[i].proc.pidns == ours && info[i].used_bytes == 0;
    } else if (info[i].proc.pid == 4343) {
      seen_b = info[i].slot == b && info[i].used_bytes == 4096 && info[i].proc.pidns == 1;
    }
  }
  cr_assert(seen_a && seen_b, "each holder listed with its namespace and bytes");
  cr_assert_eq(tsr_region_slots(r, info, 1), 1, "cap is honoured");
  /* a process of another PID namespace cannot be judged from here: the
   * default check spares it */
  uint64_t bytes = 0;
  cr_assert_eq(tsr_region_reap(r, NULL, NULL, &bytes), 1, "only the pid of our namespace is judged");
  cr_assert_eq(tsr_region_slots(r, info, 4), 1);
  cr_assert_eq(info[0].proc.pid, 4343);
  int asked = 0;
  cr_assert_eq(tsr_region_reap(r, never_alive, &asked, &bytes), 1);
  cr_assert_eq(bytes, 4096);
  cr_assert_eq(asked, 2, "asked before and after taking the slot over");
  cr_assert_eq(used(r), 0);
  tsr_region_close(r);
}

Test(region, stat_lines_are_read_from_the_last_parenthesis) {
  int32_t ppid = 0;
  uint64_t start = 0;
  /* a command name may hold spaces and ')' */
  const char *line = "4711 (a) b (c)) S 42 4711 4711 0 -1 4194304 10 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10";
  cr_assert(tsr_region_proc_stat_parse(line, &ppid, &start));
  cr_assert_eq(ppid, 42);
  cr_assert_eq(start, 987654);
  cr_assert(!tsr_region_proc_stat_parse("4711 (x) S 42 1 2", &ppid, &start), "too few fields");
  cr_assert(!tsr_region_proc_stat_parse("no parenthesis", &ppid, &start));
  start = 0;
  cr_assert(tsr_region_proc_stat_parse(line, NULL, &start), "the ppid may be left out");
  cr_assert_eq(start, 987654);
}

/* ---- the daemon's side: a copy, never a mapping ------------------------------ */

/* What a hostile tenant does to its own file: writes `len` bytes at `off`. */
static void tenant_writes(uint64_t id, off_t off, const void *buf, size_t len) {
  char name[64];
  tsr_region_file_name(id, name, sizeof name);
  int fd = openat(dfd, name, O_WRONLY);
  cr_assert_geq(fd, 0);
  cr_assert_eq(pwrite(fd, buf, len, off), (ssize_t)len);
  close(fd);
}

static tsr_region_copy_t *read_copy(uint64_t id, uint64_t limit, tsr_region_state_t state) {
  tsr_region_copy_t *c = malloc(sizeof(*c));
  tsr_region_params_t p = params_of(id, limit);
  tsr_status_t st = tsr_region_read(dfd, &p, state, c);
  cr_assert_null(st, "%s", tsr_status_message(st));
  return c;
}

Test(region, the_daemon_reads_a_shrunk_region_and_puts_it_back) {
  tsr_region_t *r = make(20, 1 << 20);
  uint32_t slot = attach_self(r);
  cr_assert(tsr_region_charge(r, slot, 4096));
  tsr_region_copy_t *c = read_copy(20, 1 << 20, TSR_REGION_ACTIVE);
  cr_assert_eq(c->damage, 0, "an honest region: %#x", c->damage);
  cr_assert_eq(c->stats.used_bytes, 4096);
  cr_assert_eq(c->nslots, 1);
  cr_assert_eq(c->slots[0].proc.pid, getpid());
  free(c);
  /* the tenant shrinks it: a mapping would fault here, a copy is short */
  char name[64];
  tsr_region_file_name(20, name, sizeof name);
  int fd = openat(dfd, name, O_RDWR);
  cr_assert_eq(ftruncate(fd, 0), 0);
  close(fd);
  c = read_copy(20, 1 << 20, TSR_REGION_ACTIVE);
  cr_assert(c->damage & TSR_REGION_DAMAGE_SIZE);
  cr_assert(c->damage & TSR_REGION_DAMAGE_HEADER, "the header is gone with the rest");
  cr_assert_eq(c->nslots, 0);
  tsr_region_params_t p = params_of(20, 1 << 20);
  cr_assert_null(tsr_region_repair(dfd, &p, TSR_REGION_ACTIVE, 0, c->damage));
  free(c);
  c = read_copy(20, 1 << 20, TSR_REGION_ACTIVE);
  cr_assert_eq(c->damage, 0, "repaired in place: %#x", c->damage);
  free(c);
  /* the old mapping is valid again (zeros: its slot is gone, nothing charged) */
  cr_assert_eq(used(r), 0);
  tsr_region_t *again = open_id(20);
  uint32_t s2 = attach_self(again);
  cr_assert(tsr_region_charge(again, s2, 1 << 20), "a repaired region charges to its limit");
  cr_assert_not(tsr_region_charge(again, s2, 1));
  tsr_region_close(again);
  tsr_region_close(r);
}

Test(region, a_raised_limit_and_a_state_set_back_are_found_and_put_back) {
  tsr_region_t *r = make(21, 1000);
  uint32_t slot = attach_self(r);
  cr_assert_null(tsr_region_write_state(dfd, 21, TSR_REGION_EXPIRED)); /* revoked */
  uint64_t big = UINT64_C(1) << 40;
  uint32_t active = TSR_REGION_ACTIVE;
  tenant_writes(21, 40, &big, sizeof(big));       /* the limit word */
  tenant_writes(21, 56, &active, sizeof(active)); /* the state word */
  cr_assert(tsr_region_charge(r, slot, 5000), "the tenant lies to itself");
  tsr_region_copy_t *c = read_copy(21, 1000, TSR_REGION_EXPIRED);
  cr_assert(c->damage & TSR_REGION_DAMAGE_HEADER);
  cr_assert(c->damage & TSR_REGION_DAMAGE_STATE);
  cr_assert(c->damage & TSR_REGION_DAMAGE_COUNTERS, "used past the lease's own limit");
  cr_assert_eq(c->stats.limit_bytes, big, "the copy says what the file says");
  tsr_region_params_t p = params_of(21, 1000);
  cr_assert_null(tsr_region_repair(dfd, &p, TSR_REGION_EXPIRED, 0, c->damage));
  free(c);
  cr_assert_not(tsr_region_charge(r, slot, 1), "the tenant's mapping sees the state put back");
  tsr_region_stats_t s;
  tsr_region_stats(r, &s);
  cr_assert_eq(s.limit_bytes, 1000);
  cr_assert_eq(s.state, TSR_REGION_EXPIRED);
  c = read_copy(21, 1000, TSR_REGION_EXPIRED);
  cr_assert_eq(c->damage, TSR_REGION_DAMAGE_COUNTERS, "only the counters stay wrong: %#x", c->damage);
  free(c);
  tsr_region_close(r);
}

Test(region, a_slot_claiming_more_than_the_limit_is_found) {
  tsr_region_t *r = make(25, 1000);
  uint32_t slot = attach_self(r);
  cr_assert(tsr_region_charge(r, slot, 100));
  tsr_region_copy_t *c = read_copy(25, 1000, TSR_REGION_ACTIVE);
  cr_assert_eq(c->damage, 0, "an honest region: %#x", c->damage);
  free(c);
  /* the slot's used word (slot line + 16), the lease's totals left honest */
  uint64_t big = UINT64_C(1) << 40;
  tenant_writes(25, 512 + 64 * (off_t)slot + 16, &big, sizeof(big));
  c = read_copy(25, 1000, TSR_REGION_ACTIVE);
  cr_assert_eq(c->damage, TSR_REGION_DAMAGE_COUNTERS, "a slot past the limit: %#x", c->damage);
  cr_assert_eq(c->nslots, 1);
  cr_assert_eq(c->slots[0].used_bytes, big, "the copy says what the file says");
  free(c);
  tsr_region_close(r);
}

Test(region, a_mode_the_tenant_opened_up_is_put_back) {
  tsr_region_close(make(22, 1000));
  char name[64];
  tsr_region_file_name(22, name, sizeof name);
  cr_assert_eq(fchmodat(dfd, name, 0666, 0), 0);
  tsr_region_copy_t *c = read_copy(22, 1000, TSR_REGION_ACTIVE);
  cr_assert(c->damage & TSR_REGION_DAMAGE_HEADER);
  tsr_region_params_t p = params_of(22, 1000);
  cr_assert_null(tsr_region_repair(dfd, &p, TSR_REGION_ACTIVE, 0, c->damage));
  free(c);
  struct stat sb;
  cr_assert_eq(fstatat(dfd, name, &sb, 0), 0);
  cr_assert_eq(sb.st_mode & 07777, 0600);
}

Test(region, a_dead_holders_mark_frees_its_slot_and_nothing_else) {
  tsr_region_t *r = make(23, 1 << 20);
  int pipefd[2];
  cr_assert_eq(pipe(pipefd), 0);
  pid_t child = fork();
  if (child == 0) {
    tsr_region_t *c = open_id(23);
    uint32_t slot = attach_self(c);
    if (!tsr_region_charge(c, slot, 1 << 19)) _exit(3);
    char ok = 1;
    if (write(pipefd[1], &ok, 1) != 1) _exit(4);
    pause();
    _exit(0);
  }
  char ok;
  cr_assert_eq(read(pipefd[0], &ok, 1), 1);
  uint32_t mine = attach_self(r);
  cr_assert(tsr_region_charge(r, mine, 1 << 19));
  cr_assert_not(tsr_region_charge(r, mine, 1 << 19), "full while the child holds its half");
  tsr_region_copy_t *c = read_copy(23, 1 << 20, TSR_REGION_ACTIVE);
  cr_assert_eq(c->nslots, 2);
  tsr_region_slot_info_t theirs = c->slots[0].proc.pid == child ? c->slots[0] : c->slots[1];
  tsr_region_slot_info_t ours = c->slots[0].proc.pid == child ? c->slots[1] : c->slots[0];
  free(c);
  /* a mark that names another process than the holder marks nothing */
  tsr_region_proc_t other = theirs.proc;
  other.start_ticks++;
  cr_assert_null(tsr_region_mark_dead(dfd, 23, theirs.slot, &other));
  cr_assert_eq(tsr_region_reclaim(r, NULL), 0);
  kill(child, SIGKILL);
  waitpid(child, NULL, 0);
  cr_assert_null(tsr_region_mark_dead(dfd, 23, theirs.slot, &theirs.proc));
  c = read_copy(23, 1 << 20, TSR_REGION_ACTIVE);
  cr_assert_eq(c->dead_bytes, 1 << 19, "the daemon counts the dead slot's bytes apart");
  cr_assert_eq(c->stats.processes, 1);
  free(c);
  /* the next charge that does not fit gives the dead one's back first */
  cr_assert(tsr_region_charge(r, mine, 1 << 19));
  cr_assert_eq(used(r), 1 << 20);
  c = read_copy(23, 1 << 20, TSR_REGION_ACTIVE);
  cr_assert_eq(c->nslots, 1);
  cr_assert_eq(c->slots[0].slot, ours.slot);
  cr_assert_eq(c->dead_bytes, 0);
  free(c);
  tsr_status_t st = tsr_region_mark_dead(dfd, 23, TSR_REGION_SLOTS, &ours.proc);
  cr_assert_eq(tsr_status_code(st), TSR_INVALID_ARGUMENT);
  tsr_status_free(st);
  tsr_region_close(r);
}

Test(region, the_daemon_finds_no_file_and_refuses_a_link) {
  tsr_region_params_t p = params_of(24, 1000);
  tsr_region_copy_t *c = malloc(sizeof(*c));
  tsr_status_t st = tsr_region_read(dfd, &p, TSR_REGION_ACTIVE, c);
  cr_assert_eq(tsr_status_code(st), TSR_NOT_FOUND);
  tsr_status_free(st);
  cr_assert_eq(symlinkat("/etc/passwd", dfd, "lease-24.region"), 0);
  st = tsr_region_read(dfd, &p, TSR_REGION_ACTIVE, c);
  cr_assert_not_null(st, "a link is never followed");
  cr_assert_neq(tsr_status_code(st), TSR_NOT_FOUND);
  tsr_status_free(st);
  st = tsr_region_write_state(dfd, 24, TSR_REGION_EXPIRED);
  cr_assert_not_null(st, "nor written through");
  tsr_status_free(st);
  free(c);
}

Test(region, a_resize_reaches_a_running_tenant_and_a_shrink_is_no_tampering) {
  tsr_region_params_t p = params_of(26, 1000);
  p.sm_ppm = 300000;
  cr_assert_null(tsr_region_create(dfd, &p));
  tsr_region_t *r = open_id(26);
  uint32_t slot = attach_self(r);
  cr_assert(tsr_region_charge(r, slot, 800));
  cr_assert_not(tsr_region_charge(r, slot, 400), "over the first limit");
  cr_assert_eq(tsr_region_share_now(r), 300000);
  /* a grow, and a new share, written in place as the daemon does */
  p.limit_bytes = 2000;
  p.sm_ppm = 600000;
  cr_assert_null(
      tsr_region_repair(dfd, &p, TSR_REGION_ACTIVE, 0, TSR_REGION_DAMAGE_HEADER | TSR_REGION_DAMAGE_COMPUTE));
  cr_assert(tsr_region_charge(r, slot, 400), "the same mapping admits under the new limit");
  cr_assert_eq(tsr_region_share_now(r), 600000, "and sees the new share");
  tsr_region_stats_t s;
  tsr_region_stats(r, &s);
  cr_assert_eq(s.limit_bytes, 2000);
  cr_assert_eq(s.sm_ppm, 600000);
  /* a forced shrink under what is held (1200): nothing more is admitted */
  p.limit_bytes = 500;
  p.high_limit_bytes = 2000;
  cr_assert_null(tsr_region_repair(dfd, &p, TSR_REGION_ACTIVE, 0, TSR_REGION_DAMAGE_HEADER));
  cr_assert_not(tsr_region_charge(r, slot, 1), "over the shrunk limit");
  tsr_region_stats(r, &s);
  cr_assert_eq(s.used_bytes, 1200);
  cr_assert_not(s.corrupt, "counters past a lowered limit are not corruption");
  /* the daemon, knowing the largest limit, finds nothing amiss */
  tsr_region_copy_t *c = malloc(sizeof(*c));
  cr_assert_null(tsr_region_read(dfd, &p, TSR_REGION_ACTIVE, c));
  cr_assert_eq(c->damage, 0, "a shrink is not tampering: %#x", c->damage);
  /* one that forgot it would take the peak for tampering */
  tsr_region_params_t forgot = p;
  forgot.high_limit_bytes = 0;
  cr_assert_null(tsr_region_read(dfd, &forgot, TSR_REGION_ACTIVE, c));
  cr_assert_eq(c->damage, TSR_REGION_DAMAGE_COUNTERS, "%#x", c->damage);
  /* and past the largest limit it still is */
  uint64_t big = 5000;
  tenant_writes(26, 72, &big, sizeof(big)); /* the used word */
  cr_assert_null(tsr_region_read(dfd, &p, TSR_REGION_ACTIVE, c));
  cr_assert(c->damage & TSR_REGION_DAMAGE_COUNTERS, "%#x", c->damage);
  free(c);
  /* given back under the limit, it admits again */
  big = 1200;
  tenant_writes(26, 72, &big, sizeof(big));
  tsr_region_credit(r, slot, 1000);
  cr_assert(tsr_region_charge(r, slot, 100));
  /* a share out of range (no writer of ours) is not taken: the one the
   * mapping started with is */
  uint32_t wild = 2000000;
  tenant_writes(26, 192, &wild, sizeof(wild));
  cr_assert_eq(tsr_region_share_now(r), 300000);
  tsr_region_close(r);
}
