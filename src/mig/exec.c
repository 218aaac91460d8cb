/* mig/exec.c: carries out a plan (Algorithm 3), dry-run or through NVML.
 *
 * One thread per instance. An instance waits until every earlier instance over
 * its slices has been destroyed, is created (one reconfiguration at a time,
 * under `reconfig`), runs its tasks in planned order, and is destroyed when
 * a later instance needs its slices; the rest are destroyed at the end. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include "mig/internal.h"
#include "mig/nvml.h"

extern char **environ;

typedef struct tsr__exec_s tsr__exec_t;

typedef struct {
  tsr__exec_t *ex;
  int x;              /* instance index */
  int *tasks, ntasks; /* in planned start order */
  bool needs_destroy;
  bool destroyed;
  tsr__nvml_inst_t *nv_inst;
  char uuid[96];
} tsr__exec_inst_t;

struct tsr__exec_s {
  const tsr_mig_plan_t *plan;
  const tsr_mig_tasks_t *tasks;
  const tsr_mig_exec_options_t *opt;
  tsr__nvml_t *nv;
  tsr__exec_inst_t *inst;
  tsr_mig_exec_report_t *rep;
  double t0;
  pthread_mutex_t lock; /* guards destroyed, abort, first_error */
  pthread_cond_t changed;
  pthread_mutex_t reconfig; /* one creation or destruction at a time */
  bool abort;
  tsr_status_t first_error;
};

static double tsr__mono(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Sleeps `s` seconds (capped at a day), resuming after a signal handler;
 * any other failure is reported, never retried. */
TSR_MUST_USE static tsr_status_t tsr__sleep_s(double s) {
  if (!(s > 0)) return NULL;
  if (s > 86400) s = 86400; /* keeps the conversion below defined */
  double whole = floor(s);
  long ns = (long)((s - whole) * 1e9);
  struct timespec ts = {(time_t)whole, ns < 999999999 ? ns : 999999999};
  while (nanosleep(&ts, &ts) != 0)
    if (errno != EINTR) return tsr_status_from_errno(errno, "nanosleep");
  return NULL;
}

/* One line of the run's log, stamped with `t` seconds since the start. */
static void tsr__log(tsr__exec_t *ex, double t, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void tsr__log(tsr__exec_t *ex, double t, const char *fmt, ...) {
  if (!ex->opt->log) return;
  va_list ap;
  va_start(ap, fmt);
  pthread_mutex_lock(&ex->lock);
  fprintf(ex->opt->log, "[%9.3f s] ", t);
  vfprintf(ex->opt->log, fmt, ap);
  va_end(ap);
  fputc('\n', ex->opt->log);
  fflush(ex->opt->log);
  pthread_mutex_unlock(&ex->lock);
}

static void tsr__fail(tsr__exec_t *ex, tsr_status_t st) {
  pthread_mutex_lock(&ex->lock);
  if (!ex->first_error)
    ex->first_error = st;
  else
    tsr_status_free(st);
  ex->abort = true;
  pthread_cond_broadcast(&ex->changed);
  pthread_mutex_unlock(&ex->lock);
}

/* Runs `sh -c cmd` with CUDA_VISIBLE_DEVICES=uuid and waits for it;
 * *out_exit is its exit status (128+signal when killed). An error, and
 * *out_exit -1, when it cannot be started or waited for. */
TSR_MUST_USE static tsr_status_t tsr__run_command(const char *cmd, const char *uuid, int *out_exit) {
  *out_exit = -1;
  int n = 0;
  while (environ[n]) n++;
  char **env = calloc((size_t)n + 2, sizeof(char *));
  if (!env) return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory");
  char var[160];
  snprintf(var, sizeof(var), "CUDA_VISIBLE_DEVICES=%s", uuid);
  int m = 0;
  for (int i = 0; i < n; i++)
    if (strncmp(environ[i], "CUDA_VISIBLE_DEVICES=", 21) != 0) env[m++] = environ[i];
  env[m++] = var;
  env[m] = NULL;
  char *argv[] = {"sh", "-c", (char *)cmd, NULL};
  pid_t pid;
  int rc = posix_spawn(&pid, "/bin/sh", NULL, NULL, argv, env);
  free(env);
  if (rc != 0) return tsr_status_from_errno(rc, "cannot start /bin/sh");
  int status;
  /* only a signal handler's interruption is retried: ECHILD (the child
   * reaped elsewhere, SIGCHLD ignored) would otherwise spin forever */
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return tsr_status_from_errno(errno, "waitpid");
  if (WIFEXITED(status))
    *out_exit = WEXITSTATUS(status);
  else if (WIFSIGNALED(status))
    *out_exit = 128 + WTERMSIG(status);
  return NULL;
}

TSR_MUST_USE static tsr_status_t tsr__reconf(tsr__exec_t *ex, tsr__exec_inst_t *in, bool create) {
  const tsr_mig_instance_t *pi = &ex->plan->instances[in->x];
  tsr_status_t st = NULL;
  pthread_mutex_lock(&ex->reconfig);
  tsr__log(ex, tsr__mono() - ex->t0, "%s instance %d", create ? "create" : "destroy", in->x);
  if (ex->opt->backend == TSR_MIG_BACKEND_NVML) {
    if (create)
      st = tsr_nvml_create(ex->nv, pi->size, __builtin_ctz(pi->mask), &in->nv_inst, in->uuid, sizeof(in->uuid));
    else {
      st = tsr_nvml_destroy(ex->nv, in->nv_inst);
      in->nv_inst = NULL;
    }
  } else {
    double d = create ? pi->create_end - pi->create_start : pi->destroy_end - pi->destroy_start;
    if (!create && pi->destroy_start < 0) d = 0;
    st = tsr__sleep_s(d * ex->opt->time_scale);
    if (create && !st) snprintf(in->uuid, sizeof(in->uuid), "MIG-dry-run-%d", in->x);
  }
  pthread_mutex_unlock(&ex->reconfig);
  return st;
}

static void *tsr__inst_thread(void *arg) {
  tsr__exec_inst_t *in = arg;
  tsr__exec_t *ex = in->ex;
  const tsr_mig_plan_t *p = ex->plan;
  const tsr_mig_instance_t *me = &p->instances[in->x];
  /* wait for the earlier instances over these slices to be gone */
  pthread_mutex_lock(&ex->lock);
  for (;;) {
    bool ready = true;
    for (int y = 0; y < p->ninstances && ready; y++) {
      const tsr_mig_instance_t *o = &p->instances[y];
      if (y != in->x && (o->mask & me->mask) && o->create_start < me->create_start - 1e-12 && !ex->inst[y].destroyed)
        ready = false;
      if (y != in->x && (o->mask & me->mask) && o->create_start == me->create_start && y < in->x &&
          !ex->inst[y].destroyed)
        ready = false;
    }
    if (ready || ex->abort) break;
    pthread_cond_wait(&ex->changed, &ex->lock);
  }
  bool abort = ex->abort;
  pthread_mutex_unlock(&ex->lock);
  if (abort) return NULL;
  tsr_status_t st = tsr__reconf(ex, in, true);
  if (st) {
    tsr__fail(ex, st);
    return NULL;
  }
  for (int q = 0; q < in->ntasks; q++) {
    int i = in->tasks[q];
    pthread_mutex_lock(&ex->lock);
    abort = ex->abort;
    pthread_mutex_unlock(&ex->lock);
    if (abort) break;
    ex->rep[i].start = tsr__mono() - ex->t0;
    tsr__log(ex, ex->rep[i].start, "start %s on instance %d", ex->tasks->names[i], in->x);
    const char *cmd = ex->tasks->commands[i];
    if (cmd) {
      st = tsr__run_command(cmd, in->uuid, &ex->rep[i].exit_status);
    } else {
      st = tsr__sleep_s((p->placements[i].end - p->placements[i].start) * ex->opt->time_scale);
      ex->rep[i].exit_status = st ? -1 : 0;
    }
    ex->rep[i].end = tsr__mono() - ex->t0;
    tsr__log(ex, ex->rep[i].end, "end   %s on instance %d", ex->tasks->names[i], in->x);
    if (st)
      tsr__fail(ex, tsr_status_annotate(st, "task '%s'", ex->tasks->names[i]));
    else if (ex->rep[i].exit_status != 0)
      tsr__fail(ex, tsr_status_make(TSR_INTERNAL, "task '%s' failed (exit status %d)", ex->tasks->names[i],
                                    ex->rep[i].exit_status));
  }
  if (in->needs_destroy) {
    st = tsr__reconf(ex, in, false);
    if (st) tsr__fail(ex, st);
  }
  pthread_mutex_lock(&ex->lock);
  in->destroyed = in->needs_destroy;
  pthread_cond_broadcast(&ex->changed);
  pthread_mutex_unlock(&ex->lock);
  return NULL;
}

tsr_status_t tsr_mig_exec(const tsr_mig_plan_t *plan, const tsr_mig_tasks_t *tasks, const tsr_mig_exec_options_t *opt,
                          tsr_mig_exec_report_t *rep) {
  if (plan->ntasks != tasks->n) return tsr_status_make(TSR_INVALID_ARGUMENT, "plan and tasks differ");
  for (int i = 0; i < plan->ntasks; i++) rep[i] = (tsr_mig_exec_report_t){0, 0, -1};
  tsr__exec_t ex = {.plan = plan, .tasks = tasks, .opt = opt, .rep = rep};
  if (opt->backend == TSR_MIG_BACKEND_NVML) TSR_RETURN_IF_ERROR(tsr_nvml_open(opt->gpu_index, &ex.nv));
  int ni = plan->ninstances;
  ex.inst = calloc((size_t)(ni ? ni : 1), sizeof(*ex.inst));
  pthread_t *th = calloc((size_t)(ni ? ni : 1), sizeof(pthread_t));
  bool *started = calloc((size_t)(ni ? ni : 1), sizeof(bool));
  int *order = malloc(sizeof(int) * (size_t)(plan->ntasks ? plan->ntasks : 1));
  if (!ex.inst || !th || !started || !order) {
    free(ex.inst);
    free(th);
    free(started);
    free(order);
    tsr_nvml_close(ex.nv);
    return tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory");
  }
  /* tasks per instance in start order */
  for (int i = 0; i < plan->ntasks; i++) order[i] = i;
  for (int a = 1; a < plan->ntasks; a++) /* insertion sort by start: plans are small */
    for (int b = a; b > 0 && plan->placements[order[b]].start < plan->placements[order[b - 1]].start; b--) {
      int t = order[b];
      order[b] = order[b - 1];
      order[b - 1] = t;
    }
  int fill = 0;
  int *slots = malloc(sizeof(int) * (size_t)(plan->ntasks ? plan->ntasks : 1));
  for (int x = 0; x < ni && slots; x++) {
    ex.inst[x].ex = &ex;
    ex.inst[x].x = x;
    ex.inst[x].tasks = slots + fill;
    for (int q = 0; q < plan->ntasks; q++)
      if (plan->placements[order[q]].instance == x) slots[fill + ex.inst[x].ntasks++] = order[q];
    fill += ex.inst[x].ntasks;
    const tsr_mig_instance_t *me = &plan->instances[x];
    for (int y = 0; y < ni; y++) {
      const tsr_mig_instance_t *o = &plan->instances[y];
      if (y != x && (o->mask & me->mask) &&
          (o->create_start > me->create_start + 1e-12 || (o->create_start == me->create_start && y > x)))
        ex.inst[x].needs_destroy = true;
    }
  }
  pthread_mutex_init(&ex.lock, NULL);
  pthread_cond_init(&ex.changed, NULL);
  pthread_mutex_init(&ex.reconfig, NULL);
  ex.t0 = tsr__mono();
  for (int x = 0; x < ni && slots; x++) {
    if (pthread_create(&th[x], NULL, tsr__inst_thread, &ex.inst[x]) != 0) {
      tsr__fail(&ex, tsr_status_make(TSR_RESOURCE_EXHAUSTED, "cannot start a thread"));
      break;
    }
    started[x] = true;
  }
  for (int x = 0; x < ni; x++)
    if (started[x]) pthread_join(th[x], NULL);
  /* leave the GPU as found: instances no later one needed are destroyed now */
  for (int x = 0; x < ni; x++)
    if (ex.nv && ex.inst[x].nv_inst) {
      tsr_status_t st = tsr_nvml_destroy(ex.nv, ex.inst[x].nv_inst);
      if (st) tsr__fail(&ex, st);
    }
  tsr_nvml_close(ex.nv);
  pthread_mutex_destroy(&ex.lock);
  pthread_cond_destroy(&ex.changed);
  pthread_mutex_destroy(&ex.reconfig);
  tsr_status_t st = ex.first_error;
  if (!slots && !st) st = tsr_status_make(TSR_OUT_OF_MEMORY, "out of memory");
  free(slots);
  free(ex.inst);
  free(th);
  free(started);
  free(order);
  return st;
}
