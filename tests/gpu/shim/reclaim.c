/* reclaim.c: what a killed tenant held comes back at once. Under
 * libtessera-cuda.so with a lease of L bytes (argv[1]: the bytes
 * each tenant holds beside its context, sized so that two holders do not
 * fit and one does):
 *   1. this process (P) makes its context; a child (A) makes one and holds
 *      HOLD bytes; P's own HOLD is refused: the lease is full;
 *   2. A is killed (SIGKILL, not waited for: a zombie) and P asks again in
 *      a loop: reclaim_usable_ms is the time from the kill to the first
 *      allocation admitted (the daemon's reaper would take up to its tick);
 *   3. P frees; a child holds HOLD again and is killed and waited for, and
 *      a new process (this program, "next") starts at once: its first
 *      context and its HOLD must succeed on the first try.
 * Prints key=value lines (shim.sh checks them); exit 0 when every step ran.
 * Built against the real driver (-lcuda) and the CI's double. */
#include <cuda.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *name_of(CUresult r) {
  const char *s = "?";
  cuGetErrorName(r, &s);
  return s;
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* "hold": makes a context, holds `hold` bytes, says so (one byte, 1 when
 * it holds) on descriptor `fd`, and waits to be killed. */
static int hold_mode(size_t hold, int fd) {
  CUdevice dev;
  CUcontext ctx;
  CUdeviceptr d;
  char ok = cuInit(0) == CUDA_SUCCESS && cuDeviceGet(&dev, 0) == CUDA_SUCCESS &&
            cuCtxCreate(&ctx, NULL, 0, dev) == CUDA_SUCCESS && cuMemAlloc(&d, hold) == CUDA_SUCCESS;
  if (write(fd, &ok, 1) != 1) return 2;
  for (;;) pause();
}

/* A new process (this program, "hold": CUDA is not carried over a fork)
 * that holds `hold` bytes; its pid once it holds them, else -1. */
static pid_t holder(const char *self, const char *hold) {
  int p[2];
  if (pipe(p) != 0) return -1;
  pid_t pid = fork();
  if (pid == 0) {
    close(p[0]);
    char fd[16];
    snprintf(fd, sizeof(fd), "%d", p[1]);
    execl("/proc/self/exe", self, hold, "hold", fd, (char *)NULL);
    _exit(127);
  }
  close(p[1]);
  char ok = 0;
  if (pid < 0 || read(p[0], &ok, 1) != 1 || !ok) {
    if (pid > 0) kill(pid, SIGKILL), waitpid(pid, NULL, 0);
    pid = -1;
  }
  close(p[0]);
  return pid;
}

/* "next": a process started right after its predecessor was killed. */
static int next(size_t hold) {
  CUdevice dev;
  CUcontext ctx;
  CUdeviceptr d;
  CUresult r = cuInit(0);
  if (r == CUDA_SUCCESS) r = cuDeviceGet(&dev, 0);
  CUresult rc = r == CUDA_SUCCESS ? cuCtxCreate(&ctx, NULL, 0, dev) : r;
  CUresult ra = rc == CUDA_SUCCESS ? cuMemAlloc(&d, hold) : rc;
  printf("next_ctx=%s next_alloc=%s\n", name_of(rc), name_of(ra));
  return ra == CUDA_SUCCESS ? 0 : 1;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: reclaim HOLD_BYTES\n");
    return 2;
  }
  size_t hold = strtoull(argv[1], NULL, 10);
  if (argc > 2 && strcmp(argv[2], "next") == 0) return next(hold);
  if (argc > 3 && strcmp(argv[2], "hold") == 0) return hold_mode(hold, atoi(argv[3]));
  CUdevice dev;
  CUcontext ctx;
  CUdeviceptr d;
  if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&dev, 0) != CUDA_SUCCESS ||
      cuCtxCreate(&ctx, NULL, 0, dev) != CUDA_SUCCESS) {
    printf("error=no context\n");
    return 1;
  }
  fflush(stdout);
  pid_t a = holder(argv[0], argv[1]);
  if (a < 0) {
    printf("error=the holder could not hold\n");
    return 1;
  }
  CUresult r = cuMemAlloc(&d, hold);
  printf("reclaim_refused=%s\n", name_of(r));
  if (r == CUDA_SUCCESS) return 1;
  double t0 = now_ms();
  kill(a, SIGKILL);
  double t1 = t0;
  while ((r = cuMemAlloc(&d, hold)) != CUDA_SUCCESS && (t1 = now_ms()) - t0 < 5000) usleep(100);
  t1 = now_ms();
  printf("reclaim_usable=%s reclaim_usable_ms=%.3f\n", name_of(r), t1 - t0);
  waitpid(a, NULL, 0);
  if (r != CUDA_SUCCESS) return 1;
  cuMemFree(d);
  fflush(stdout);
  a = holder(argv[0], argv[1]);
  if (a < 0) {
    printf("error=the second holder could not hold\n");
    return 1;
  }
  kill(a, SIGKILL);
  waitpid(a, NULL, 0);
  fflush(stdout);
  pid_t b = fork();
  if (b == 0) {
    execl("/proc/self/exe", argv[0], argv[1], "next", (char *)NULL);
    _exit(127);
  }
  int st = 0;
  waitpid(b, &st, 0);
  printf("done=%d\n", WIFEXITED(st) && WEXITSTATUS(st) == 0);
  return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
}
