/*
 * plan_cli.h — `primec plan`: choose the partition of every instance of
 * a model for a device count and a hardware profile, and compare the
 * choice with the model's own pinned plan (e.g. the Megatron-LM plan of
 * an example). See plan.h for the search and cost.h for the prices.
 */
#ifndef PRIMEC_PLAN_CLI_H
#define PRIMEC_PLAN_CLI_H

/* argv[0] is "plan". Returns the process exit code. */
int plan_main(int argc, char **argv);

#endif
