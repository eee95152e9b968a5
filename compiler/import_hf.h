/*
 * import_hf.h — `primec import`: a Hugging Face config.json as a .prime
 * model.
 *
 *   primec import CONFIG.json [--model NAME] [--devices N] [--seq N]
 *                             [--layers N] [-o FILE]
 *
 * Reads the config of an OPT, Llama (1, 2, 3; grouped-query attention) or
 * BLOOM model and writes a model of the stdlib's decoder layer of that
 * family (the layers of examples/opt_layer.prime, llama2_layer.prime and
 * bloom_layer.prime) at the config's shape: hidden size, heads, key/value
 * heads, head dimension, feed-forward size, layers, vocabulary and
 * positions, with the Megatron-LM plan on `mesh(d: N)`. `primec check`,
 * `explain`, `plan` and `build` accept the file it writes.
 *
 * A config that is not JSON, lacks a field, has a field of the wrong type,
 * names another architecture, or gives values that make no model (heads
 * that do not divide the hidden size) is reported with the position of
 * the field in the file and exit code 1; nothing is written.
 * See docs/import.md.
 */
#ifndef PRIMEC_IMPORT_HF_H
#define PRIMEC_IMPORT_HF_H

/* argv[0] is "import". Returns the process exit code. */
int import_main(int argc, char **argv);

#endif
