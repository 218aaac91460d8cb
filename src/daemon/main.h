/* daemon/main.h: tesserad's entry point (main.c), which tesserad.c calls. */
#ifndef TESSERA_DAEMON_MAIN_H
#define TESSERA_DAEMON_MAIN_H

/* tesserad's main (also `tessera daemon`). */
int tsr_daemon_main(int argc, char **argv);

#endif
