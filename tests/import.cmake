# `primec import` (label "golden"; docs/import.md). The config files are
# written here, into the build folder: the published configurations of
# OPT-175B, Llama-7B (Llama 1), Llama-2-70B (grouped-query attention),
# Llama-3-8B, BLOOM-176B and BLOOM-560m (the early field names n_embed,
# n_head), with their fields as published, and malformed ones. Each is
#
#   import/golden/CASE   the whole output of `primec import CASE.json`
#                        (the model written, or the diagnostics and the exit
#                        code) against tests/golden/import/CASE.out
#   import/check/CASE    the model written passes `primec check`
#   import/example/CASE  one layer of the import, on 4 devices, schedules
#                        exactly as the example's hand-written model
#
# `cmake --build BUILD --target update-golden` rewrites the expected files.

set(PRIMEC_IMPORT_WORK ${CMAKE_CURRENT_BINARY_DIR}/import)
set(PRIMEC_IMPORT_GOLDEN ${CMAKE_CURRENT_SOURCE_DIR}/golden/import)
set(PRIMEC_IMPORT_SH ${CMAKE_CURRENT_SOURCE_DIR}/import/import.sh)
file(MAKE_DIRECTORY ${PRIMEC_IMPORT_WORK})

function(primec_import_config name text)
  file(WRITE ${PRIMEC_IMPORT_WORK}/${name}.json "${text}")
endfunction()

# ---- Published configurations -------------------------------------------

primec_import_config(opt-175b [=[{
  "_name_or_path": "facebook/opt-175b",
  "activation_dropout": 0.0,
  "activation_function": "relu",
  "architectures": ["OPTForCausalLM"],
  "attention_dropout": 0.0,
  "bos_token_id": 2,
  "do_layer_norm_before": true,
  "dropout": 0.1,
  "enable_bias": true,
  "eos_token_id": 2,
  "ffn_dim": 49152,
  "hidden_size": 12288,
  "init_std": 0.02,
  "layer_norm_elementwise_affine": true,
  "layerdrop": 0.0,
  "max_position_embeddings": 2048,
  "model_type": "opt",
  "num_attention_heads": 96,
  "num_hidden_layers": 96,
  "pad_token_id": 1,
  "torch_dtype": "float16",
  "transformers_version": "4.21.0.dev0",
  "use_cache": true,
  "vocab_size": 50272,
  "word_embed_proj_dim": 12288
}
]=])

primec_import_config(llama-7b [=[{"architectures": ["LlamaForCausalLM"], "bos_token_id": 0, "eos_token_id": 1, "hidden_act": "silu", "hidden_size": 4096, "intermediate_size": 11008, "initializer_range": 0.02, "max_sequence_length": 2048, "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 32, "pad_token_id": -1, "rms_norm_eps": 1e-06, "torch_dtype": "float16", "transformers_version": "4.27.0.dev0", "use_cache": true, "vocab_size": 32000}
]=])

primec_import_config(llama-2-70b [=[{
  "architectures": ["LlamaForCausalLM"],
  "bos_token_id": 1,
  "eos_token_id": 2,
  "hidden_act": "silu",
  "hidden_size": 8192,
  "initializer_range": 0.02,
  "intermediate_size": 28672,
  "max_position_embeddings": 4096,
  "model_type": "llama",
  "num_attention_heads": 64,
  "num_hidden_layers": 80,
  "num_key_value_heads": 8,
  "pretraining_tp": 1,
  "rms_norm_eps": 1e-05,
  "rope_scaling": null,
  "tie_word_embeddings": false,
  "torch_dtype": "float16",
  "transformers_version": "4.31.0.dev0",
  "use_cache": true,
  "vocab_size": 32000
}
]=])

primec_import_config(llama-3-8b [=[{
  "architectures": ["LlamaForCausalLM"],
  "attention_bias": false,
  "attention_dropout": 0.0,
  "bos_token_id": 128000,
  "eos_token_id": 128001,
  "hidden_act": "silu",
  "hidden_size": 4096,
  "initializer_range": 0.02,
  "intermediate_size": 14336,
  "max_position_embeddings": 8192,
  "model_type": "llama",
  "num_attention_heads": 32,
  "num_hidden_layers": 32,
  "num_key_value_heads": 8,
  "pretraining_tp": 1,
  "rms_norm_eps": 1e-05,
  "rope_scaling": null,
  "rope_theta": 500000.0,
  "tie_word_embeddings": false,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.40.0.dev0",
  "use_cache": true,
  "vocab_size": 128256
}
]=])

primec_import_config(bloom-176b [=[{
  "apply_residual_connection_post_layernorm": false,
  "attention_dropout": 0.0,
  "attention_softmax_in_fp32": true,
  "bias_dropout_fusion": true,
  "bos_token_id": 1,
  "eos_token_id": 2,
  "hidden_dropout": 0.0,
  "hidden_size": 14336,
  "initializer_range": 0.02,
  "layer_norm_epsilon": 1e-05,
  "masked_softmax_fusion": true,
  "model_type": "bloom",
  "n_head": 112,
  "n_inner": null,
  "n_layer": 70,
  "offset_alibi": 100,
  "pad_token_id": 3,
  "pretraining_tp": 4,
  "skip_bias_add": true,
  "skip_bias_add_qkv": false,
  "slow_but_exact": false,
  "unk_token_id": 0,
  "use_cache": true,
  "vocab_size": 250880
}
]=])

primec_import_config(bloom-560m [=[{
  "apply_residual_connection_post_layernorm": false,
  "architectures": ["BloomForCausalLM"],
  "attention_dropout": 0.0,
  "attention_softmax_in_fp32": true,
  "bias_dropout_fusion": true,
  "bos_token_id": 1,
  "eos_token_id": 2,
  "hidden_dropout": 0.0,
  "initializer_range": 0.02,
  "layer_norm_epsilon": 1e-05,
  "masked_softmax_fusion": true,
  "model_type": "bloom",
  "n_embed": 1024,
  "n_inner": null,
  "n_layer": 24,
  "num_attention_heads": 16,
  "offset_alibi": 100,
  "pad_token_id": 3,
  "pretraining_tp": 1,
  "skip_bias_add": true,
  "skip_bias_add_qkv": false,
  "slow_but_exact": false,
  "unk_token_id": 0,
  "use_cache": true,
  "vocab_size": 250880
}
]=])

# ---- Malformed configurations (one mistake each) ------------------------

primec_import_config(bad-not-json [=[hidden_size = 4096
]=])
primec_import_config(bad-empty "")
primec_import_config(bad-truncated [=[{
  "model_type": "opt",
  "hidden_size": 768,
]=])
primec_import_config(bad-duplicate-field [=[{
  "model_type": "opt",
  "hidden_size": 768,
  "hidden_size": 1024
}
]=])
primec_import_config(bad-top-level-array [=[[{"model_type": "opt"}]
]=])
primec_import_config(bad-wrong-types [=[{
  "model_type": "opt",
  "hidden_size": "768",
  "num_attention_heads": 12,
  "ffn_dim": 3072.5,
  "num_hidden_layers": [12],
  "vocab_size": 50272,
  "max_position_embeddings": 2048
}
]=])
primec_import_config(bad-missing-fields [=[{
  "model_type": "llama",
  "hidden_size": 4096,
  "num_attention_heads": 32
}
]=])
primec_import_config(bad-unknown-architecture [=[{
  "architectures": ["GPT2LMHeadModel"],
  "model_type": "gpt2",
  "n_embd": 768,
  "n_head": 12,
  "n_layer": 12
}
]=])
primec_import_config(bad-unknown-architectures-only [=[{
  "architectures": ["MistralForCausalLM"],
  "hidden_size": 4096
}
]=])
primec_import_config(bad-no-family [=[{
  "hidden_size": 4096
}
]=])
primec_import_config(bad-model-type-not-string [=[{
  "model_type": 7
}
]=])
primec_import_config(bad-heads-do-not-divide-hidden [=[{
  "model_type": "opt",
  "hidden_size": 1000,
  "num_attention_heads": 12,
  "ffn_dim": 4000,
  "num_hidden_layers": 2,
  "vocab_size": 50272,
  "max_position_embeddings": 2048
}
]=])
primec_import_config(bad-kv-heads-do-not-divide-heads [=[{
  "model_type": "llama",
  "hidden_size": 4096,
  "intermediate_size": 11008,
  "num_attention_heads": 32,
  "num_key_value_heads": 6,
  "num_hidden_layers": 32,
  "vocab_size": 32000,
  "max_position_embeddings": 4096
}
]=])
primec_import_config(bad-zero-and-negative [=[{
  "model_type": "bloom",
  "hidden_size": 0,
  "n_head": -16,
  "n_layer": 24,
  "vocab_size": 250880
}
]=])
primec_import_config(bad-too-large [=[{
  "model_type": "llama",
  "hidden_size": 4096,
  "intermediate_size": 11008,
  "num_attention_heads": 32,
  "num_hidden_layers": 32,
  "vocab_size": 32000,
  "max_position_embeddings": 100000000
}
]=])
primec_import_config(bad-integer-overflow [=[{
  "model_type": "opt",
  "hidden_size": 100000000000000000000
}
]=])
# OPT-350m: post-LayerNorm, which the stdlib's OPT layer is not.
primec_import_config(bad-opt-post-layernorm [=[{
  "activation_function": "relu",
  "architectures": ["OPTForCausalLM"],
  "do_layer_norm_before": false,
  "ffn_dim": 4096,
  "hidden_size": 1024,
  "max_position_embeddings": 2048,
  "model_type": "opt",
  "num_attention_heads": 16,
  "num_hidden_layers": 24,
  "vocab_size": 50272,
  "word_embed_proj_dim": 512
}
]=])
primec_import_config(bad-llama-activation [=[{
  "hidden_act": "gelu",
  "hidden_size": 4096,
  "intermediate_size": 11008,
  "max_position_embeddings": 2048,
  "model_type": "llama",
  "num_attention_heads": 32,
  "num_hidden_layers": 32,
  "vocab_size": 32000
}
]=])

# ---- The tests ----------------------------------------------------------

# CASE,ARG,ARG...: the arguments after the config file.
set(PRIMEC_IMPORT_GOLDEN_CASES
    "opt-175b,--devices,8"
    "llama-7b"
    "llama-2-70b,--devices,8"
    "llama-3-8b,--devices,8,--model,llama3_8b"
    "bloom-176b,--devices,8"
    "bloom-560m,--seq,1024"
    "llama-2-70b-devices-do-not-divide,--devices,3"
    "llama-2-70b-bad-model-name,--model,2x"
    "missing-file"
    bad-not-json bad-empty bad-truncated bad-duplicate-field bad-top-level-array
    bad-wrong-types bad-missing-fields bad-unknown-architecture
    bad-unknown-architectures-only bad-no-family bad-model-type-not-string
    bad-heads-do-not-divide-hidden bad-kv-heads-do-not-divide-heads bad-zero-and-negative
    bad-too-large bad-integer-overflow bad-opt-post-layernorm bad-llama-activation)
# Cases that read another case's config.
file(COPY_FILE ${PRIMEC_IMPORT_WORK}/llama-2-70b.json
     ${PRIMEC_IMPORT_WORK}/llama-2-70b-devices-do-not-divide.json)
file(COPY_FILE ${PRIMEC_IMPORT_WORK}/llama-2-70b.json
     ${PRIMEC_IMPORT_WORK}/llama-2-70b-bad-model-name.json)
file(REMOVE ${PRIMEC_IMPORT_WORK}/missing-file.json)

set(PRIMEC_IMPORT_UPDATE_COMMANDS)
foreach(case ${PRIMEC_IMPORT_GOLDEN_CASES})
  string(REPLACE "," ";" args "${case}")
  list(POP_FRONT args name)
  add_test(NAME import/golden/${name}
           COMMAND sh ${PRIMEC_IMPORT_SH} golden $<TARGET_FILE:primec> ${PRIMEC_IMPORT_WORK}
                   ${PRIMEC_IMPORT_GOLDEN}/${name}.out ${name} ${args})
  set_tests_properties(import/golden/${name} PROPERTIES LABELS golden TIMEOUT 60)
  list(APPEND PRIMEC_IMPORT_UPDATE_COMMANDS
       COMMAND sh ${PRIMEC_IMPORT_SH} update $<TARGET_FILE:primec> ${PRIMEC_IMPORT_WORK}
               ${PRIMEC_IMPORT_GOLDEN}/${name}.out ${name} ${args})
endforeach()
add_custom_target(update-golden-import ${PRIMEC_IMPORT_UPDATE_COMMANDS}
                  DEPENDS primec
                  COMMENT "rewriting tests/golden/import expected files (review them with git diff)"
                  VERBATIM)
if(TARGET update-golden)
  add_dependencies(update-golden update-golden-import)
endif()

# Every published configuration, whole (all its layers), passes check.
foreach(case "opt-175b;--devices;8" "llama-7b;--devices;4" "llama-2-70b;--devices;8"
             "llama-3-8b;--devices;8" "bloom-176b;--devices;8" "bloom-560m;--devices;4")
  set(args ${case})
  list(POP_FRONT args name)
  add_test(NAME import/check/${name}
           COMMAND sh ${PRIMEC_IMPORT_SH} check $<TARGET_FILE:primec> ${PRIMEC_IMPORT_WORK}
                   ${name} ${args})
  set_tests_properties(import/check/${name} PROPERTIES LABELS golden TIMEOUT 120)
endforeach()

# One layer of OPT-175B, Llama-2-70B and BLOOM-176B on 4 devices is the
# examples' published-shape Megatron-LM model.
foreach(case "opt-175b;opt_layer;opt_megatron" "llama-2-70b;llama2_layer;llama2_megatron"
             "bloom-176b;bloom_layer;bloom_megatron")
  list(GET case 0 name)
  list(GET case 1 example)
  list(GET case 2 model)
  add_test(NAME import/example/${name}
           COMMAND sh ${PRIMEC_IMPORT_SH} example $<TARGET_FILE:primec> ${PRIMEC_IMPORT_WORK}
                   ${name} ${CMAKE_SOURCE_DIR}/examples/${example}.prime ${model}
                   --layers 1 --devices 4)
  set_tests_properties(import/example/${name} PROPERTIES LABELS golden TIMEOUT 60)
endforeach()
