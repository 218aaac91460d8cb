/* test_axis.c: axis layout, allocator, durable session counter. */
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "helpers.h"

Test(axis, layout_round_trips) {
  tsr_axis_t a = tsr_axis_make(0xAB, TSR_AXIS_DOMAIN_HOST_THREAD, 0x12345, 0xDEADBEEF);
  cr_assert_eq(a, UINT64_C(0xAB312345DEADBEEF)); /* 0xMMDSSSSSOOOOOOOO */
  cr_assert_eq(tsr_axis_machine(a), 0xAB);
  cr_assert_eq(tsr_axis_domain(a), TSR_AXIS_DOMAIN_HOST_THREAD);
  cr_assert_eq(tsr_axis_session(a), 0x12345);
  cr_assert_eq(tsr_axis_ordinal(a), 0xDEADBEEF);
  cr_assert(tsr_axis_is_valid(a));
  cr_assert_str_eq(tsr_axis_domain_name(tsr_axis_domain(a)), "host_thread");
}

Test(axis, invalid_fields_give_zero) {
  cr_assert_eq(tsr_axis_make(256, TSR_AXIS_DOMAIN_QUEUE, 1, 0), 0);
  cr_assert_eq(tsr_axis_make(0, (tsr_axis_domain_t)0, 1, 0), 0);
  cr_assert_eq(tsr_axis_make(0, (tsr_axis_domain_t)5, 1, 0), 0);
  cr_assert_eq(tsr_axis_make(0, TSR_AXIS_DOMAIN_QUEUE, TSR_AXIS_SESSION_MAX + 1, 0), 0);
  cr_assert_eq(tsr_axis_make(0, TSR_AXIS_DOMAIN_QUEUE, 1, TSR_AXIS_ORDINAL_MAX + 1), 0);
  cr_assert_not(tsr_axis_is_valid(0));
  cr_assert_not(tsr_axis_is_valid(UINT64_C(0x00F0000000000000)));
  cr_assert_str_eq(tsr_axis_domain_name((tsr_axis_domain_t)9), "invalid");
}

Test(axis, domains_and_machines_sort_together) {
  tsr_axis_t q0 = tsr_axis_make(0, TSR_AXIS_DOMAIN_QUEUE, 9, 999);
  tsr_axis_t c0 = tsr_axis_make(0, TSR_AXIS_DOMAIN_COLLECTIVE, 1, 0);
  tsr_axis_t q1 = tsr_axis_make(1, TSR_AXIS_DOMAIN_QUEUE, 1, 0);
  cr_assert_lt(q0, c0);
  cr_assert_lt(c0, q1);
}

typedef struct {
  tsr_axis_allocator_t *alloc;
  tsr_axis_t out[2000];
} alloc_job_t;

static void *alloc_thread(void *arg) {
  alloc_job_t *j = arg;
  for (int i = 0; i < 2000; i++) {
    tsr_status_t st = tsr_axis_allocator_next(j->alloc, TSR_AXIS_DOMAIN_QUEUE, &j->out[i]);
    if (st) abort();
  }
  return NULL;
}

static int cmp_axis(const void *a, const void *b) {
  tsr_axis_t x = *(const tsr_axis_t *)a, y = *(const tsr_axis_t *)b;
  return x < y ? -1 : x > y;
}

Test(axis, allocator_never_repeats_across_threads) {
  tsr_axis_allocator_t al;
  cr_assert(tsr_status_is_ok(tsr_axis_allocator_init(&al, 3, 7)));
  static alloc_job_t jobs[4];
  pthread_t th[4];
  for (int i = 0; i < 4; i++) {
    jobs[i].alloc = &al;
    pthread_create(&th[i], NULL, alloc_thread, &jobs[i]);
  }
  for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
  static tsr_axis_t all[8000];
  for (int i = 0; i < 4; i++) memcpy(&all[i * 2000], jobs[i].out, sizeof(jobs[i].out));
  qsort(all, 8000, sizeof(all[0]), cmp_axis);
  for (int i = 0; i < 8000; i++) {
    cr_assert_eq(tsr_axis_machine(all[i]), 3);
    cr_assert_eq(tsr_axis_session(all[i]), 7);
    cr_assert_eq(tsr_axis_domain(all[i]), TSR_AXIS_DOMAIN_QUEUE);
    if (i) cr_assert_neq(all[i], all[i - 1]);
  }
  /* domains count separately */
  tsr_axis_t c;
  cr_assert(tsr_status_is_ok(tsr_axis_allocator_next(&al, TSR_AXIS_DOMAIN_COLLECTIVE, &c)));
  cr_assert_eq(tsr_axis_ordinal(c), 0);
}

Test(axis, allocator_refuses_to_wrap) {
  tsr_axis_allocator_t al;
  cr_assert(tsr_status_is_ok(tsr_axis_allocator_init(&al, 0, 1)));
  atomic_store(&al.next_ordinal[TSR_AXIS_DOMAIN_EXTERNAL], TSR_AXIS_ORDINAL_MAX);
  tsr_axis_t a;
  cr_assert(tsr_status_is_ok(tsr_axis_allocator_next(&al, TSR_AXIS_DOMAIN_EXTERNAL, &a)));
  cr_assert_eq(tsr_axis_ordinal(a), TSR_AXIS_ORDINAL_MAX);
  for (int i = 0; i < 3; i++) {
    tsr_status_t st = tsr_axis_allocator_next(&al, TSR_AXIS_DOMAIN_EXTERNAL, &a);
    cr_assert_eq(tsr_status_code(st), TSR_RESOURCE_EXHAUSTED);
    cr_assert_eq(a, 0);
    tsr_status_free(st);
  }
}

Test(axis, allocator_argument_checks) {
  tsr_axis_allocator_t al;
  tsr_status_t st = tsr_axis_allocator_init(&al, 256, 1);
  cr_assert_eq(tsr_status_code(st), TSR_INVALID_ARGUMENT);
  tsr_status_free(st);
  st = tsr_axis_allocator_init(&al, 0, 0);
  cr_assert_eq(tsr_status_code(st), TSR_INVALID_ARGUMENT);
  tsr_status_free(st);
  cr_assert(tsr_status_is_ok(tsr_axis_allocator_init(&al, 0, 1)));
  tsr_axis_t a;
  st = tsr_axis_allocator_next(&al, (tsr_axis_domain_t)0, &a);
  cr_assert_eq(tsr_status_code(st), TSR_INVALID_ARGUMENT);
  tsr_status_free(st);
}

static char *tmp_path(void) {
  static char path[] = "/tmp/tsr-session-XXXXXX";
  int fd = mkstemp(path);
  cr_assert_geq(fd, 0);
  close(fd);
  unlink(path); /* tsr_axis_session_next creates it */
  return path;
}

Test(axis, session_counter_survives_restarts) {
  char *path = tmp_path();
  uint32_t s1 = 0, s2 = 0;
  cr_assert(tsr_status_is_ok(tsr_axis_session_next(path, &s1)));
  cr_assert(tsr_status_is_ok(tsr_axis_session_next(path, &s2)));
  cr_assert_eq(s1, 1);
  cr_assert_eq(s2, 2);
  /* two "runs" with the same allocator inputs otherwise: different axes */
  cr_assert_neq(tsr_axis_make(0, TSR_AXIS_DOMAIN_QUEUE, s1, 0), tsr_axis_make(0, TSR_AXIS_DOMAIN_QUEUE, s2, 0));
  unlink(path);
}

Test(axis, session_counter_distinct_across_processes) {
  char *path = tmp_path();
  int fds[2];
  cr_assert_eq(pipe(fds), 0);
  for (int i = 0; i < 6; i++) {
    pid_t pid = fork();
    if (pid == 0) {
      uint32_t s = 0;
      for (int k = 0; k < 5; k++) {
        if (tsr_axis_session_next(path, &s)) _exit(1);
        if (write(fds[1], &s, sizeof s) != sizeof s) _exit(1);
      }
      _exit(0);
    }
  }
  close(fds[1]);
  for (int i = 0; i < 6; i++) {
    int status;
    wait(&status);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  bool seen[31] = {false};
  uint32_t s;
  int n = 0;
  while (read(fds[0], &s, sizeof s) == sizeof s) {
    cr_assert(s >= 1 && s <= 30, "session %u", s);
    cr_assert_not(seen[s], "session %u handed out twice", s);
    seen[s] = true;
    n++;
  }
  cr_assert_eq(n, 30);
  unlink(path);
}

Test(axis, session_counter_refuses_corrupt_or_exhausted) {
  char *path = tmp_path();
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  cr_assert_eq(write(fd, "garbage\n", 8), 8);
  close(fd);
  uint32_t s = 9;
  tsr_status_t st = tsr_axis_session_next(path, &s);
  cr_assert_eq(tsr_status_code(st), TSR_DATA_LOSS);
  cr_assert_eq(s, 0);
  tsr_status_free(st);
  fd = open(path, O_WRONLY | O_TRUNC);
  cr_assert_eq(write(fd, "1048575\n", 8), 8); /* wrong width */
  close(fd);
  st = tsr_axis_session_next(path, &s);
  cr_assert_eq(tsr_status_code(st), TSR_DATA_LOSS);
  tsr_status_free(st);
  fd = open(path, O_WRONLY | O_TRUNC);
  cr_assert_eq(write(fd, "0001048575\n", 11), 11); /* the last session */
  close(fd);
  st = tsr_axis_session_next(path, &s);
  cr_assert_eq(tsr_status_code(st), TSR_RESOURCE_EXHAUSTED);
  tsr_status_free(st);
  unlink(path);
  st = tsr_axis_session_next("/nonexistent-dir/x", &s);
  cr_assert_eq(tsr_status_code(st), TSR_NOT_FOUND);
  tsr_status_free(st);
}
