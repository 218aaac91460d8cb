/* tesserad.c: the daemon's own executable (the same code as `tessera daemon`). */
#include "daemon/main.h"

int main(int argc, char **argv) { return tsr_daemon_main(argc, argv); }
