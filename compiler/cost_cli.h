/*
 * cost_cli.h — the `primec cost` command.
 */
#ifndef PRIMEC_COST_CLI_H
#define PRIMEC_COST_CLI_H

/* `primec cost FILE [--model NAME] [--profile NAME|PATH] [--elem-bytes N]
 * [--devices-per-node N] [--json]`: the cost report (cost.h) of every
 * model in FILE (default profile v100). argv[0] is the command name.
 * Returns the exit code (0, 1 input errors, 2 usage or I/O). */
int cost_command_main(int argc, char **argv);

#endif
