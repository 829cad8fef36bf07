#!/usr/bin/env python3
"""Tiny random-weight models in MLX format, and mlx-lm reference outputs for them.

The Rust parity tests call this with the reference python ($RMX_TEST_PYTHON, see
scripts/test-env.sh). Everything is written and read by mlx-lm 0.32.2 itself, so the files are
exactly what `mlx_lm convert` would produce and the outputs exactly what `mlx_lm generate` does.

  make      --family F --quant Q --out DIR [--script TEXT] [--scripts JSON]
            --script: a model that greedily writes TEXT after a chat prompt (see `script_weights`)
            --scripts: [[PREFIX, TEXT], ...]: writes each TEXT after a prompt ending in PREFIX
  reference --model DIR (--prompt-ids IDS.json | --prompt TEXT [--chat] | --requests REQS.json)
            [--max-tokens 64] --out OUT.json [--logits OUT.f32]
            --requests: a JSON list of {"prompt": TEXT, "chat": BOOL}, all run on one load of
            the model (python's start and mlx-lm's load cost seconds each); OUT.json is then a
            list of answers and OUT.f32 holds their logits one after the other
            [--make F Q]: first write the model as `make --family F --quant Q --out DIR` does
            unless DIR holds one, then print `ready` (the caller can load it while mlx-lm
            computes): one python start and mlx-lm import for both steps
  rerank    --model DIR --request REQ.json --out OUT.json
            REQ.json: {"query", "documents": [...], "instruction"}; Qwen3-Reranker's recipe as
            its model card's code runs it (prefix + pair + suffix, each encoded without special
            tokens; score = P(yes) against no at the last position), one document at a time
  bench     --model DIR --prompt-len N --max-tokens M
  check     --model DIR [--max-tokens 64]   (self test: reference == mlx_lm.generate)
  serve     the commands above from stdin, one JSON list of arguments a line; each answered by
            `done {"ok", "stdout", "error"}` on stdout (after `ready` for reference --make)

Families: llama llama_tied mistral qwen2 qwen3 qwen3_tied qwen3_yarn gemma3 qwen3_moe gpt_oss
          qwen3_next qwen3_5 qwen3_5_moe phi3 phi3_plain smollm3 mistral3 gemma3_vl gemma4
          gemma4_moe gemma4_text
Quants:   f32 bf16 8bit 4bit 4bit-mixed mxfp4 mxfp8 nvfp4

On MLX's CPU backend `gather_mm` takes float32 only, so mlx-lm cannot run bf16 experts there;
`load` patches its SwitchLinear to multiply them in float32 and round back, as rmx does on the
CPU (crates/rmx-models/src/moe.rs).
"""

import argparse
import copy
import hashlib
import itertools
import json
import os
import shutil
import sys
import time
import zlib
from pathlib import Path

FAMILIES = [
    "llama", "llama_tied", "mistral", "qwen2", "qwen3", "qwen3_tied", "qwen3_yarn", "gemma3",
    "qwen3_moe", "gpt_oss", "qwen3_next", "qwen3_5", "qwen3_5_moe", "phi3", "phi3_plain",
    "smollm3", "mistral3", "gemma3_vl", "gemma4", "gemma4_moe", "gemma4_text",
    "llama_hd64", "qwen3_hd64",
]
QUANTS = ["f32", "bf16", "8bit", "4bit", "4bit-mixed", "mxfp4", "mxfp8", "nvfp4"]
# The microscaling modes: MLX's own group size and bits for each.
FLOAT_QUANTS = ("mxfp4", "mxfp8", "nvfp4")

# A short harmony-format template (the gptoss npm tokenizer ships none): enough for a chat
# prompt's tokens; the harmony channels themselves are the engine's business.
HARMONY_TEMPLATE = (
    "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n"
    "Reasoning: medium<|end|>"
    "{% for message in messages %}"
    "{% if message['role'] == 'assistant' %}"
    "<|start|>assistant<|channel|>final<|message|>{{ message['content'] }}<|end|>"
    "{% else %}<|start|>{{ message['role'] }}<|message|>{{ message['content'] }}<|end|>{% endif %}"
    "{% endfor %}{% if add_generation_prompt %}<|start|>assistant{% endif %}"
)

# Llama-2-chat's template (the llama2 npm tokenizer ships none).
LLAMA2_CHAT_TEMPLATE = (
    "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}"
    "{% set system_message = messages[0]['content'] %}{% else %}"
    "{% set loop_messages = messages %}{% set system_message = false %}{% endif %}"
    "{% for message in loop_messages %}"
    "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"
    "{% endif %}"
    "{% if loop.index0 == 0 and system_message != false %}"
    "{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}"
    "{% else %}{% set content = message['content'] %}{% endif %}"
    "{% if message['role'] == 'user' %}"
    "{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}"
    "{% elif message['role'] == 'assistant' %}"
    "{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}"
)

# Mistral-7B-Instruct-v0.1/v0.2's template.
MISTRAL_CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"
    "{% endif %}"
    "{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}"
    "{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token}}"
    "{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}"
    "{% endif %}{% endfor %}"
)

# Tiny but real-shaped configs. Deliberately awkward: explicit head_dim != hidden/heads where
# the family reads it, GQA everywhere, odd layer counts, the real vocab sizes (qwen pads past
# its tokenizer, as the real checkpoints do).
FAMILY_SPECS = {
    "llama": dict(
        tokenizer_size=128256,
        tokenizer="llama3_1",
        template=None,
        generation={"bos_token_id": 128000, "eos_token_id": [128001, 128008, 128009]},
        config={
            "architectures": ["LlamaForCausalLM"],
            "model_type": "llama",
            "hidden_size": 128,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "head_dim": 48,
            "num_hidden_layers": 3,
            "intermediate_size": 192,
            "vocab_size": 128256,
            "rms_norm_eps": 1e-5,
            "rope_theta": 500000.0,
            "rope_scaling": {
                "rope_type": "llama3",
                "factor": 8.0,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": 8192,
            },
            "max_position_embeddings": 131072,
            "tie_word_embeddings": False,
            "attention_bias": False,
            "mlp_bias": False,
            "hidden_act": "silu",
            "bos_token_id": 128000,
            "eos_token_id": [128001, 128008, 128009],
        },
        shards=2,
    ),
    "llama_tied": dict(
        tokenizer_size=32000,
        tokenizer="llama2",
        template=LLAMA2_CHAT_TEMPLATE,
        generation={"bos_token_id": 1, "eos_token_id": 2},
        config={
            "architectures": ["LlamaForCausalLM"],
            "model_type": "llama",
            "hidden_size": 64,
            "num_attention_heads": 4,
            "num_key_value_heads": 1,
            "num_hidden_layers": 3,
            "intermediate_size": 192,
            "vocab_size": 32000,
            "rms_norm_eps": 1e-5,
            "rope_theta": 100000.0,
            "rope_scaling": None,
            "max_position_embeddings": 2048,
            "tie_word_embeddings": True,
            "hidden_act": "silu",
            "bos_token_id": 1,
            "eos_token_id": 2,
        },
    ),
    "mistral": dict(
        tokenizer_size=32000,
        tokenizer="llama2",
        template=MISTRAL_CHAT_TEMPLATE,
        generation={"bos_token_id": 1, "eos_token_id": 2},
        config={
            "architectures": ["MistralForCausalLM"],
            "model_type": "mistral",
            "hidden_size": 64,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "head_dim": 32,
            "num_hidden_layers": 2,
            # not a multiple of 64: mlx-lm leaves down_proj unquantized at group size 64
            "intermediate_size": 160,
            "vocab_size": 32000,
            "rms_norm_eps": 1e-5,
            "rope_theta": 1000000.0,
            "sliding_window": None,
            "max_position_embeddings": 32768,
            "tie_word_embeddings": False,
            "hidden_act": "silu",
            "bos_token_id": 1,
            "eos_token_id": 2,
        },
    ),
    "qwen2": dict(
        tokenizer_size=151669,
        tokenizer="qwen3",
        template=None,
        generation={"bos_token_id": 151643, "eos_token_id": [151645, 151643], "pad_token_id": 151643},
        config={
            "architectures": ["Qwen2ForCausalLM"],
            "model_type": "qwen2",
            "hidden_size": 64,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "num_hidden_layers": 3,
            "intermediate_size": 192,
            "vocab_size": 151936,
            "rms_norm_eps": 1e-6,
            "rope_theta": 1000000.0,
            "max_position_embeddings": 32768,
            "max_window_layers": 21,
            "use_sliding_window": False,
            "sliding_window": 32768,
            "tie_word_embeddings": True,
            "hidden_act": "silu",
            "bos_token_id": 151643,
            "eos_token_id": 151645,
        },
    ),
    "qwen3": dict(
        tokenizer_size=151669,
        tokenizer="qwen3",
        template=None,
        generation={"bos_token_id": 151643, "eos_token_id": [151645, 151643], "pad_token_id": 151643},
        config={
            "architectures": ["Qwen3ForCausalLM"],
            "model_type": "qwen3",
            "hidden_size": 64,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "head_dim": 32,
            "num_hidden_layers": 3,
            "intermediate_size": 192,
            "vocab_size": 151936,
            "rms_norm_eps": 1e-6,
            "rope_theta": 1000000.0,
            "rope_scaling": None,
            "max_position_embeddings": 40960,
            "attention_bias": False,
            "tie_word_embeddings": False,
            "hidden_act": "silu",
            "bos_token_id": 151643,
            "eos_token_id": 151645,
        },
    ),
    "qwen3_tied": dict(
        tokenizer_size=151669,
        tokenizer="qwen3",
        template=None,
        generation={"bos_token_id": 151643, "eos_token_id": [151645, 151643], "pad_token_id": 151643},
        config={
            "architectures": ["Qwen3ForCausalLM"],
            "model_type": "qwen3",
            "hidden_size": 64,
            "num_attention_heads": 2,
            "num_key_value_heads": 1,
            "head_dim": 64,
            "num_hidden_layers": 2,
            "intermediate_size": 192,
            "vocab_size": 151936,
            "rms_norm_eps": 1e-6,
            "rope_theta": 1000000.0,
            "rope_scaling": None,
            "max_position_embeddings": 40960,
            "attention_bias": False,
            "tie_word_embeddings": True,
            "hidden_act": "silu",
            "bos_token_id": 151643,
            "eos_token_id": 151645,
        },
    ),
    # GPT-OSS-20B's layout, tiny: attention sinks, biases, sliding windows (8) shorter than the
    # prompts alternating with full layers, YaRN with an original context (16) shorter than the
    # prompts, 8 experts top 2 with the clamped SwiGLU.
    "gpt_oss": dict(
        tokenizer_size=200019,
        tokenizer="gptoss",
        template=HARMONY_TEMPLATE,
        generation={"bos_token_id": 199998, "eos_token_id": [200002, 199999, 200012], "pad_token_id": 199999},
        config={
            "architectures": ["GptOssForCausalLM"],
            "model_type": "gpt_oss",
            "hidden_size": 64,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "head_dim": 32,
            "num_hidden_layers": 4,
            "intermediate_size": 64,
            "num_local_experts": 8,
            "num_experts_per_tok": 2,
            "experts_per_token": 2,
            "sliding_window": 8,
            "layer_types": [
                "sliding_attention",
                "full_attention",
                "sliding_attention",
                "full_attention",
            ],
            "vocab_size": 201088,
            "rms_norm_eps": 1e-5,
            "rope_theta": 150000,
            "rope_scaling": {
                "beta_fast": 32.0,
                "beta_slow": 1.0,
                "factor": 32.0,
                "original_max_position_embeddings": 16,
                "rope_type": "yarn",
                "truncate": False,
            },
            "max_position_embeddings": 131072,
            "tie_word_embeddings": False,
            "hidden_act": "silu",
            "swiglu_limit": 7.0,
            "bos_token_id": 199998,
            "eos_token_id": 200002,
            "pad_token_id": 199999,
        },
    ),
    # Qwen3.5 as mlx-community ships it: the vision-language wrapper's config with the text
    # model in text_config and rope settings in rope_parameters; the files also hold a vision
    # tensor (VISION_EXTRA), which mlx-lm and rmx leave unloaded.
    "qwen3_5": dict(
        tokenizer_size=151669,
        tokenizer="qwen3",
        template=None,
        generation={"bos_token_id": 151643, "eos_token_id": [151645, 151643], "pad_token_id": 151643},
        vision_extra=True,
        config={
            "architectures": ["Qwen3_5ForConditionalGeneration"],
            "model_type": "qwen3_5",
            "tie_word_embeddings": False,
            "text_config": {
                "model_type": "qwen3_5_text",
                "hidden_size": 64,
                "num_attention_heads": 4,
                "num_key_value_heads": 2,
                "head_dim": 32,
                "num_hidden_layers": 4,
                "full_attention_interval": 2,
                "intermediate_size": 192,
                "linear_num_value_heads": 4,
                "linear_num_key_heads": 2,
                "linear_key_head_dim": 32,
                "linear_value_head_dim": 16,
                "linear_conv_kernel_dim": 4,
                "vocab_size": 151936,
                "rms_norm_eps": 1e-6,
                "rope_parameters": {
                    "rope_type": "default",
                    "mrope_section": [11, 11, 10],
                    "mrope_interleaved": True,
                    "rope_theta": 10000000,
                    "partial_rotary_factor": 0.25,
                },
                "max_position_embeddings": 262144,
                "attention_bias": False,
                "tie_word_embeddings": False,
                "hidden_act": "silu",
                "bos_token_id": 151643,
                "eos_token_id": 151645,
            },
            "vision_config": {"depth": 1, "hidden_size": 32},
        },
    ),
    "gemma3": dict(
        tokenizer_size=262145,
        tokenizer="gemma3",
        template=None,
        generation={"bos_token_id": 2, "eos_token_id": [1, 106], "pad_token_id": 0},
        config={
            "architectures": ["Gemma3ForCausalLM"],
            "model_type": "gemma3_text",
            "hidden_size": 64,
            "num_attention_heads": 4,
            "num_key_value_heads": 1,
            "head_dim": 32,
            "query_pre_attn_scalar": 24,
            "num_hidden_layers": 5,
            "intermediate_size": 192,
            "vocab_size": 262144,
            "rms_norm_eps": 1e-6,
            "rope_theta": 1000000.0,
            "rope_local_base_freq": 10000.0,
            "rope_scaling": None,
            "sliding_window": 8,
            "sliding_window_pattern": 3,
            "layer_types": [
                "sliding_attention",
                "sliding_attention",
                "full_attention",
                "sliding_attention",
                "sliding_attention",
            ],
            "max_position_embeddings": 32768,
            "final_logit_softcapping": None,
            "attn_logit_softcapping": None,
            "hidden_activation": "gelu_pytorch_tanh",
            "tie_word_embeddings": True,
            "bos_token_id": 2,
            "eos_token_id": [1, 106],
            "pad_token_id": 0,
        },
    ),
}


def derived(base, config=(), text_config=(), drop=(), **spec):
    """A family spec made from `base`'s: its tokenizer and generation settings, with `config`
    (and `text_config`, for the nested ones) laid over its config and the keys in `drop` removed."""
    out = copy.deepcopy(FAMILY_SPECS[base])
    out.update(spec)
    out["config"].update(config)
    if text_config:
        out["config"]["text_config"].update(text_config)
    for k in drop:
        out["config"].pop(k, None)
    return out


# Heads of 64: what a quantized KV cache's default group size (64) needs, since MLX quantizes
# along the head axis in whole groups (the other tiny families have heads of 16, 32 or 48).
FAMILY_SPECS["llama_hd64"] = derived("llama", config={"head_dim": 64})
FAMILY_SPECS["qwen3_hd64"] = derived("qwen3", config={"head_dim": 64})


# Qwen3 with YaRN: an original context (16) shorter than the prompts, so positions past it
# exercise the interpolated frequencies and the input scale (mscale).
FAMILY_SPECS["qwen3_yarn"] = derived("qwen3", config={
    "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16},
    "max_position_embeddings": 64,
})

# The MoE and hybrid families' expert settings, tiny: 8 experts, top 2, renormalized, a dense
# layer listed in mlp_only_layers. A prompt of 32+ tokens takes mlx-lm's sorted expert path (64+
# token-expert pairs), decode steps the unsorted one.
EXPERTS = {"num_experts": 8, "num_experts_per_tok": 2, "norm_topk_prob": True, "decoder_sparse_step": 1}

# Qwen3-30B-A3B's layout, tiny (head_dim != hidden / heads, as Qwen3's).
FAMILY_SPECS["qwen3_moe"] = derived("qwen3", config={
    **EXPERTS, "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe",
    "num_hidden_layers": 4, "moe_intermediate_size": 128, "mlp_only_layers": [1],
})

# The hybrids, tiny: DeltaNet layers with more value heads than key heads (repeated q/k),
# value dim != key dim, a conv kernel (4) shorter than the prompts, gated attention with a
# quarter of each head rotated; full_attention_interval 2 over 4 layers, so the pattern
# repeats.
DELTANET = {
    "num_hidden_layers": 4, "full_attention_interval": 2, "linear_num_value_heads": 4,
    "linear_num_key_heads": 2, "linear_key_head_dim": 32, "linear_value_head_dim": 16,
    "linear_conv_kernel_dim": 4, "max_position_embeddings": 262144,
}
HYBRID_EXPERTS = {**EXPERTS, "moe_intermediate_size": 64, "shared_expert_intermediate_size": 96}
FAMILY_SPECS["qwen3_next"] = derived("qwen3", config={
    **DELTANET, **HYBRID_EXPERTS, "architectures": ["Qwen3NextForCausalLM"],
    "model_type": "qwen3_next", "mlp_only_layers": [1], "rope_theta": 10000000.0,
    "partial_rotary_factor": 0.25,
})
FAMILY_SPECS["qwen3_5_moe"] = derived(
    "qwen3_5",
    vision_extra=False,
    drop=("vision_config",),
    config={"architectures": ["Qwen3_5MoeForConditionalGeneration"], "model_type": "qwen3_5_moe"},
    text_config={**HYBRID_EXPERTS, "model_type": "qwen3_5_moe_text"},
)


# Phi-4-mini's layout, tiny: fused qkv_proj and gate_up_proj, head_dim = hidden / heads, three
# quarters of each head rotated, longrope (long factors over an original context of 16, shorter
# than the prompts), tied embeddings, o200k's vocabulary. phi3_plain is Phi-4 (14B): whole-head
# rope, no scaling, an untied head.
PHI4_TEMPLATE = (
    "{% for message in messages %}<|{{ message['role'] }}|>{{ message['content'] }}<|end|>"
    "{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
FAMILY_SPECS["phi3"] = dict(
    tokenizer_size=200019,
    tokenizer="gptoss",
    template=PHI4_TEMPLATE,
    generation={"bos_token_id": 199999, "eos_token_id": [200020, 199999], "pad_token_id": 199999},
    config={
        "architectures": ["Phi3ForCausalLM"],
        "model_type": "phi3",
        "hidden_size": 64,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "num_hidden_layers": 3,
        "intermediate_size": 192,
        "vocab_size": 200064,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "partial_rotary_factor": 0.75,
        "rope_scaling": {
            "type": "longrope",
            "long_factor": [1.0, 1.3, 2.1, 3.4, 5.5, 8.9],
            "short_factor": [1.0, 1.1, 1.2, 1.3, 1.4, 1.5],
        },
        "max_position_embeddings": 131072,
        "original_max_position_embeddings": 16,
        "tie_word_embeddings": True,
        "hidden_act": "silu",
        "bos_token_id": 199999,
        "eos_token_id": 199999,
    },
)
FAMILY_SPECS["phi3_plain"] = derived("phi3", config={
    "partial_rotary_factor": 1.0, "rope_scaling": None, "tie_word_embeddings": False,
    "max_position_embeddings": 16384, "original_max_position_embeddings": 16384,
})

# SmolLM3-3B's layout, tiny: Llama with NoPE on every fourth layer, listed in no_rope_layers as
# the released config does (1 = rope), tied embeddings.
FAMILY_SPECS["smollm3"] = derived("llama", shards=1, config={
    "architectures": ["SmolLM3ForCausalLM"], "model_type": "smollm3", "num_hidden_layers": 5,
    "num_key_value_heads": 1, "rope_scaling": None, "rope_theta": 5000000.0,
    "no_rope_layer_interval": 4, "no_rope_layers": [1, 1, 1, 0, 1],
    "tie_word_embeddings": True, "max_position_embeddings": 65536,
}, drop=("head_dim",))

# Mistral Small 3.2's layout, tiny: the vision-language wrapper with a Mistral text model in
# text_config (head_dim 32 != hidden / heads, no tie_word_embeddings: untied), the vision
# tower's tensors beside it, and the Tekken tokenizer.
FAMILY_SPECS["mistral3"] = dict(
    tokenizer_size=131072,
    tokenizer="mistral_nemo",
    template=None,
    generation={"bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 11},
    vision_extra=True,
    config={
        "architectures": ["Mistral3ForConditionalGeneration"],
        "model_type": "mistral3",
        "text_config": {
            "model_type": "mistral",
            "hidden_size": 64,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "head_dim": 32,
            "num_hidden_layers": 3,
            "intermediate_size": 160,
            "vocab_size": 131072,
            "rms_norm_eps": 1e-5,
            "rope_theta": 1000000000.0,
            "sliding_window": None,
            "max_position_embeddings": 131072,
            "hidden_act": "silu",
        },
        "vision_config": {"model_type": "pixtral", "hidden_size": 32},
        "image_token_index": 10,
    },
)

# Gemma 3 4B-27B as released: the vision-language wrapper (Gemma3ForConditionalGeneration), the
# text model in text_config without head counts (8 / 4 by mlx-lm's defaults), the top-level
# vocab_size (262208), tensors under language_model., the vision tower's beside them.
FAMILY_SPECS["gemma3_vl"] = dict(
    FAMILY_SPECS["gemma3"],
    vision_extra=True,
    config={
        "architectures": ["Gemma3ForConditionalGeneration"],
        "model_type": "gemma3",
        "vocab_size": 262208,
        "text_config": {
            **{k: v for k, v in FAMILY_SPECS["gemma3"]["config"].items()
               if k not in ("architectures", "num_attention_heads", "num_key_value_heads",
                            "vocab_size")},
            "model_type": "gemma3_text",
            "hidden_size": 128,
            "head_dim": 32,
            "query_pre_attn_scalar": 32,
        },
        "vision_config": {"model_type": "siglip_vision_model", "hidden_size": 32},
        "image_token_index": 262144,
    },
)


# Gemma 4 E2B's layout, tiny (the vision-language wrapper, as mlx-community ships it): sliding
# layers (window 8) and full layers with their own head size (64) and a proportional rope over a
# quarter of it; the last two layers share the K/V of earlier ones and have a double-wide MLP;
# per-layer input embeddings; soft-capped logits; tied embeddings; Gemma 3's tokenizer (262144
# entries, as Gemma 4's).
GEMMA4_TEXT = {
    "model_type": "gemma4_text",
    "hidden_size": 64,
    "num_hidden_layers": 6,
    "intermediate_size": 96,
    "num_attention_heads": 4,
    "num_key_value_heads": 1,
    "head_dim": 32,
    "global_head_dim": 64,
    "rms_norm_eps": 1e-6,
    "vocab_size": 262144,
    "vocab_size_per_layer_input": 262144,
    "hidden_size_per_layer_input": 8,
    "num_kv_shared_layers": 2,
    "sliding_window": 8,
    "sliding_window_pattern": 3,
    "max_position_embeddings": 131072,
    "final_logit_softcapping": 30.0,
    "use_double_wide_mlp": True,
    "tie_word_embeddings": True,
    "rope_parameters": {
        "full_attention": {"partial_rotary_factor": 0.25, "rope_theta": 1000000.0,
                           "rope_type": "proportional"},
        "sliding_attention": {"rope_theta": 10000.0, "rope_type": "default"},
    },
    "hidden_activation": "gelu_pytorch_tanh",
}
# No Gemma 4 tokenizer is published where the tests can fetch it: Gemma 3's, with Gemma 4's
# control tokens in unused slots (as special tokens, the harder case for the engine, which
# must keep their text for the parsers), and a chat template in Gemma 4's manner that teaches
# its tool-call syntax and thought channel (thinking on unless `enable_thinking` is false).
GEMMA4_TOKENS = {
    "<unused0>": "<|tool_call>", "<unused1>": "<tool_call|>", "<unused2>": '<|"|>',
    "<unused3>": "<|channel>", "<unused4>": "<channel|>",
}
GEMMA4_TEMPLATE = (
    "{{ bos_token }}{% if tools %}<start_of_turn>system\nYou can call these tools:"
    "{% for t in tools %} {{ t['function']['name'] }}{% endfor %}. Call one as "
    "<|tool_call>call:NAME{key:value}<tool_call|>.<end_of_turn>\n{% endif %}"
    "{% for message in messages %}<start_of_turn>"
    "{{ 'model' if message['role'] == 'assistant' else message['role'] }}\n"
    "{{ message['content'] | trim }}<end_of_turn>\n{% endfor %}"
    "{% if add_generation_prompt %}<start_of_turn>model\n"
    "{% if enable_thinking is defined and not enable_thinking %}<|channel>thought<channel|>\n\n"
    "{% endif %}{% endif %}"
)
FAMILY_SPECS["gemma4"] = dict(
    FAMILY_SPECS["gemma3"],
    template=GEMMA4_TEMPLATE,
    tokenizer_tokens=GEMMA4_TOKENS,
    vision_extra=True,
    config={
        "architectures": ["Gemma4ForConditionalGeneration"],
        "model_type": "gemma4",
        "vocab_size": 262144,
        "text_config": GEMMA4_TEXT,
        "vision_config": {"model_type": "gemma4_vision", "hidden_size": 32},
    },
)
# Gemma 4 26B-A4B's: no per-layer inputs or shared K/V; full layers take values from their
# keys' projection (attention_k_eq_v) with fewer K/V heads of their own; each layer's dense MLP
# runs beside 8 routed GeGLU experts (top 2). The layer pattern from sliding_window_pattern.
FAMILY_SPECS["gemma4_moe"] = dict(
    FAMILY_SPECS["gemma4"],
    vision_extra=False,
    config={
        "architectures": ["Gemma4ForConditionalGeneration"],
        "model_type": "gemma4",
        "text_config": {
            **GEMMA4_TEXT,
            "num_hidden_layers": 6,
            "num_key_value_heads": 2,
            "num_global_key_value_heads": 1,
            "attention_k_eq_v": True,
            "hidden_size_per_layer_input": 0,
            "num_kv_shared_layers": 0,
            "enable_moe_block": True,
            "num_experts": 8,
            "top_k_experts": 2,
            "moe_intermediate_size": 32,
        },
    },
)
# Gemma 4 31B's, as a text-only checkpoint (gemma4_text at the top): dense, K-eq-V full layers,
# explicit layer_types, an untied head.
FAMILY_SPECS["gemma4_text"] = dict(
    FAMILY_SPECS["gemma3"],
    template=GEMMA4_TEMPLATE,
    tokenizer_tokens=GEMMA4_TOKENS,
    config={
        **GEMMA4_TEXT,
        "architectures": ["Gemma4ForCausalLM"],
        "num_hidden_layers": 4,
        "layer_types": ["sliding_attention", "full_attention", "sliding_attention",
                        "full_attention"],
        "attention_k_eq_v": True,
        "num_global_key_value_heads": 1,
        "hidden_size_per_layer_input": 0,
        "num_kv_shared_layers": 0,
        "tie_word_embeddings": False,
    },
)


def fixtures_dir():
    f = os.environ.get("RMX_TEST_FIXTURES")
    if not f:
        sys.exit("RMX_TEST_FIXTURES is not set (source scripts/test-env.sh)")
    return Path(f) / "npm"


def seed_for(family, quant):
    return zlib.crc32(f"{family}/{quant}".encode())


LOGIT_STD = 4.0


def read_added_tokens(path):
    """The tokenizer.json's added_tokens, without parsing its (large) vocabulary."""
    return copy.deepcopy(_cached(("added_tokens", _file_key(path)), lambda: _read_added_tokens(path)))


def _read_added_tokens(path):
    text = Path(path).read_text(encoding="utf-8")
    at = text.index('"added_tokens"')
    at = text.index("[", at)
    tokens, _ = json.JSONDecoder().raw_decode(text, at)
    return tokens


def randomize(model, cfg, seed, added_tokens, tokenizer_size):
    """Random weights that keep greedy generation going: O(1) activations, no EOS, no loops."""
    import mlx.core as mx
    from mlx.utils import tree_flatten, tree_unflatten

    top, cfg = cfg, cfg.get("text_config", cfg)
    hidden = cfg["hidden_size"]
    vocab = cfg.get("vocab_size", top.get("vocab_size"))
    tied = cfg.get("tie_word_embeddings", False)
    gemma = cfg["model_type"].startswith("gemma")
    # Gemma 3 stores its RMS norms' weights as w - 1; Gemma 4's are plain.
    gemma_norm = cfg["model_type"].startswith("gemma3")

    # Output rows to push down: special tokens (EOS, BOS, reserved, ...) and the padded ids
    # past the tokenizer's vocabulary.
    down = [False] * vocab
    for t in added_tokens:
        if t.get("special") and t["id"] < vocab:
            down[t["id"]] = True
    for i in range(min(tokenizer_size, vocab), vocab):
        down[i] = True
    row_scale = mx.where(mx.array(down)[:, None], 0.05, 1.0)

    # Logits get a std of about LOGIT_STD (a wide spread keeps exact bf16 ties rare). Tied
    # models: logits = E . (g * rmsnorm(h)) is a symmetric form in (input token, output token)
    # when h is dominated by the input embedding, and greedy decoding then falls into 2-cycles.
    # So the tied embedding is small next to what the layers add (gemma multiplies it by
    # sqrt(hidden) first), and the zero-mean final norm gain g carries the logit scale.
    emb_std = 0.5 / hidden**0.5 if gemma else (0.5 if tied else 1.0)
    gain_std = LOGIT_STD / (emb_std * hidden**0.5)

    params = tree_flatten(model.parameters())
    keys = mx.random.split(mx.random.key(seed), len(params))
    new = []
    for (name, p), key in zip(params, keys):
        shape = p.shape
        normal = lambda std, mean=0.0: mean + std * mx.random.normal(shape, key=key)
        if name.endswith(("norm.weight", "norm_1.weight", "norm_2.weight")):
            if name.endswith("model.norm.weight") and tied:
                w = normal(gain_std)
                w = w - w.mean()
                if gemma_norm:
                    w = w - 1.0  # gemma's RMSNorm scales by (1 + weight)
            else:
                w = normal(0.1, 0.0 if gemma_norm else 1.0)
        elif name.endswith(("layer_scalar", "router.scale", "per_expert_scale")):
            w = normal(0.1, 1.0)
        elif name.endswith("embed_tokens.weight"):
            w = normal(emb_std)
            if tied:
                w = w * row_scale
        elif name.endswith("lm_head.weight"):
            w = normal(LOGIT_STD / hidden**0.5) * row_scale
        elif name.endswith(".bias"):
            w = normal(0.1)
        elif name.endswith("conv1d.weight"):
            # depthwise [channels, kernel, 1]
            w = normal(1.0 / shape[1] ** 0.5)
        elif name.endswith("A_log"):
            w = mx.log(mx.random.uniform(1.0, 16.0, shape, key=key))
        elif name.endswith("dt_bias"):
            w = normal(0.1, 1.0)
        elif name.endswith(".weight") and len(shape) in (2, 3):
            # dense layers [out, in] and stacked experts [experts, out, in]
            w = normal(1.0 / shape[-1] ** 0.5)
        elif name.endswith(".sinks"):
            w = normal(1.0)
        else:
            raise ValueError(f"don't know how to initialise {name} {shape}")
        new.append((name, w.astype(mx.float32)))
    model.update(tree_unflatten(new))
    mx.eval(model.parameters())


def script_weights(model, tokenizer_json, scripts):
    """Turns the random model into one that writes `text` greedily after a chat prompt.

    `scripts` is a list of (prefix, text): after the last token of `prefix` the model writes
    `text` (one chain per way a prompt can end, e.g. a chat template's generation prompt with
    thinking on and off). Every layer's output projections (attention's o_proj, DeltaNet's
    out_proj, the MLP's or experts' down_proj, biases included) become zero, so the final
    hidden state is the current token's embedding, and each output row `b` gets the normalized
    embeddings of the tokens `a` that `b` follows in a chain. The next token then depends on
    the current one only: a fixed reply through the real files, engine and parsers, for
    end-to-end tests of output formats (tool calls, reasoning) that a random model never
    writes. No token may be followed by two different ones across the chains."""
    import mlx.core as mx
    from mlx.utils import tree_flatten, tree_unflatten
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(tokenizer_json))
    after = {}
    for prefix, text in scripts:
        chain = tok.encode(prefix, add_special_tokens=False).ids[-1:]
        chain += tok.encode(text, add_special_tokens=False).ids
        for a, b in zip(chain, chain[1:]):
            if after.setdefault(a, b) != b:
                raise SystemExit(
                    f"script: token {tok.id_to_token(a)!r} is followed by both "
                    f"{tok.id_to_token(after[a])!r} and {tok.id_to_token(b)!r}"
                )
    params = dict(tree_flatten(model.parameters()))
    key = lambda suffix: next(k for k in params if k == suffix or k.endswith("." + suffix))
    new = {}
    for name, p in params.items():
        if any(k in name for k in ("o_proj.", "out_proj.", "down_proj.")):
            new[name] = mx.zeros_like(p)
    new[key("model.norm.weight")] = mx.ones_like(params[key("model.norm.weight")])
    emb = params[key("model.embed_tokens.weight")]
    unit = emb / mx.linalg.norm(emb, axis=-1, keepdims=True)
    head = mx.zeros_like(params[key("lm_head.weight")])
    for a, b in after.items():
        head[b] = head[b] + 20.0 * unit[a]
    new[key("lm_head.weight")] = head
    model.update(tree_unflatten(list(new.items())))
    mx.eval(model.parameters())


def mixed_predicate(cfg):
    """Per-layer overrides in the style of mlx-lm's mixed recipes, plus some less usual ones.

    - v_proj of layer 0: 6 bits, group 32
    - down_proj of the first and last layer: 8 bits
    - lm_head (when present): 6 bits
    - every linear of layer 1: left unquantized
    - everything else: the default (4 bits, group 64)
    """
    n = cfg["num_hidden_layers"]

    def pred(path, module):
        if path.startswith("model.layers.1."):
            return False
        if path == "model.layers.0.self_attn.v_proj":
            return {"group_size": 32, "bits": 6, "mode": "affine"}
        if path.endswith("mlp.down_proj") and path.split(".")[2] in ("0", str(n - 1)):
            return {"group_size": 64, "bits": 8, "mode": "affine"}
        if path == "lm_head":
            return {"group_size": 64, "bits": 6, "mode": "affine"}
        return True

    return pred


def two_shards(weights, max_file_size_gb=None):
    """make_shards replacement: split the weights into two files of about equal size."""
    total = sum(v.nbytes for v in weights.values())
    shards, size = [{}], 0
    for k, v in weights.items():
        if len(shards) == 1 and shards[0] and size + v.nbytes / 2 > total / 2:
            shards.append({})
        shards[-1][k] = v
        size += v.nbytes
    return shards


def write_renamed_tokens(src, dst, renames):
    """A copy of tokenizer.json with added tokens renamed (in the vocabulary too) and special."""
    key = ("renamed", _file_key(src), json.dumps(renames, sort_keys=True))
    Path(dst).write_bytes(_cached(key, lambda: _renamed_tokens(src, renames)))


def _renamed_tokens(src, renames):
    tok = json.loads(Path(src).read_text(encoding="utf-8"))
    vocab = tok["model"]["vocab"]
    for t in tok["added_tokens"]:
        new = renames.get(t["content"])
        if new is not None:
            vocab[new] = vocab.pop(t["content"])
            t["content"], t["special"] = new, True
    return json.dumps(tok, ensure_ascii=False).encode("utf-8")


def link_or_copy(src, dst):
    try:
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)


def cmd_make(args):
    import mlx.core as mx
    import mlx.nn as nn
    import mlx_lm.utils as mu
    from mlx.utils import tree_map

    family, quant = args.family, args.quant
    spec = FAMILY_SPECS[family]
    out = Path(args.out)
    tmp = Path(str(out) + ".tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)

    tok_dir = fixtures_dir() / f"tokenizer-{spec['tokenizer']}" / "models"
    # The tokenizer.json is the fixture's own, byte for byte (hard-linked where possible:
    # gemma3's is 33 MB), unless the spec renames tokens (`tokenizer_tokens`); written first,
    # since a scripted model's chains are made of its tokens.
    if spec.get("tokenizer_tokens"):
        write_renamed_tokens(tok_dir / "tokenizer.json", tmp / "tokenizer.json", spec["tokenizer_tokens"])
    else:
        link_or_copy(tok_dir / "tokenizer.json", tmp / "tokenizer.json")
    added_tokens = read_added_tokens(tok_dir / "tokenizer.json")
    for t in added_tokens:
        if t["content"] in spec.get("tokenizer_tokens", {}):
            t["special"] = True

    cfg = copy.deepcopy(spec["config"])
    cfg["torch_dtype"] = "float32" if quant == "f32" else "bfloat16"
    cfg["transformers_version"] = "4.57.0"

    model_class, args_class = mu._get_classes(cfg)
    model = model_class(args_class.from_dict(cfg))
    text_cfg = cfg.get("text_config", cfg)
    if text_cfg["model_type"] == "gemma3_text" and text_cfg.get("tie_word_embeddings"):
        # gemma3_text always builds an lm_head; tying is decided on load by its absence
        lm = getattr(model, "language_model", model)
        lm.pop("lm_head")
        lm.tie_word_embeddings = True
    randomize(model, cfg, seed_for(family, quant), added_tokens, spec["tokenizer_size"])
    scripts = [("assistant", args.script)] if args.script is not None else []
    if args.scripts is not None:
        scripts += [tuple(pair) for pair in json.loads(args.scripts)]
    if scripts:
        script_weights(model, tmp / "tokenizer.json", scripts)

    dtype = mx.float32 if quant == "f32" else mx.bfloat16
    # As mlx_lm.convert casts: all floating weights but those the model's cast_predicate keeps
    # (the hybrids' A_log stays float32).
    keep = getattr(model, "cast_predicate", None) or (lambda path: True)
    from mlx.utils import tree_flatten, tree_unflatten

    model.update(
        tree_unflatten(
            [
                (k, v.astype(dtype) if mx.issubdtype(v.dtype, mx.floating) and keep(k) else v)
                for k, v in tree_flatten(model.parameters())
            ]
        )
    )

    if quant in ("8bit", "4bit", "4bit-mixed") + FLOAT_QUANTS:
        bits = 8 if quant == "8bit" else 4
        pred = mixed_predicate(cfg) if quant == "4bit-mixed" else None
        import contextlib
        import io

        with contextlib.redirect_stdout(io.StringIO()):
            if quant in FLOAT_QUANTS:
                # mlx-lm's defaults for the mode, with the model's own predicate (gpt-oss's
                # official MLX conversions: mxfp4 experts, an 8-bit affine router)
                model, cfg = mu.quantize_model(model, cfg, None, None, mode=quant)
            else:
                model, cfg = mu.quantize_model(model, cfg, 64, bits, quant_predicate=pred)
        if quant == "4bit-mixed":
            # mlx-lm writes nothing for a layer its predicate skipped (the loader then finds it
            # has no .scales); record one skip explicitly as `false`, which the loader also reads.
            cfg["quantization"]["model.layers.1.mlp.down_proj"] = False
    mx.eval(model.parameters())

    orig_make_shards = mu.make_shards
    if spec.get("shards", 1) == 2:
        mu.make_shards = two_shards
    try:
        mu.save_model(tmp, model)
    finally:
        mu.make_shards = orig_make_shards
    mu.save_config(cfg, tmp / "config.json", keep_vision_config=bool(spec.get("vision_extra")))
    if spec.get("vision_extra"):
        # what an mlx-vlm conversion also carries: the vision tower's weights
        mx.save_safetensors(
            str(tmp / "vision.safetensors"),
            {"vision_tower.blocks.0.attn.qkv.weight": mx.zeros((96, 32), dtype=dtype)},
            metadata={"format": "mlx"},
        )

    # The tokenizer config too, with a chat template added where the fixture has none.
    if spec["template"] is None:
        link_or_copy(tok_dir / "tokenizer_config.json", tmp / "tokenizer_config.json")
    else:
        tok_cfg = json.loads((tok_dir / "tokenizer_config.json").read_text(encoding="utf-8"))
        tok_cfg["chat_template"] = spec["template"]
        (tmp / "tokenizer_config.json").write_text(
            json.dumps(tok_cfg, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
        )
    (tmp / "generation_config.json").write_text(
        json.dumps({**spec["generation"], "transformers_version": "4.57.0"}, indent=2) + "\n"
    )

    if out.exists():
        shutil.rmtree(out)
    os.rename(tmp, out)


def patch_cpu_gather_mm():
    """MLX's CPU gather_mm is float32-only: multiply bf16/f16 experts in float32, round back."""
    import mlx.core as mx
    from mlx_lm.models import switch_layers as sl

    if getattr(sl.SwitchLinear, "_rmx_cpu_patch", False) or mx.default_device() != mx.cpu:
        return
    orig = sl.SwitchLinear.__call__

    def call(self, x, indices, sorted_indices=False):
        if x.dtype == mx.float32:
            return orig(self, x, indices, sorted_indices)
        w = self["weight"].swapaxes(-1, -2)
        y = mx.gather_mm(
            x.astype(mx.float32),
            w.astype(mx.float32),
            rhs_indices=indices,
            sorted_indices=sorted_indices,
        ).astype(x.dtype)
        if "bias" in self:
            y = y + mx.expand_dims(self["bias"][indices], -2)
        return y

    sl.SwitchLinear.__call__ = call
    sl.SwitchLinear._rmx_cpu_patch = True


# A `serve` process answers many commands: what a command loads from files that did not change
# is kept. Keys are the files' identities (device, inode, size, mtime) and the small files'
# bytes, so a rewritten file is read again.
_CACHE = {}


def _file_key(path):
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return (str(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def _cached(key, make):
    if key not in _CACHE:
        _CACHE[key] = make()
    return _CACHE[key]


def load(path):
    """mlx_lm.load, with the tokenizer kept across the models of a `serve` process that share
    their tokenizer files (loading a 262K-token tokenizer through transformers takes seconds)."""
    import mlx_lm.utils as mu

    patch_cpu_gather_mm()
    path = Path(path)
    model, config = mu.load_model(path)
    small = sorted(
        f
        for f in path.iterdir()
        if f.suffix in (".json", ".jinja", ".model", ".txt", ".tiktoken")
        and f.name != "config.json"
        and not f.name.endswith(".index.json")
    )
    key = (
        "tokenizer",
        tuple((f.name, hashlib.sha1(f.read_bytes()).hexdigest()) for f in small),
        config.get("model_type"),
        json.dumps(config.get("eos_token_id")),
    )
    tokenizer = _cached(key, lambda: mu.load_tokenizer(path, eos_token_ids=config.get("eos_token_id")))
    return model, tokenizer


def encode_prompt(tokenizer, prompt, chat):
    if chat:
        # as mlx_lm.generate's CLI does: render to text, then encode without special tokens
        text = tokenizer.apply_chat_template(
            [{"role": "user", "content": prompt}],
            tokenize=False,
            add_generation_prompt=True,
        )
        return list(tokenizer.encode(text, add_special_tokens=False))
    return list(tokenizer.encode(prompt, add_special_tokens=True))


def prompt_ids_from_args(args, tokenizer):
    if args.prompt_ids is not None:
        ids = json.loads(Path(args.prompt_ids).read_text())
        if isinstance(ids, dict):
            ids = ids["prompt_ids"]
        return [int(i) for i in ids]
    if args.prompt is None:
        sys.exit("give --prompt-ids, --prompt or --requests")
    return encode_prompt(tokenizer, args.prompt, args.chat)


def run_reference(model, prompt_ids, max_tokens, stats=None, kv=None):
    """Greedy generation exactly as mlx_lm.generate.generate_step does it, no stop on EOS;
    `kv`: generate_step's kv_bits, kv_group_size and quantized_kv_start, as a dict.

    Returns the tokens and the log-probabilities of the first two steps (as float32)."""
    import mlx.core as mx
    from mlx_lm.generate import generate_step

    tokens, logprobs = [], []
    steps = generate_step(mx.array(prompt_ids), model, max_tokens=max_tokens, **(kv or {}))
    for tok, lp in steps:
        tokens.append(int(tok))
        if len(logprobs) < 2:
            logprobs.append(lp.astype(mx.float32))
        if stats is not None:
            # exact ties for the greedy pick, and the gap to the runner-up
            top2 = mx.topk(lp.astype(mx.float32), 2)
            gap = (mx.max(top2) - mx.min(top2)).item()
            stats["ties"] = stats.get("ties", 0) + (gap == 0.0)
            stats["min_gap"] = min(stats.get("min_gap", float("inf")), gap)
    return tokens, logprobs


def cmd_reference(args):
    import mlx.core as mx
    import numpy as np

    if args.make is not None:
        if not (Path(args.model) / "config.json").exists():
            family, quant = args.make
            cmd_make(argparse.Namespace(family=family, quant=quant, out=args.model, script=None, scripts=None))
        signal_ready()
    model, tokenizer = load(args.model)
    if args.requests is not None:
        reqs = json.loads(Path(args.requests).read_text(encoding="utf-8"))
        prompts = [encode_prompt(tokenizer, r["prompt"], r.get("chat", False)) for r in reqs]
    else:
        prompts = [prompt_ids_from_args(args, tokenizer)]
    outs, all_logprobs = [], []
    kv = None
    if args.kv_bits is not None:
        kv = dict(kv_bits=args.kv_bits, kv_group_size=args.kv_group_size,
                  quantized_kv_start=args.quantized_kv_start)
    for prompt_ids in prompts:
        tokens, logprobs = run_reference(model, prompt_ids, args.max_tokens, kv=kv)
        outs.append({"prompt_ids": prompt_ids, "tokens": tokens, "text": tokenizer.decode(tokens)})
        all_logprobs += logprobs
    out = outs if args.requests is not None else outs[0]
    Path(args.out).write_text(json.dumps(out, ensure_ascii=False) + "\n", encoding="utf-8")
    if args.logits:
        arr = np.concatenate([np.array(lp, dtype="<f4").reshape(-1) for lp in all_logprobs])
        arr.astype("<f4").tofile(args.logits)


RERANK_PREFIX = (
    "<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and "
    'the Instruct provided. Note that the answer can only be "yes" or "no".<|im_end|>\n'
    "<|im_start|>user\n"
)
RERANK_SUFFIX = "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"


def cmd_rerank(args):
    import mlx.core as mx

    model, tokenizer = load(args.model)
    req = json.loads(Path(args.request).read_text(encoding="utf-8"))
    pre = tokenizer.encode(RERANK_PREFIX, add_special_tokens=False)
    suf = tokenizer.encode(RERANK_SUFFIX, add_special_tokens=False)
    yes = tokenizer.convert_tokens_to_ids("yes")
    no = tokenizer.convert_tokens_to_ids("no")
    ids_all, scores = [], []
    for doc in req["documents"]:
        pair = f"<Instruct>: {req['instruction']}\n<Query>: {req['query']}\n<Document>: {doc}"
        ids = list(pre) + list(tokenizer.encode(pair, add_special_tokens=False)) + list(suf)
        logits = model(mx.array([ids]))[0, -1].astype(mx.float32)
        two = mx.stack([logits[no], logits[yes]])
        scores.append(float(mx.exp(two - mx.logsumexp(two))[1].item()))
        ids_all.append(ids)
    Path(args.out).write_text(json.dumps({"ids": ids_all, "scores": scores}) + "\n", encoding="utf-8")


def cmd_bench(args):
    import mlx.core as mx
    import numpy as np
    from mlx_lm.generate import stream_generate

    model, tokenizer = load(args.model)
    tokenizer.eos_token_ids = []  # run all max-tokens
    rng = np.random.default_rng(0)
    vocab = len(tokenizer.vocab) if hasattr(tokenizer, "vocab") else 1000
    prompt = rng.integers(100, min(vocab, 30000), size=args.prompt_len).tolist()
    last = None
    for last in stream_generate(model, tokenizer, prompt, max_tokens=args.max_tokens):
        pass
    print(
        json.dumps(
            {
                "prefill_tps": last.prompt_tps,
                "decode_tps": last.generation_tps,
                "peak_mem": last.peak_memory,
                "prompt_tokens": last.prompt_tokens,
                "generation_tokens": last.generation_tokens,
            }
        )
    )


def cmd_check(args):
    """Self test: reference tokens == mlx_lm.generate's, and the output is varied."""
    import mlx.core as mx
    from mlx_lm.generate import generate, stream_generate

    model, tokenizer = load(args.model)
    prompt = tokenizer.encode("The quick brown fox jumps over the lazy dog", add_special_tokens=True)
    stats = {}
    ref, _ = run_reference(model, prompt, args.max_tokens, stats)
    # mlx-lm's own path, with EOS disabled so it runs all max-tokens
    eos = set(tokenizer.eos_token_ids)
    tokenizer.eos_token_ids = []
    got = [r.token for r in stream_generate(model, tokenizer, prompt, max_tokens=args.max_tokens)]
    text = generate(model, tokenizer, prompt, max_tokens=args.max_tokens)
    tokenizer.eos_token_ids = eos
    first_eos = next((i for i, t in enumerate(ref) if t in eos), None)
    # Does the context matter, or only the last token? Change the first prompt token.
    alt, _ = run_reference(model, [prompt[1]] + prompt[1:], args.max_tokens)
    diverge = next((i for i, (a, b) in enumerate(zip(ref, alt)) if a != b), None)
    res = {
        "model": args.model,
        "match": got == ref,
        "distinct": len(set(ref)),
        "first_eos": first_eos,
        "ctx_diverge_at": diverge,
        "ties": stats["ties"],
        "min_gap": stats["min_gap"],
        "longest_run": max(sum(1 for _ in g) for _, g in itertools.groupby(ref)),
        "generate_text_eq_decode": text == tokenizer.decode(ref),
        "text": tokenizer.decode(ref)[:120],
    }
    print(json.dumps(res), flush=True)
    if got != ref:
        sys.exit(1)


# Where `ready` goes: stdout, or in a `serve` process the real stdout while a command's own
# output is collected for its `done` line.
_READY_OUT = None


def signal_ready():
    """The model is on disk: the caller can load it while mlx-lm computes its answers."""
    print("ready", file=_READY_OUT or sys.stdout, flush=True)


def cmd_serve(args):
    """Commands from stdin, each a JSON list of this script's arguments on one line, answered on
    stdout by `ready` (reference --make) and then one line `done {"ok", "stdout", "error"}`.
    One process pays python's start, mlx-lm's import and each tokenizer's load once (together
    3-10 s, more than most commands take), so a test process keeps its workers."""
    global _READY_OUT
    import contextlib
    import io
    import traceback

    import mlx.core as mx

    real = sys.stdout
    _READY_OUT = real
    for line in sys.stdin:
        if not line.strip():
            continue
        out, err = io.StringIO(), io.StringIO()
        reply = {"ok": True}
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                run_command(parse_args(json.loads(line)))
        except SystemExit as e:
            if e.code not in (None, 0):
                reply = {"ok": False, "error": f"exit {e.code}\n"}
        except Exception:
            reply = {"ok": False, "error": traceback.format_exc()}
        if not reply["ok"]:
            reply["error"] += err.getvalue()
        reply["stdout"] = out.getvalue()
        mx.clear_cache()
        print("done " + json.dumps(reply), file=real, flush=True)
    import resource

    use = resource.getrusage(resource.RUSAGE_SELF)
    print(f"serve: cpu {use.ru_utime + use.ru_stime:.1f} s", file=sys.stderr)


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make")
    m.add_argument("--family", required=True, choices=FAMILIES)
    m.add_argument("--quant", required=True, choices=QUANTS)
    m.add_argument("--out", required=True)
    m.add_argument("--script")
    m.add_argument("--scripts")
    r = sub.add_parser("reference")
    r.add_argument("--model", required=True)
    r.add_argument("--prompt-ids")
    r.add_argument("--prompt")
    r.add_argument("--chat", action="store_true")
    r.add_argument("--requests")
    r.add_argument("--max-tokens", type=int, default=64)
    r.add_argument("--out", required=True)
    r.add_argument("--logits")
    r.add_argument("--make", nargs=2, metavar=("FAMILY", "QUANT"))
    r.add_argument("--kv-bits", type=int)
    r.add_argument("--kv-group-size", type=int, default=64)
    r.add_argument("--quantized-kv-start", type=int, default=0)
    rr = sub.add_parser("rerank")
    rr.add_argument("--model", required=True)
    rr.add_argument("--request", required=True)
    rr.add_argument("--out", required=True)
    b = sub.add_parser("bench")
    b.add_argument("--model", required=True)
    b.add_argument("--prompt-len", type=int, required=True)
    b.add_argument("--max-tokens", type=int, required=True)
    c = sub.add_parser("check")
    c.add_argument("--model", required=True)
    c.add_argument("--max-tokens", type=int, default=64)
    sub.add_parser("serve")
    return ap.parse_args(argv)


def run_command(args):
    {
        "make": cmd_make,
        "reference": cmd_reference,
        "rerank": cmd_rerank,
        "bench": cmd_bench,
        "check": cmd_check,
        "serve": cmd_serve,
    }[args.cmd](args)


def main():
    run_command(parse_args())


if __name__ == "__main__":
    main()
