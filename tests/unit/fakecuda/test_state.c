/* unit.fakecuda_state: with FAKE_CUDA_STATE, processes see each other's
 * memory (cuMemGetInfo, out of memory across processes), the per-process
 * table names each one, and the slot of a process that is gone (exited,
 * killed, a zombie) is given back. The other processes are
 * fakecuda_tenant (tenant.c), started with fork + exec. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fake_cuda_state.h"
#include "fc_test.h"

typedef struct {
  pid_t pid;
  int in; /* its standard input: closing it ends the tenant */
  FILE *out;
} tenant_t;

static char state_path[64];

static void state_setup(void) {
  snprintf(state_path, sizeof state_path, "/tmp/fakecuda_state_%d", (int)getpid());
  unlink(state_path);
  setenv("FAKE_CUDA_STATE", state_path, 1);
  setenv("FAKE_CUDA_TOTAL_MEM", "8GiB", 1);
  setenv("FAKE_CUDA_CTX_BYTES", "256MiB", 1);
}
static void state_teardown(void) { unlink(state_path); }

TestSuite(state, .init = state_setup, .fini = state_teardown);

/* Starts a tenant holding `mib` MiB and reads its first line. */
static tenant_t tenant_start(size_t mib, char *line, size_t len) {
  int to[2], from[2];
  cr_assert_eq(pipe(to), 0);
  cr_assert_eq(pipe(from), 0);
  tenant_t t = {0};
  t.pid = fork();
  cr_assert_geq(t.pid, 0);
  if (t.pid == 0) {
    dup2(to[0], 0);
    dup2(from[1], 1);
    close(to[1]);
    close(from[0]);
    char arg[32];
    snprintf(arg, sizeof arg, "%zu", mib);
    execl(FAKECUDA_TENANT, FAKECUDA_TENANT, arg, (char *)NULL);
    _exit(127);
  }
  close(to[0]);
  close(from[1]);
  t.in = to[1];
  t.out = fdopen(from[0], "r");
  if (!fgets(line, (int)len, t.out)) line[0] = '\0';
  return t;
}

static int tenant_end(tenant_t *t) {
  close(t->in);
  int status;
  waitpid(t->pid, &status, 0);
  fclose(t->out);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static fake_cuda_state_t *open_state(void) {
  fake_cuda_state_t *st = NULL;
  char err[256];
  int rc = fake_cuda_state_open(state_path, 0, NULL, &st, err, sizeof err);
  cr_assert_eq(rc, 0, "%s", err);
  return st;
}

Test(state, processes_share_the_device) {
  fc_start(NULL, NULL);
  CUdeviceptr p;
  CU_OK(cuMemAlloc(&p, GiB));
  char line[128];
  tenant_t t = tenant_start(2048, line, sizeof line);
  cr_assert_str_eq(line, "ready\n");
  cr_assert_eq(fc_used(), (256 + 1024 + 256 + 2048) * MiB, "cuMemGetInfo sees both processes");

  fake_cuda_state_t *st = open_state();
  cr_assert_eq(fake_cuda_state_ndevices(st), 1);
  cr_assert_eq(fake_cuda_state_total(st, 0), 8 * GiB);
  cr_assert_eq(fake_cuda_state_used(st, 0), (256 + 1024 + 256 + 2048) * MiB);
  fake_cuda_proc_t rows[8];
  size_t n = fake_cuda_state_procs(st, rows, 8);
  cr_assert_eq(n, 2);
  for (size_t i = 0; i < n; i++) {
    cr_assert_eq(rows[i].device, 0);
    if (rows[i].pid == getpid())
      cr_assert_eq(rows[i].bytes, (256 + 1024) * MiB);
    else
      cr_assert(rows[i].pid == t.pid && rows[i].bytes == (256 + 2048) * MiB, "row %zu: pid %d, %llu bytes", i,
                (int)rows[i].pid, (unsigned long long)rows[i].bytes);
  }
  cr_assert_eq(fake_cuda_state_pid_bytes(st, t.pid, 0), (256 + 2048) * MiB);

  /* what another process holds is not there to take */
  CUdeviceptr q;
  CU_EXPECT(CUDA_ERROR_OUT_OF_MEMORY, cuMemAlloc(&q, 5 * GiB));
  CU_OK(cuMemAlloc(&q, 4 * GiB));
  CU_OK(cuMemFree(q));

  /* a tenant that exits gives everything back */
  cr_assert_eq(tenant_end(&t), 0);
  cr_assert_eq(fc_used(), (256 + 1024) * MiB);
  cr_assert_eq(fake_cuda_state_procs(st, rows, 8), 1);
  cr_assert_eq(rows[0].pid, getpid());
  fake_cuda_state_close(st);
}

Test(state, killed_process_is_reaped) {
  fc_start(NULL, NULL);
  char line[128];
  tenant_t t = tenant_start(1024, line, sizeof line);
  cr_assert_str_eq(line, "ready\n");
  fake_cuda_state_t *st = open_state();
  cr_assert_eq(fake_cuda_state_pid_bytes(st, t.pid, 0), (256 + 1024) * MiB);
  kill(t.pid, SIGKILL);
  int status;
  waitpid(t.pid, &status, 0);
  cr_assert_eq(fake_cuda_state_pid_bytes(st, t.pid, 0), (256 + 1024) * MiB, "no one has looked yet");
  cr_assert_eq(fc_used(), 256 * MiB, "cuMemGetInfo reaps the slot of a dead process");
  cr_assert_eq(fake_cuda_state_pid_bytes(st, t.pid, 0), 0);
  fake_cuda_proc_t rows[4];
  cr_assert_eq(fake_cuda_state_procs(st, rows, 4), 1);
  close(t.in);
  fclose(t.out);
  fake_cuda_state_close(st);
}

/* A killed process not yet waited for is a zombie: gone all the same. */
Test(state, zombie_is_reaped) {
  fc_start(NULL, NULL);
  char line[128];
  tenant_t t = tenant_start(512, line, sizeof line);
  cr_assert_str_eq(line, "ready\n");
  fake_cuda_state_t *st = open_state();
  kill(t.pid, SIGKILL);
  /* wait for the kernel to make it a zombie, without reaping it */
  for (int i = 0; i < 200; i++) {
    siginfo_t si;
    memset(&si, 0, sizeof si);
    if (waitid(P_PID, (id_t)t.pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == t.pid) break;
    nanosleep(&(struct timespec){0, 10000000}, NULL);
  }
  cr_assert_eq(fake_cuda_state_reap(st), 1);
  cr_assert_eq(fake_cuda_state_used(st, 0), 256 * MiB);
  cr_assert_eq(fake_cuda_state_reap(st), 0, "reaped once");
  int status;
  waitpid(t.pid, &status, 0);
  close(t.in);
  fclose(t.out);
  fake_cuda_state_close(st);
}

/* Memory a dead process held is free for the next allocation that needs it. */
Test(state, out_of_memory_reaps_first) {
  fc_start(NULL, NULL);
  char line[128];
  tenant_t t = tenant_start(7 * 1024, line, sizeof line);
  cr_assert_str_eq(line, "ready\n");
  CUdeviceptr p;
  CU_EXPECT(CUDA_ERROR_OUT_OF_MEMORY, cuMemAlloc(&p, 2 * GiB));
  kill(t.pid, SIGKILL);
  int status;
  waitpid(t.pid, &status, 0);
  CU_OK(cuMemAlloc(&p, 2 * GiB));
  close(t.in);
  fclose(t.out);
}

Test(state, other_devices_are_refused) {
  fc_start(NULL, NULL);
  setenv("FAKE_CUDA_TOTAL_MEM", "4GiB", 1);
  char line[128];
  tenant_t t = tenant_start(0, line, sizeof line);
  cr_assert_str_eq(line, "failed init 3\n");
  cr_assert_eq(tenant_end(&t), 3);
}

static void write_file(const char *path, const void *data, size_t len) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  cr_assert_geq(fd, 0);
  cr_assert_eq(write(fd, data, len), (ssize_t)len);
  close(fd);
}

Test(state, garbage_files_are_refused) {
  write_file(state_path, "not a state file", 16);
  CU_EXPECT(CUDA_ERROR_NOT_INITIALIZED, cuInit(0));
  fake_cuda_state_t *st = NULL;
  char err[256];
  cr_assert_eq(fake_cuda_state_open(state_path, 0, NULL, &st, err, sizeof err), -1);
  cr_assert_not_null(strstr(err, "not a fake CUDA state file"), "%s", err);
  /* the right size, the wrong contents */
  uint64_t total = 8 * GiB;
  cr_assert_eq(fake_cuda_state_open("/tmp/fakecuda_state_probe_size", 1, &total, &st, err, sizeof err), 0);
  fake_cuda_state_close(st);
  struct stat sb;
  stat("/tmp/fakecuda_state_probe_size", &sb);
  unlink("/tmp/fakecuda_state_probe_size");
  char *junk = malloc((size_t)sb.st_size);
  memset(junk, 0x5a, (size_t)sb.st_size);
  write_file(state_path, junk, (size_t)sb.st_size);
  free(junk);
  CU_EXPECT(CUDA_ERROR_NOT_INITIALIZED, cuInit(0));
  /* a symlink is not followed */
  unlink(state_path);
  cr_assert_eq(symlink("/tmp", state_path), 0);
  CU_EXPECT(CUDA_ERROR_NOT_INITIALIZED, cuInit(0));
  unlink(state_path);
  CU_OK(cuInit(0)); /* a fresh file is made */
}

/* Slots of processes that died without a word come back to the table. */
Test(state, slots_are_recycled) {
  uint64_t total = 8 * GiB;
  fake_cuda_state_t *st = NULL;
  char err[256];
  cr_assert_eq(fake_cuda_state_open(state_path, 1, &total, &st, err, sizeof err), 0, "%s", err);
  for (int i = 0; i < FAKE_CUDA_SLOTS + 8; i++) {
    pid_t pid = fork();
    if (pid == 0) {
      int slot = fake_cuda_state_attach(st);
      if (slot < 0 || !fake_cuda_state_charge(st, slot, 0, MiB)) _exit(1);
      _exit(0); /* without detaching, as a killed process would */
    }
    int status;
    waitpid(pid, &status, 0);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child %d found no slot", i);
  }
  fake_cuda_state_reap(st);
  cr_assert_eq(fake_cuda_state_used(st, 0), 0);
  fake_cuda_proc_t rows[4];
  cr_assert_eq(fake_cuda_state_procs(st, rows, 4), 0);
  fake_cuda_state_close(st);
}
