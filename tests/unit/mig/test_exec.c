/* The executor's waits: a sleep interrupted by a signal handler goes on for
 * its whole time; a wait that fails otherwise is reported, never retried
 * (it used to spin forever). */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <time.h>

#include "common.h"

/* A30 plan of `n` whole-GPU tasks, each `seconds` long; `command` for all
 * (NULL: they sleep their planned time). */
static void one_by_one(int n, double seconds, const char *command, tsr_mig_plan_t **out_plan,
                       tsr_mig_tasks_t **out_tasks) {
  tsr_mig_model_t m = mig_model("A30");
  tsr_mig_tasks_t *t;
  cr_assert_null(tsr_mig_tasks_create(&m, n, &t));
  for (int i = 0; i < n; i++) {
    cr_assert_null(tsr_mig_tasks_set_time(t, i, 4, seconds));
    cr_assert_null(tsr_mig_tasks_set_command(t, i, command));
  }
  tsr_mig_plan_t *p;
  cr_assert_null(tsr_mig_far_plan(&m, t, NULL, &p));
  mig_assert_valid(p, t);
  *out_plan = p;
  *out_tasks = t;
}

Test(mig_exec_waits, lost_child_is_an_error_not_a_hang, .timeout = 20) {
  /* with SIGCHLD ignored the kernel reaps the child itself, and waitpid
   * fails with ECHILD once it is gone */
  signal(SIGCHLD, SIG_IGN);
  tsr_mig_plan_t *p;
  tsr_mig_tasks_t *t;
  one_by_one(1, 0.1, "true", &p, &t);
  tsr_mig_exec_report_t rep[1];
  tsr_mig_exec_options_t eo = {.backend = TSR_MIG_BACKEND_DRY_RUN, .time_scale = 0};
  tsr_status_t st = tsr_mig_exec(p, t, &eo, rep);
  cr_assert_not_null(st, "the lost child went unnoticed");
  cr_assert(strstr(tsr_status_message(st), "waitpid"), "%s", tsr_status_message(st));
  cr_assert(strstr(tsr_status_message(st), "t0"), "names the task: %s", tsr_status_message(st));
  cr_assert_eq(rep[0].exit_status, -1);
  tsr_status_free(st);
  tsr_mig_plan_free(p);
  tsr_mig_tasks_free(t);
}

static atomic_int interrupted;
static atomic_bool stop_signalling;

static void on_usr1(int sig) {
  (void)sig;
  atomic_fetch_add(&interrupted, 1);
}

static void *signaller(void *arg) {
  (void)arg;
  while (!atomic_load(&stop_signalling)) {
    kill(getpid(), SIGUSR1);
    nanosleep(&(struct timespec){0, 5 * 1000 * 1000}, NULL);
  }
  return NULL;
}

Test(mig_exec_waits, interrupted_sleeps_last_their_time, .timeout = 20) {
  /* no SA_RESTART: every signal ends nanosleep early with EINTR */
  struct sigaction sa = {.sa_handler = on_usr1};
  sigemptyset(&sa.sa_mask);
  cr_assert_eq(sigaction(SIGUSR1, &sa, NULL), 0);
  tsr_mig_plan_t *p;
  tsr_mig_tasks_t *t;
  one_by_one(2, 0.2, NULL, &p, &t);
  tsr_mig_exec_report_t rep[2];
  tsr_mig_exec_options_t eo = {.backend = TSR_MIG_BACKEND_DRY_RUN, .time_scale = 1};
  pthread_t th;
  cr_assert_eq(pthread_create(&th, NULL, signaller, NULL), 0);
  tsr_status_t st = tsr_mig_exec(p, t, &eo, rep);
  atomic_store(&stop_signalling, true);
  pthread_join(th, NULL);
  cr_assert_null(st, "%s", tsr_status_message(st));
  cr_assert_gt(atomic_load(&interrupted), 10, "the signals did not come");
  for (int i = 0; i < 2; i++) {
    cr_assert_eq(rep[i].exit_status, 0);
    cr_assert_geq(rep[i].end - rep[i].start, 0.2 - 1e-3, "task %d slept %.3f s of 0.2", i, rep[i].end - rep[i].start);
  }
  tsr_mig_plan_free(p);
  tsr_mig_tasks_free(t);
}
