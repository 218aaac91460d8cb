/* mig/mig.h: planning and running batches of jobs on MIG GPUs (seed 003, FAR).
 *
 * A MIG GPU is cut into slices; instances are groups of slices that form the
 * nodes of a repartitioning tree (a GPU model, tsr_mig_model_t, is that tree
 * plus instance create/destroy times, kept as data). A batch of tasks
 * (tsr_mig_tasks_t) gives every task's run time on every instance size. A plan
 * (tsr_mig_plan_t) says which instances exist when, and which task runs when
 * on which instance. Planners: FAR (phases 1-3 of the paper: a family of
 * allocations, list scheduling over the repartitioning tree with one
 * sequential reconfiguration clock, refinement by moves and swaps), its
 * multi-batch concatenation, and the baselines FixPart(P), FixPartBest and
 * MISO-opt. tsr_mig_plan_validate() checks any plan with code of its own.
 *
 * Units: the scheduler works in seconds held as `double`, as the paper does
 * (task times, reconfiguration times, plan times; plan times are relative to
 * the plan's start, time 0). Slices and instance sizes are counts of compute
 * slices. A task time of INFINITY means "cannot run on that size".
 *
 * Threads: models are plain values. Task sets, plans and multi-batch
 * builders are owned by their creator; functions that take them const may run
 * concurrently on the same object, functions that take them mutable may not.
 * No function keeps global state, except tsr_mig_exec_* which starts threads
 * and child processes of its own and joins them before returning. */
#ifndef TESSERA_MIG_H
#define TESSERA_MIG_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "tessera/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TSR_MIG_MAX_SIZES 8
#define TSR_MIG_MAX_NODES 32
#define TSR_MIG_MAX_SLICES 16

/* ---- GPU models --------------------------------------------------------- */

/* One node of a repartitioning tree: a MIG instance placement.
 * `size` is its compute slices; `mask` the slices it occupies while it exists
 * (bit i = slice i), which can be more than `size` (the A100/H100 3-slice
 * instance on slices 0-2 also blocks slice 3); `first_slice` is the lowest
 * set bit; `parent` the index of the parent node (-1 for the root). */
typedef struct tsr_mig_node_s {
  int size;
  int first_slice;
  uint32_t mask;
  int parent;
} tsr_mig_node_t;

/* A GPU model: plain data, copy freely. `sizes` ascending, `create_s` and
 * `destroy_s` (seconds) indexed like `sizes`. Nodes are ordered so that every
 * parent comes before its children (node 0 is the root, which spans the
 * GPU). Valid partitions are exactly the sets of pairwise disjoint nodes. */
typedef struct tsr_mig_model_s {
  char name[16];
  int nslices;
  int nsizes;
  int sizes[TSR_MIG_MAX_SIZES];
  double create_s[TSR_MIG_MAX_SIZES];
  double destroy_s[TSR_MIG_MAX_SIZES];
  int nnodes;
  tsr_mig_node_t nodes[TSR_MIG_MAX_NODES];
} tsr_mig_model_t;

/* Fills `out_model` with the built-in model `name` (case-insensitive: "A30",
 * "A100", "H100", "H200", "B200"), with the paper's Table 1 reconfiguration
 * times (H200 and B200 use H100's until measured). INVALID_ARGUMENT names
 * the unknown model and lists the known ones. */
TSR_MUST_USE tsr_status_t tsr_mig_model_get(const char *name, tsr_mig_model_t *out_model);

/* The names of the built-in models, NULL-terminated. Static storage. */
const char *const *tsr_mig_model_names(void);

/* Replaces the reconfiguration times of `model` with the rows of the CSV file
 * `path` (header "gpu,size,create_s,destroy_s") whose gpu is the model's name;
 * H200 and B200 take H100's rows when the file has none of their own. Rows of
 * other GPUs are checked for syntax and ignored. Errors name "path:line". */
TSR_MUST_USE tsr_status_t tsr_mig_model_load_reconfig_csv(tsr_mig_model_t *model, const char *path);

/* Index of instance size `size` in model->sizes, or -1. */
int tsr_mig_model_size_index(const tsr_mig_model_t *model, int size);

/* Enumerates the valid full partitions (maximal sets of disjoint nodes that
 * cover every slice) as bit sets of node indices, in a fixed order, writing
 * at most `cap` of them; returns how many there are (19 for A100, 5 for A30). */
int tsr_mig_model_partitions(const tsr_mig_model_t *model, uint32_t *out_sets, int cap);

/* Parses a partition written as instance sizes left to right, e.g. "4,2,1" or
 * "1,1,1,1,1,1,1", into the node set that places them from slice 0 upwards.
 * INVALID_ARGUMENT when the sizes do not form a valid partition. */
TSR_MUST_USE tsr_status_t tsr_mig_model_parse_partition(const tsr_mig_model_t *model, const char *text,
                                                        uint32_t *out_set);

/* Writes a partition's sizes left to right ("4,2,1") into buf. */
void tsr_mig_model_format_partition(const tsr_mig_model_t *model, uint32_t set, char *buf, size_t cap);

/* ---- tasks -------------------------------------------------------------- */

/* A batch of tasks. `times[i * nsizes + k]` is task i's run time in seconds on
 * an instance of size model.sizes[k]; INFINITY where it cannot run. `names[i]`
 * and `commands[i]` (NULL when none) are owned by the set. Owned by its
 * creator; free with tsr_mig_tasks_free(). */
typedef struct tsr_mig_tasks_s {
  int n;
  int nsizes;
  int sizes[TSR_MIG_MAX_SIZES];
  char **names;
  char **commands;
  double *times;
} tsr_mig_tasks_t;

/* Makes a set of `n` tasks for `model`, named "t0".."t<n-1>", every time
 * INFINITY. */
TSR_MUST_USE tsr_status_t tsr_mig_tasks_create(const tsr_mig_model_t *model, int n, tsr_mig_tasks_t **out_tasks);

/* Sets task i's time on instance size `size` (seconds, finite and >= 0, or
 * INFINITY). INVALID_ARGUMENT for an unknown size or a bad time. */
TSR_MUST_USE tsr_status_t tsr_mig_tasks_set_time(tsr_mig_tasks_t *tasks, int i, int size, double seconds);

/* Renames task i (copies `name`); sets its command (copied; NULL clears). */
TSR_MUST_USE tsr_status_t tsr_mig_tasks_set_name(tsr_mig_tasks_t *tasks, int i, const char *name);
TSR_MUST_USE tsr_status_t tsr_mig_tasks_set_command(tsr_mig_tasks_t *tasks, int i, const char *command);

/* Task i's time on size index k (not size). */
static inline double tsr_mig_tasks_time(const tsr_mig_tasks_t *t, int i, int k) {
  return t->times[(long)i * t->nsizes + k];
}

/* Loads tasks from CSV. Two forms are accepted, told apart by the header:
 *   wide: "name,<size>,<size>,...[,command]" e.g. "name,1,2,3,4,7": one row per
 *         task, an empty cell where the task cannot run on that size;
 *   long: "gpu,kernel,slices,seconds" (data/far/rodinia_times_mean.csv): one row
 *         per (gpu, kernel, size); only rows whose gpu is the model's name are
 *         used (H200/B200 accept nothing but their own rows).
 * Errors (INVALID_ARGUMENT) name "path:line": malformed rows, a wrong column
 * count, negative/NaN/infinite times, a size the model does not have, an
 * unknown GPU model, duplicate tasks or sizes, a task feasible on no size. */
TSR_MUST_USE tsr_status_t tsr_mig_tasks_load_csv(const tsr_mig_model_t *model, const char *path,
                                                 tsr_mig_tasks_t **out_tasks);

/* Writes tasks in the wide CSV form. */
TSR_MUST_USE tsr_status_t tsr_mig_tasks_write_csv(const tsr_mig_tasks_t *tasks, FILE *out);

/* Deep copy; appends b's tasks after a's (same model) into a new set. */
TSR_MUST_USE tsr_status_t tsr_mig_tasks_concat(const tsr_mig_tasks_t *a, const tsr_mig_tasks_t *b,
                                               tsr_mig_tasks_t **out_tasks);

void tsr_mig_tasks_free(tsr_mig_tasks_t *tasks);

/* Lower bound of the optimal makespan (seconds):
 * sum_i min_s s * t_i(s) / model->nslices. */
double tsr_mig_lower_bound(const tsr_mig_model_t *model, const tsr_mig_tasks_t *tasks);

/* ---- plans -------------------------------------------------------------- */

/* One instance's life: created during [create_start, create_end), destroyed
 * during [destroy_start, destroy_end). destroy_* are -1 when the plan never
 * destroys it (it outlives the plan). `batch` is the batch that created it. */
typedef struct tsr_mig_instance_s {
  int node;
  int size;
  uint32_t mask;
  double create_start, create_end;
  double destroy_start, destroy_end;
  int batch;
} tsr_mig_instance_t;

/* One task's run: on instance `instance` (index into plan->instances) of
 * `size` slices, during [start, end). */
typedef struct tsr_mig_placement_s {
  int task;
  int instance;
  int size;
  double start, end;
  int batch;
} tsr_mig_placement_t;

/* A plan. Owns its arrays; free with tsr_mig_plan_free(). `placements` is
 * indexed by task. `reconfig_free` is true for the baselines that the paper
 * charges no reconfiguration (FixPart, MISO-opt): their creations and
 * destructions take no time. makespan = the last task end (seconds). Search
 * statistics (phase2_makespan, moves, swaps, ...) are filled by FAR. */
typedef struct tsr_mig_plan_s {
  tsr_mig_model_t model;
  char algorithm[64];
  bool reconfig_free;
  int ninstances;
  tsr_mig_instance_t *instances;
  int ntasks;
  tsr_mig_placement_t *placements;
  double makespan;
  double lower_bound;
  /* FAR statistics */
  int nallocations;       /* allocations in the phase-1 family */
  double phase2_makespan; /* best allocation before refinement */
  int moves, swaps;       /* refinement operations applied */
  int nbatches;
} tsr_mig_plan_t;

void tsr_mig_plan_free(tsr_mig_plan_t *plan);

/* Checks `plan` against `tasks` and the plan's model with code independent of
 * the planners: every instance is a node of the model; instances whose slices
 * overlap never live at the same time (so the live instances always form a
 * valid partition and no slice runs two things); creations and destructions
 * take their listed times (zero for reconfig_free plans) and never overlap
 * one another; every task runs exactly once, for its listed time on its size,
 * on a live, created instance of that size, not overlapping other tasks of
 * the instance; the makespan is the last task end. Returns NULL if valid,
 * else FAILED_PRECONDITION naming the first violation. Tolerance 1e-7 s. */
TSR_MUST_USE tsr_status_t tsr_mig_plan_validate(const tsr_mig_plan_t *plan, const tsr_mig_tasks_t *tasks);

/* ---- planners ----------------------------------------------------------- */

/* FAR options. Zero-initialised means the defaults: refine on, at most 1000
 * refinement iterations, no extra effort.
 *
 * The --effort search runs after plain FAR (refining more allocations with
 * larger neighbourhoods, then random restarts seeded by `seed`) and never
 * returns a worse plan than plain FAR. Its budget is counted in steps (one
 * refinement and timing of a candidate), so that the same tasks, seed and
 * budget give the same plan on every machine:
 *   effort_steps > 0   that many steps; with effort_s > 0 as well, the
 *                      search also stops when effort_s seconds of this
 *                      machine's clock have passed (then it is not
 *                      reproducible)
 *   effort_s > 0 alone effort_s x TSR_MIG_EFFORT_STEPS_PER_S steps, to the
 *                      nearest (at least 1): about effort_s seconds on
 *                      the reference machine */
/* Phase 1 starts each task at the size of least area s * t(s); when sizes
 * tie on it, FAR tries both the smaller and the larger (the authors'
 * planner takes the larger) and keeps the better plan. */
typedef enum tsr_mig_tie_e {
  TSR_MIG_TIE_BOTH = 0,    /* the default */
  TSR_MIG_TIE_SMALLER = 1, /* only the smaller size */
  TSR_MIG_TIE_LARGER = 2,  /* only the larger size (as the authors' code) */
} tsr_mig_tie_t;

typedef struct tsr_mig_far_options_s {
  tsr_mig_tie_t tie;
  /* Phase 2 takes sibling instances that free together left to right and
   * right to left, and keeps the better schedule of each allocation; true:
   * left to right only (the order FAR used before its phase changes, for comparisons). */
  bool one_sibling_order;
  bool no_refine;
  int max_iterations;
  double effort_s;
  uint64_t effort_steps;
  uint64_t seed;
} tsr_mig_far_options_t;

/* Steps of the --effort search a second on the reference machine: the
 * build machine (2-core AMD EPYC), 35-task A100 batches of mixed and poor
 * scaling, 100,000 steps in 1.31-1.48 s (2026-11-24; docs/mig.md). A larger
 * batch takes longer a step. */
#define TSR_MIG_EFFORT_STEPS_PER_S 70000.0

/* The steps a budget of `effort_s` seconds and `effort_steps` steps comes
 * to (see tsr_mig_far_options_t); 0 when neither asks for any. */
uint64_t tsr_mig_effort_steps(double effort_s, uint64_t effort_steps);

/* Plans `tasks` on `model` with FAR. The plan's statistics say the number of
 * allocations, the phase-2 makespan and the moves/swaps made. */
TSR_MUST_USE tsr_status_t tsr_mig_far_plan(const tsr_mig_model_t *model, const tsr_mig_tasks_t *tasks,
                                           const tsr_mig_far_options_t *options, tsr_mig_plan_t **out_plan);

/* FixPart(P): the instances of partition `set` (node bit set, see
 * tsr_mig_model_partitions) exist from time 0, tasks run in input (FIFO) order
 * each on the first instance to be free (among those of sizes it can run
 * on). No reconfiguration cost. FAILED_PRECONDITION if some task can run on
 * no instance of P. */
TSR_MUST_USE tsr_status_t tsr_mig_fixpart_plan(const tsr_mig_model_t *model, const tsr_mig_tasks_t *tasks, uint32_t set,
                                               tsr_mig_plan_t **out_plan);

/* FixPartBest: FixPart over every valid partition, the lowest makespan. */
TSR_MUST_USE tsr_status_t tsr_mig_fixpart_best_plan(const tsr_mig_model_t *model, const tsr_mig_tasks_t *tasks,
                                                    tsr_mig_plan_t **out_plan);

/* MISO-opt as the paper describes it: tasks in FIFO order; each round takes
 * the partition (and the order of its instances) that maximises the sum of
 * the speedups t_k(smallest)/t_k(|I|) of the next tasks, runs them together,
 * and the next round starts when the round's last task ends. No
 * reconfiguration cost. */
TSR_MUST_USE tsr_status_t tsr_mig_miso_plan(const tsr_mig_model_t *model, const tsr_mig_tasks_t *tasks,
                                            tsr_mig_plan_t **out_plan);

/* ---- multi-batch -------------------------------------------------------- */

/* How consecutive batches are joined (Section 4 of the paper). */
typedef enum tsr_mig_concat_e {
  TSR_MIG_CONCAT_TRIVIAL = 0,       /* batch k starts after batch k-1's last task */
  TSR_MIG_CONCAT_REVERSE = 1,       /* every other batch reversed, started as early as valid */
  TSR_MIG_CONCAT_REVERSE_MOVES = 2, /* the same, then moves/swaps to overlap more */
} tsr_mig_concat_t;

typedef struct tsr_mig_multi_s tsr_mig_multi_t;

/* Starts an empty multi-batch plan. Owned by the caller; not thread-safe. */
TSR_MUST_USE tsr_status_t tsr_mig_multi_create(const tsr_mig_model_t *model, tsr_mig_concat_t mode,
                                               const tsr_mig_far_options_t *options, tsr_mig_multi_t **out_multi);

/* Plans `batch` with FAR and appends it after what is planned so far. The
 * batch's tasks are copied. Returns in *out_batch_moves/swaps (may be NULL)
 * the overlap moves and swaps made for this batch. A batch refused (another
 * GPU model, a task that can run on no size, out of memory while copying or
 * planning it) leaves the builder as it was. Only running out of memory
 * while the planned batch is joined to the plan leaves it half-joined: the
 * builder then refuses every further call (FAILED_PRECONDITION). */
TSR_MUST_USE tsr_status_t tsr_mig_multi_add(tsr_mig_multi_t *multi, const tsr_mig_tasks_t *batch, int *out_moves,
                                            int *out_swaps);

/* The makespan so far (seconds). */
double tsr_mig_multi_makespan(const tsr_mig_multi_t *multi);

/* The combined plan and the combined task set (batches in order); both new,
 * owned by the caller. */
TSR_MUST_USE tsr_status_t tsr_mig_multi_result(const tsr_mig_multi_t *multi, tsr_mig_plan_t **out_plan,
                                               tsr_mig_tasks_t **out_tasks);

void tsr_mig_multi_free(tsr_mig_multi_t *multi);

/* ---- synthetic workloads (Section 6.3) ---------------------------------- */

/* Generator parameters. `p[k]` is the fraction of tasks that scale well up to
 * size model.sizes[k] (the fractions should sum to 1); `p_sup` the fraction of
 * those (sizes >= 2) that start super-linear; task times on 1 slice uniform
 * in [t_min, t_max] seconds. */
typedef struct tsr_mig_gen_s {
  double p[TSR_MIG_MAX_SIZES];
  double p_sup;
  double t_min, t_max;
} tsr_mig_gen_t;

/* Named presets: scaling "poor", "mixed", "good" and times "wide" (1-100 s)
 * or "narrow" (90-100 s), p_sup 0.5. For A30 (sizes 1,2,4) poor = (50,50,0),
 * mixed = (34,33,33), good = (0,50,50) percent. */
TSR_MUST_USE tsr_status_t tsr_mig_gen_preset(const tsr_mig_model_t *model, const char *scaling, const char *times,
                                             tsr_mig_gen_t *out_gen);

/* Generates `n` tasks, reproducibly from `seed` (same seed, same tasks on
 * every platform). */
TSR_MUST_USE tsr_status_t tsr_mig_generate(const tsr_mig_model_t *model, const tsr_mig_gen_t *gen, int n, uint64_t seed,
                                           tsr_mig_tasks_t **out_tasks);

/* ---- output ------------------------------------------------------------- */

/* Writes the plan as one line of compact JSON (base/json's writer): model,
 * algorithm, makespan, lower bound, rho, instances (node, size, slices,
 * create/destroy times, null when never destroyed) and tasks (name, command,
 * size, instance, start, end). Seconds are written as the shortest decimal
 * that reads back as the same double. */
TSR_MUST_USE tsr_status_t tsr_mig_plan_write_json(const tsr_mig_plan_t *plan, const tsr_mig_tasks_t *tasks, FILE *out);

/* Reads a plan written by tsr_mig_plan_write_json back, with the task set it
 * describes (names, commands, and each task's time on its planned size). */
TSR_MUST_USE tsr_status_t tsr_mig_plan_read_json(const char *path, tsr_mig_plan_t **out_plan,
                                                 tsr_mig_tasks_t **out_tasks);

/* Writes a readable table: one line per task in start order, then the
 * instances with their create/destroy times, then makespan, bound and rho. */
TSR_MUST_USE tsr_status_t tsr_mig_plan_write_text(const tsr_mig_plan_t *plan, const tsr_mig_tasks_t *tasks, FILE *out);

/* Writes an SVG Gantt chart: one lane per slice, time to the right; each
 * instance an outlined span over its slices, tasks labelled bars inside,
 * creations and destructions as coloured blocks, a time axis and a legend. */
TSR_MUST_USE tsr_status_t tsr_mig_plan_write_svg(const tsr_mig_plan_t *plan, const tsr_mig_tasks_t *tasks, FILE *out);

/* ---- execution ---------------------------------------------------------- */

typedef enum tsr_mig_backend_e {
  TSR_MIG_BACKEND_DRY_RUN = 0, /* run the commands with the plan's concurrency, no MIG calls */
  TSR_MIG_BACKEND_NVML = 1,    /* create/destroy real MIG instances through NVML */
} tsr_mig_backend_t;

/* Execution options. `time_scale` multiplies planned durations where the
 * executor waits on its own (dry-run creations/destructions and tasks
 * without a command); 1.0 = real time. `gpu_index` is the NVML device. */
typedef struct tsr_mig_exec_options_s {
  tsr_mig_backend_t backend;
  double time_scale;
  unsigned gpu_index;
  FILE *log; /* one line per event, may be NULL */
} tsr_mig_exec_options_t;

/* What really happened to one task (seconds since the run's start). */
typedef struct tsr_mig_exec_report_s {
  double start, end;
  int exit_status; /* the command's exit status; -1 if it did not run */
} tsr_mig_exec_report_t;

/* Carries out `plan` (Algorithm 3): every instance waits for the instances
 * over its slices that come before it to be destroyed, is created, runs its
 * tasks in order (`sh -c COMMAND` with CUDA_VISIBLE_DEVICES set to the
 * instance's UUID, "MIG-dry-run-<instance>" in dry-run), and is destroyed
 * when its last task ends and a later instance needs its slices. Creations
 * and destructions go one at a time. `out_reports` (plan->ntasks entries,
 * caller-allocated) receives real start/end per task. The nvml backend
 * enables nothing: it refuses (FAILED_PRECONDITION / PERMISSION_DENIED /
 * UNAVAILABLE, saying why) without NVML, without root, or when the GPU is
 * not already in MIG mode. Returns an error if a task failed, or if a wait
 * failed for another reason than a signal handler's interruption (which is
 * resumed): a command that could not be started or waited for (ECHILD when
 * SIGCHLD is ignored), a sleep the system refused. */
TSR_MUST_USE tsr_status_t tsr_mig_exec(const tsr_mig_plan_t *plan, const tsr_mig_tasks_t *tasks,
                                       const tsr_mig_exec_options_t *options, tsr_mig_exec_report_t *out_reports);

#ifdef __cplusplus
}
#endif
#endif /* TESSERA_MIG_H */
