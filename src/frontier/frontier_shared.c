/* frontier_shared.c: libtessera-frontier.so is the static library whole
 * (CMakeLists.txt links it with --whole-archive); this file only gives the
 * target a source. */
typedef int tsr__frontier_shared_t;
