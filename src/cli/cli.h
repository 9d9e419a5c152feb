/* cli.h — the subcommands of the `fusionflow` executable. Each takes
 * (argc, argv) with argv[0] the subcommand's name and returns the exit
 * status: 0 success, 1 runtime error, 2 usage. */
#ifndef FF_CLI_CLI_H
#define FF_CLI_CLI_H

#include <signal.h>
#include <stddef.h>

#include "fusionflow/fusionflow.h"

int ff__cli_bench(int argc, char **argv);
int ff__cli_augment(int argc, char **argv);
int ff__cli_sim(int argc, char **argv);
int ff__cli_plan(int argc, char **argv);
int ff__cli_node(int argc, char **argv);
int ff__cli_recipe(int argc, char **argv);
int ff__cli_shards(int argc, char **argv);
int ff__cli_ops(int argc, char **argv);
int ff__cli_check(int argc, char **argv);

/* Parses the value s of option --opt of `fusionflow cmd` as a decimal
 * integer in [min, max]; on failure says so on stderr and returns 0. */
/* Prints a plan's JSON (ff_loader_plan) as it is, one step per line, or with
 * one_line all on one line (JSON Lines). */
void ff__cli_print_plan(const char *json, int one_line);

int ff__cli_parse_long(const char *cmd, const char *opt, const char *s, long min, long max, long *out);

/* The same for a finite number (strtod) in [min, max]: "inf" and "nan" are refused. */
int ff__cli_parse_double(const char *cmd, const char *opt, const char *s, double min, double max, double *out);

/* --num-classes (bench --recipe, recipe): the classes of a recipe's
 * mixup_cutmix, an integer in [1, FF_MAX_NUM_CLASSES] parsed as
 * ff__cli_parse_long does; on failure says so on stderr and returns 0. */
int ff__cli_parse_num_classes(const char *cmd, const char *s, long *out);

/* The pipeline text of recipe `name` for num_classes classes (0: as
 * published) through ff_recipe_pipeline, into buf (size bytes); *recipe_out
 * (may be NULL) gets the recipe. 1, or 0 after saying why on stderr
 * ("fusionflow CMD: ..."): an unknown recipe, num_classes for a recipe
 * without a batch stage, a text too long for buf. */
struct ff_recipe;
int ff__cli_recipe_pipeline(const char *cmd, const char *name, int num_classes, char *buf, size_t size,
                            const struct ff_recipe **recipe_out);

/* `fusionflow sim --ranks N ...`: several trainers on one node (sim_node.c);
 * argv as ff__cli_sim's. */
int ff__cli_sim_node(int argc, char **argv);

/* Parses --semantics' value ("v1" or "v2", an ff_semantics) into *out; on
 * failure says so on stderr and returns 0. */
int ff__cli_parse_semantics(const char *cmd, const char *s, int *out);

/* getopt_long over the long options opts (and -h) that reports a mistake
 * itself in one line on stderr, naming the command (argv[0]): an unknown
 * option with the nearest known one ("did you mean '--batch-size'?"), or a
 * missing value, then "see 'HELP --help'" (help: the command line that shows
 * the options; NULL: argv[0]); then returns '?'. Otherwise what getopt_long
 * returns. */
struct option;
int ff__cli_getopt(int argc, char **argv, const struct option *opts, int *li, const char *help);

/* A usage mistake in one line on stderr: "CMD: MESSAGE; see 'HELP --help'"
 * (help NULL: cmd), MESSAGE from the printf format fmt. Returns 2, the
 * usage exit status. */
int ff__cli_usage_error(const char *cmd, const char *help, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* An open that may read a streamed tar: source, from the command line
 * (opening.c): ff__cli_opening_start(&o, "fusionflow CMD") before it, the
 * open with ff__cli_opening_progress as ff_config.open_progress (or
 * ff__source_open_watched's progress) and &o as its context, then
 * ff__cli_opening_end(&o) whatever the open returned. Lines "fusionflow
 * CMD: opening, ..." on stderr say which shard and attempt it waits for,
 * when the open says one is due (ff_open_progress.due); Ctrl-C during a
 * streamed open gives it up.
 * ff__cli_opening_end restores Ctrl-C's handler and returns 1, after saying
 * "interrupted while opening the source", when Ctrl-C gave the open up (the
 * command then exits 130), else 0. */
typedef struct ff__cli_opening {
  const char *cmd;
  struct sigaction before; /* SIGINT's handler before the open */
} ff__cli_opening;
void ff__cli_opening_start(ff__cli_opening *o, const char *cmd);
int ff__cli_opening_progress(void *ctx, const ff_open_progress *p);
int ff__cli_opening_end(ff__cli_opening *o);

#endif
