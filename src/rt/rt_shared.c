/* rt_shared.c: libtessera-rt.so is the static library whole (CMakeLists.txt
 * links it with --whole-archive); this file only gives the target a source. */
typedef int tsr__rt_shared_t;
