/* mig/internal.h: helpers shared by the files of libtessera-mig (tsr__ prefix).
 * Nothing here is public API. */
#ifndef TESSERA_MIG_INTERNAL_H
#define TESSERA_MIG_INTERNAL_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>

#include "mig/mig.h"

/* ---- CSV and numbers (tasks.c) ---- */

/* Splits one CSV line in place (strips the newline; "double quoted" fields
 * with "" escapes; surrounding blanks of unquoted fields trimmed). Writes at
 * most `cap` field pointers; *out_n is the count found (an error if > cap). */
TSR_MUST_USE tsr_status_t tsr_csv_split(char *line, char **fields, int cap, int *out_n);
/* Whether a CSV line is a comment: its first non-blank character is '#'
 * (a quoted cell that starts with '#' is not one). */
bool tsr_csv_comment(const char *line);

/* Checks a row of the CSV forms whose 4 columns start with a GPU model
 * (long task times, reconfiguration times): INVALID_ARGUMENT naming
 * "path:line" unless it has 4 fields and a known model. */
TSR_MUST_USE tsr_status_t tsr_csv_gpu_row(const char *path, int line, char *const *fields, int nf);

/* Parses a whole string as a double (strtod, no trailing text). */
bool tsr_parse_double(const char *s, double *out);

bool tsr_model_known(const char *name);

/* ---- plans (plan.c) ---- */

TSR_MUST_USE tsr_status_t tsr_plan_new(const tsr_mig_model_t *model, const char *algorithm, int ntasks,
                                       tsr_mig_plan_t **out_plan);
/* Appends an instance, returning its index (-1 on allocation failure). */
int tsr_plan_add_instance(tsr_mig_plan_t *plan, const tsr_mig_instance_t *inst);
void tsr_plan_finish(tsr_mig_plan_t *plan, const tsr_mig_tasks_t *tasks);

/* ---- the timing engine (engine.c) ----
 *
 * A batch schedule is a tree schedule: every task of the batch sits on one
 * node of the repartitioning tree (node_of[i]); tasks of a node run back to
 * back in LPT order (forward) or SPT order (reversed). The engine turns it
 * into times: a node's instance is created once every earlier instance over
 * its slices is destroyed (parents before children when forward, children
 * before parents when reversed, and the previous batches' instances), all
 * creations and destructions go through one sequential reconfiguration
 * timeline, in the order they become ready. */

#define TSR__EPS 1e-9

/* What earlier batches leave behind: the live instance over each slice. */
typedef struct tsr__live_s {
  int instance; /* plan instance index */
  int node;
  double tasks_end; /* when its last task ends */
} tsr__live_t;

typedef struct tsr__state_s {
  int nlive;
  tsr__live_t live[TSR_MIG_MAX_SLICES];
  int slice_live[TSR_MIG_MAX_SLICES];    /* index into live[], -1 = free */
  double slice_free[TSR_MIG_MAX_SLICES]; /* when a free slice became free */
  double makespan;                       /* last task end so far */
  /* busy intervals of the reconfiguration timeline, sorted by start */
  double *busy;
  int nbusy;
  size_t capbusy;
} tsr__state_t;

void tsr_state_init(tsr__state_t *s);
void tsr_state_free(tsr__state_t *s);
TSR_MUST_USE tsr_status_t tsr_state_copy(tsr__state_t *dst, const tsr__state_t *src);

/* One batch to time. `ids[i]` is the task index (into `tasks`) of batch task
 * i; `node_of[i]` its node. */
typedef struct tsr__batch_s {
  const tsr_mig_model_t *model;
  const tsr_mig_tasks_t *tasks;
  int n;
  const int *ids;
  int *node_of;
  bool reversed;
  bool barrier; /* start after state->makespan (trivial concatenation) */
  bool reconfig_free;
} tsr__batch_t;

/* Timing result of a batch. Arrays sized by the batch / model. */
typedef struct tsr__timing_s {
  double makespan;  /* max(state makespan, this batch's last task end) */
  double batch_end; /* this batch's last task end */
  double slice_end[TSR_MIG_MAX_SLICES];
  int ncritical; /* slices whose end reaches makespan (within eps) */
  double *start; /* per batch task */
} tsr__timing_t;

/* Scratch memory for repeated evaluations of one batch size. */
typedef struct tsr__engine_s tsr__engine_t;

TSR_MUST_USE tsr_status_t tsr_engine_new(int n, tsr__engine_t **out_engine);
void tsr_engine_free(tsr__engine_t *e);

/* Times `b` after `state` into `out` (out->start must hold b->n doubles).
 * Does not change `state`. Cheap enough to call per candidate move. */
void tsr_engine_eval(tsr__engine_t *e, const tsr__batch_t *b, const tsr__state_t *state, tsr__timing_t *out);

/* Times `b` and commits it: appends its instances and placements to `plan`
 * (whose placements are indexed by task id) and advances `state`. */
TSR_MUST_USE tsr_status_t tsr_engine_commit(tsr__engine_t *e, const tsr__batch_t *b, tsr__state_t *state,
                                            tsr_mig_plan_t *plan, int batch_index);

/* ---- FAR (far.c) ---- */

typedef struct tsr__far_result_s {
  int *node_of;  /* per batch task, the best tree schedule */
  double phase2; /* its makespan before refinement (engine timing) */
  double final;  /* after refinement */
  int nallocations;
  int moves, swaps;
} tsr__far_result_t;

/* Runs FAR phases 1-3 on batch tasks `ids[0..n)` (indices into tasks) after
 * `state`, with the given orientation. result->node_of is malloc'd. */
TSR_MUST_USE tsr_status_t tsr_far_batch(const tsr_mig_model_t *model, const tsr_mig_tasks_t *tasks, const int *ids,
                                        int n, const tsr__state_t *state, bool reversed,
                                        const tsr_mig_far_options_t *opt, tsr__far_result_t *result);

/* Refinement by moves and swaps (Algorithm 2) of b->node_of in place. */
void tsr_refine(tsr__engine_t *e, tsr__batch_t *b, const tsr__state_t *state, int max_iter, bool wide, int *out_moves,
                int *out_swaps);

/* Deterministic PRNG (splitmix64). */
static inline uint64_t tsr__rand_next(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
static inline double tsr__rand_unit(uint64_t *s) {
  return (double)(tsr__rand_next(s) >> 11) * (1.0 / 9007199254740992.0);
}

#endif
