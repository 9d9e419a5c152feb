/* cli.h — the subcommands of the `fusionflow` executable. Each takes
 * (argc, argv) with argv[0] the subcommand's name and returns the exit
 * status: 0 success, 1 runtime error, 2 usage. */
#ifndef FF_CLI_CLI_H
#define FF_CLI_CLI_H

int ff__cli_bench(int argc, char **argv);
int ff__cli_augment(int argc, char **argv);
int ff__cli_sim(int argc, char **argv);

#endif
