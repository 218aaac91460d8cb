/* probe_visible.c: how a driver reads CUDA_VISIBLE_DEVICES. For each value
 * given, a fresh process sets it, calls cuInit, and prints one line:
 *   VALUE -> init=RC count=N|RC devs=UUID,UUID,...
 * Run by probe_visible.sh (which makes values from the machine's own UUIDs)
 * against the real driver on a GPU machine, and against the fake; the two
 * outputs, UUIDs replaced by the devices' physical indices, must agree. */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void uuid_text(CUdevice d, char *out, size_t len) {
  CUuuid u;
  if (cuDeviceGetUuid(&u, d) != CUDA_SUCCESS) {
    snprintf(out, len, "?");
    return;
  }
  const unsigned char *b = (const unsigned char *)u.bytes;
  snprintf(out, len, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2], b[3],
           b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
}

static void one(const char *value) {
  if (strcmp(value, "(unset)") == 0)
    unsetenv("CUDA_VISIBLE_DEVICES");
  else
    setenv("CUDA_VISIBLE_DEVICES", value, 1);
  CUresult rc = cuInit(0);
  int n = -1;
  CUresult rc_count = cuDeviceGetCount(&n);
  printf("'%s' -> init=%d count=", value, (int)rc);
  if (rc_count == CUDA_SUCCESS)
    printf("%d", n);
  else
    printf("rc%d", (int)rc_count);
  printf(" devs=");
  for (int i = 0; rc_count == CUDA_SUCCESS && i < n; i++) {
    char u[64];
    uuid_text(i, u, sizeof u);
    printf("%s%s", i ? "," : "", u);
  }
  printf("\n");
  fflush(stdout);
}

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    pid_t pid = fork();
    if (pid == 0) {
      one(argv[i]);
      _exit(0);
    }
    int st;
    waitpid(pid, &st, 0);
  }
  return 0;
}
