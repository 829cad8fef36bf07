#!/usr/bin/env python3
"""The mlx-lm side of scripts/gpu-bench.sh.

  make  --shape {llama3-8b,qwen3-0.6b,...} --quant {4bit,8bit,bf16,mxfp4} --out DIR [--peaked]
        random weights of the real shape, written by mlx-lm (so rmx reads the same files),
        with a word-level tokenizer.json of the right size (the benchmark feeds token ids);
        --peaked: weights for logits_check.py (see make's docstring)
  time  --model DIR --prompt-len N --gen M --rounds R
        mlx-lm's generate_step timed the way `rmx bench` times itself: prefill tok/s = prompt
        tokens / time to first token; decode tok/s = (M - 1) / time from first to last token
  drift --model DIR [--prompt-len N ...] [--gen M]
        what bf16 rounding alone does to the model's log-probabilities: mlx-lm's greedy decode
        as saved (bf16 activations) against the same weights run in float32, teacher-forced
        along the same tokens; reported like logits_check.py, so its figures say how far apart
        two correct bf16 engines can be on this model
  make-streamed --shape S --out DIR
        bf16 random weights written shard by shard, for a model larger than the device
  copybw  measured device copy bandwidth (bytes read + written per second)
"""
import argparse, json, math, os, statistics, time

import mlx.core as mx
import mlx.nn as nn

SHAPES = {
    "llama3-8b": dict(model_type="llama", architectures=["LlamaForCausalLM"], hidden_size=4096,
                      num_hidden_layers=32, intermediate_size=14336, num_attention_heads=32,
                      num_key_value_heads=8, rms_norm_eps=1e-5, vocab_size=128256, rope_theta=500000.0,
                      max_position_embeddings=8192, tie_word_embeddings=False,
                      rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                    "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}),
    "qwen3-0.6b": dict(model_type="qwen3", architectures=["Qwen3ForCausalLM"], hidden_size=1024,
                       num_hidden_layers=28, intermediate_size=3072, num_attention_heads=16,
                       num_key_value_heads=8, head_dim=128, rms_norm_eps=1e-6, vocab_size=151936,
                       rope_theta=1000000.0, max_position_embeddings=40960, tie_word_embeddings=True),
    # Qwen3-0.6B's dims with one difference each, to find where its decode time goes.
    "qwen3-0.6b-untied": dict(model_type="qwen3", architectures=["Qwen3ForCausalLM"], hidden_size=1024,
                              num_hidden_layers=28, intermediate_size=3072, num_attention_heads=16,
                              num_key_value_heads=8, head_dim=128, rms_norm_eps=1e-6, vocab_size=151936,
                              rope_theta=1000000.0, max_position_embeddings=40960, tie_word_embeddings=False),
    "llama-0.6b": dict(model_type="llama", architectures=["LlamaForCausalLM"], hidden_size=1024,
                       num_hidden_layers=28, intermediate_size=3072, num_attention_heads=16,
                       num_key_value_heads=8, head_dim=128, rms_norm_eps=1e-6, vocab_size=151936,
                       rope_theta=1000000.0, max_position_embeddings=40960, tie_word_embeddings=False),
    "llama-0.6b-smallvocab": dict(model_type="llama", architectures=["LlamaForCausalLM"], hidden_size=1024,
                       num_hidden_layers=28, intermediate_size=3072, num_attention_heads=16,
                       num_key_value_heads=8, head_dim=128, rms_norm_eps=1e-6, vocab_size=32000,
                       rope_theta=1000000.0, max_position_embeddings=40960, tie_word_embeddings=False),
    # Qwen2.5-1.5B's dims: linear biases on q, k and v (the layer kernel's AttnExtras).
    "qwen2.5-1.5b": dict(model_type="qwen2", architectures=["Qwen2ForCausalLM"], hidden_size=1536,
                         num_hidden_layers=28, intermediate_size=8960, num_attention_heads=12,
                         num_key_value_heads=2, rms_norm_eps=1e-6, vocab_size=151936, rope_theta=1000000.0,
                         max_position_embeddings=32768, tie_word_embeddings=True),
    # Gemma 3 270M's dims: sliding-window layers (rotating cache) with a global layer every 6th,
    # head_dim 256, one kv head.
    "gemma3-270m": dict(model_type="gemma3_text", architectures=["Gemma3ForCausalLM"], hidden_size=640,
                        num_hidden_layers=18, intermediate_size=2048, num_attention_heads=4,
                        num_key_value_heads=1, head_dim=256, rms_norm_eps=1e-6, vocab_size=262144,
                        rope_theta=1000000.0, rope_local_base_freq=10000.0, query_pre_attn_scalar=256,
                        sliding_window=512, sliding_window_pattern=6, max_position_embeddings=32768),
    # GPT-OSS's attention sizes in a dense Llama (64 heads of 64, 8 K/V heads); with GPT-OSS's
    # YaRN below (llama-d64-yarn): which of its traits a layer-kernel drift follows (#17).
    "llama-d64": dict(model_type="llama", architectures=["LlamaForCausalLM"], hidden_size=2880,
                      num_hidden_layers=4, intermediate_size=2880, num_attention_heads=64,
                      num_key_value_heads=8, head_dim=64, rms_norm_eps=1e-5, vocab_size=32000,
                      rope_theta=150000.0, max_position_embeddings=131072, tie_word_embeddings=False),
    # The MoE and hybrid shapes of issues #17/#18 (real configs' sizes; random weights).
    "qwen3-30b-a3b": dict(model_type="qwen3_moe", architectures=["Qwen3MoeForCausalLM"], hidden_size=2048,
                          num_hidden_layers=48, intermediate_size=6144, num_attention_heads=32,
                          num_key_value_heads=4, head_dim=128, num_experts=128, num_experts_per_tok=8,
                          moe_intermediate_size=768, decoder_sparse_step=1, mlp_only_layers=[],
                          norm_topk_prob=True, rms_norm_eps=1e-6, vocab_size=151936, rope_theta=1000000.0,
                          max_position_embeddings=40960, tie_word_embeddings=False),
    "gpt-oss-20b": dict(model_type="gpt_oss", architectures=["GptOssForCausalLM"], hidden_size=2880,
                        num_hidden_layers=24, intermediate_size=2880, num_attention_heads=64,
                        num_key_value_heads=8, head_dim=64, num_local_experts=32, num_experts_per_tok=4,
                        sliding_window=128, rms_norm_eps=1e-5, vocab_size=201088, rope_theta=150000,
                        layer_types=["sliding_attention", "full_attention"] * 12,
                        rope_scaling={"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0,
                                      "original_max_position_embeddings": 4096, "truncate": False},
                        max_position_embeddings=131072, tie_word_embeddings=False),
    # Qwen3.5-9B-like: 32 layers, three Gated DeltaNet to one gated attention, hidden 4096.
    "qwen3.5-9b": dict(model_type="qwen3_5", architectures=["Qwen3_5ForConditionalGeneration"],
                       text_config=dict(model_type="qwen3_5_text", hidden_size=4096, num_hidden_layers=32,
                                        intermediate_size=12288, num_attention_heads=16, num_key_value_heads=4,
                                        head_dim=256, linear_num_value_heads=32, linear_num_key_heads=16,
                                        linear_key_head_dim=128, linear_value_head_dim=128,
                                        linear_conv_kernel_dim=4, full_attention_interval=4,
                                        vocab_size=151936, rms_norm_eps=1e-6, max_position_embeddings=262144,
                                        tie_word_embeddings=False,
                                        rope_parameters={"rope_type": "default", "rope_theta": 10000000,
                                                         "partial_rotary_factor": 0.25,
                                                         "mrope_section": [11, 11, 10]})),
    # Qwen3.5-35B-A3B-like: 40 layers, 256 experts top-8 and a shared expert, hidden 2048.
    "qwen3.5-35b-a3b": dict(model_type="qwen3_5_moe", architectures=["Qwen3_5MoeForConditionalGeneration"],
                            text_config=dict(model_type="qwen3_5_moe_text", hidden_size=2048,
                                             num_hidden_layers=40, num_attention_heads=16,
                                             num_key_value_heads=2, head_dim=256, linear_num_value_heads=32,
                                             linear_num_key_heads=16, linear_key_head_dim=128,
                                             linear_value_head_dim=128, linear_conv_kernel_dim=4,
                                             full_attention_interval=4, num_experts=256, num_experts_per_tok=8,
                                             moe_intermediate_size=512, shared_expert_intermediate_size=512,
                                             vocab_size=151936, rms_norm_eps=1e-6,
                                             max_position_embeddings=262144, tie_word_embeddings=False,
                                             rope_parameters={"rope_type": "default", "rope_theta": 10000000,
                                                              "partial_rotary_factor": 0.25,
                                                              "mrope_section": [11, 11, 10]})),
    # Issue #26's model that one 80 GB GPU cannot hold: Llama-3-70B's dims with 56 of its 80
    # layers, 50.0B parameters, 100 GB in bf16 (written by make_streamed: no GPU holds it whole).
    "llama3-70b-56l": dict(model_type="llama", architectures=["LlamaForCausalLM"], hidden_size=8192,
                           num_hidden_layers=56, intermediate_size=28672, num_attention_heads=64,
                           num_key_value_heads=8, rms_norm_eps=1e-5, vocab_size=128256,
                           rope_theta=500000.0, max_position_embeddings=8192, tie_word_embeddings=False),
    # For trying the scripts on a CPU machine.
    "tiny": dict(model_type="qwen3", architectures=["Qwen3ForCausalLM"], hidden_size=64,
                 num_hidden_layers=2, intermediate_size=128, num_attention_heads=4,
                 num_key_value_heads=2, head_dim=16, rms_norm_eps=1e-6, vocab_size=1000,
                 rope_theta=1000000.0, max_position_embeddings=4096, tie_word_embeddings=True),
}
# GPT-OSS-20B with a 4,096-position window (mlx-lm wants a sliding layer): a prompt of a few
# hundred never wraps or trims the ring, which tells its part in a layer-kernel drift from the
# sinks' and biases' (#17).
SHAPES["gpt-oss-20b-widewin"] = dict(SHAPES["gpt-oss-20b"], sliding_window=4096)
SHAPES["llama-d64-yarn"] = dict(
    SHAPES["llama-d64"], rope_scaling={"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0,
                                       "beta_slow": 1.0, "original_max_position_embeddings": 4096})


def shape_config(shape):
    """SHAPES[shape], or with a suffix `@N` (`qwen3.5-9b@8`) the same layers but only the first N
    of them: a kernel's logits check on real layer shapes in seconds rather than minutes."""
    name, _, layers = shape.partition("@")
    cfg = json.loads(json.dumps(SHAPES[name]))
    if layers:
        n = int(layers)
        text = cfg.get("text_config", cfg)
        text["num_hidden_layers"] = n
        if "layer_types" in text:
            text["layer_types"] = text["layer_types"][:n]
    return cfg


def make(shape, quant, out, peaked=False):
    """Random weights of `shape`'s real sizes. With `peaked`, the RMS-norm weights are ones (the
    final norm 4s) instead of N(0, 0.02): the logits then spread over several units, so a wrong
    kernel shows as wrong tokens and log-probabilities rather than hiding in a nearly flat
    distribution, where every engine's greedy token is a near-tie. The o and down projections
    are also scaled by 1/sqrt(2 * layers), as GPT-2 initializes them, so the residual stream does
    not grow layer after layer and bf16 rounding does not snowball through a deep model: on a
    32-layer Llama of width 512 (CPU, bf16 against the same weights in f32, 16 greedy steps) the
    greedy mismatches went from 6 to 0. Without it the peaked Llama-3-8B differed from mlx-lm by
    ~1.3 log-probability units on both of rmx's decode paths (docs/perf.md, session 4), and
    still did with that scaling, MLX's own ops included (session 5): the embeddings (N(0, 0.02))
    were ten times smaller than what each layer adds, so the first layers' pre-norms amplified
    every rounding difference. So an untied model's embeddings are scaled to N(0, 1). A tied
    model's stay (Qwen3-0.6B agreed with mlx-lm within 0.15-0.25 without it): its embedding is
    also the output head, and a residual stream dominated by the input token's embedding makes
    its logits far larger (~80 for the echoed token by estimate, where one bf16 step is 0.5):
    with it, Qwen3-0.6B's max |diff| went to 0.19-0.69 (session 6), with no greedy mismatch.

    Measured on the CPU: mlx-lm's bf16 greedy decode, 32 tokens after a random 32-token prompt,
    against the same weights in float32 teacher-forced along those tokens (what `drift` does on
    saved files), on the Llama-3-8B shape with 32 layers and hidden 4096 (intermediate 1024, its
    down_proj scaled by sqrt(14336 / 1024) so each MLP adds what the real one does; vocabulary
    32000; 4-bit: weights quantized and dequantized, group 64, run dense):

        embeddings       max |d logprob| top-5  median  greedy mismatches  residual rel. error
        N(0, 0.02)       0.93                   0.56    5 / 32 (gap 0.42)  0.063
        N(0, 0.02) 4bit  1.33                   0.52    7 / 32 (gap 0.46)  0.064
        N(0, 1)          0.33                   0.14    1 / 32 (gap 0.14)  0.021
        N(0, 1) 4bit     0.30                   0.16    1 / 32 (gap 0.05)  0.022

    The first rows match the GPU's session-5 figures (0.8-1.4, MLX's own ops among them), the
    others session 6's (0.39-0.52). The last column, the residual stream's relative error after
    the last layer, is within 2x of what 64 bf16 residual adds leave whatever the weights
    (Qwen3-0.6B's shape, 28 layers: 0.014), so the rest scales with the logits' size: a final norm of 2 instead of 4 halves every figure (N(0, 1):
    max 0.156, one mismatch at 0.07), bf16's steps at that size halving with them. The context
    still matters: along the same tokens after another prompt 20 of 31 greedy picks change (31 of
    31 with N(0, 0.02)).

    The peaked Qwen3-0.6B repeats one token: after logits_check.py's 64-token prompt all 32
    greedy tokens are the same (CPU, bf16 and float32 alike, top-1 probability 0.57), and 1-2
    distinct tokens of 32 after three other draws of its shape's weights and prompt; its check
    compares little more than the log-probabilities along a run of one token."""
    from mlx.utils import tree_flatten, tree_map, tree_map_with_path
    from mlx_lm.utils import save_model, save_config, quantize_model
    import importlib
    cfg = shape_config(shape)
    mod = importlib.import_module(f"mlx_lm.models.{cfg['model_type']}")
    args = mod.ModelArgs.from_dict(cfg)
    model = mod.Model(args)
    mx.random.seed(0)
    model.update(tree_map(lambda p: (mx.random.normal(p.shape) * 0.02).astype(mx.bfloat16), model.parameters()))
    if peaked:
        out_scale = (2 * cfg.get("text_config", cfg)["num_hidden_layers"]) ** -0.5
        embed_scale = 1.0 if cfg.get("tie_word_embeddings", False) else 1 / 0.02

        def peak(path, p):
            if path.endswith("o_proj.weight") or path.endswith("down_proj.weight"):
                return (p.astype(mx.float32) * out_scale).astype(mx.bfloat16)
            if path.endswith("embed_tokens.weight"):
                return (p.astype(mx.float32) * embed_scale).astype(mx.bfloat16)
            if not path.endswith("norm.weight"):
                return p
            return mx.full(p.shape, 4.0 if path.endswith("model.norm.weight") else 1.0, mx.bfloat16)
        model.update(tree_map_with_path(peak, model.parameters()))
    if quant == "bf16":
        mx.eval(model.parameters())
    elif quant == "mxfp4":
        # As the official MLX conversions of gpt-oss: mxfp4 with the model's own predicate. Left
        # lazy until saved, one shard at a time: a 30B model's bf16 weights would not fit at once.
        model, cfg = quantize_model(model, cfg, None, None, mode="mxfp4")
    else:
        bits = 4 if quant == "4bit" else 8
        model, cfg = quantize_model(model, cfg, group_size=64, bits=bits)
    os.makedirs(out, exist_ok=True)
    save_model(out, model)
    save_config(cfg, os.path.join(out, "config.json"))
    write_tokenizer(out, cfg)


def make_streamed(shape, out, shard_bytes=4 << 30):
    """bf16 random weights (N(0, 0.02), norms ones) of `shape` written shard by shard, each
    generated, saved and freed before the next: for models larger than the device's memory,
    which make() would hold whole once saved (the saved arrays stay the model's)."""
    from mlx.utils import tree_flatten
    from mlx_lm.utils import save_config
    import importlib
    cfg = dict(SHAPES[shape])
    mod = importlib.import_module(f"mlx_lm.models.{cfg['model_type']}")
    model = mod.Model(mod.ModelArgs.from_dict(cfg))
    shapes = [(k, v.shape) for k, v in tree_flatten(model.parameters())]
    del model
    os.makedirs(out, exist_ok=True)
    mx.random.seed(0)
    shards, cur, size = [], [], 0
    for k, shp in shapes:
        n = 2 * math.prod(shp)
        if cur and size + n > shard_bytes:
            shards.append(cur)
            cur, size = [], 0
        cur.append((k, shp))
        size += n
    shards.append(cur)
    index = {}
    for i, shard in enumerate(shards):
        name = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        w = {k: (mx.ones(shp) if k.endswith("norm.weight") else mx.random.normal(shp) * 0.02)
             .astype(mx.bfloat16) for k, shp in shard}
        mx.save_safetensors(os.path.join(out, name), w, metadata={"format": "mlx"})
        del w
        mx.clear_cache()
        index.update({k: name for k, _ in shard})
        print(f"  {name}", flush=True)
    total = sum(2 * math.prod(shp) for _, shp in shapes)
    json.dump({"metadata": {"total_size": total}, "weight_map": index},
              open(os.path.join(out, "model.safetensors.index.json"), "w"))
    save_config(cfg, os.path.join(out, "config.json"))
    write_tokenizer(out, cfg)


def write_tokenizer(out, cfg):
    """A word-level tokenizer.json of the model's vocabulary size (the benchmarks feed ids)."""
    vocab = {f"t{i}": i for i in range(cfg.get("text_config", cfg)["vocab_size"])}
    tok = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [],
           "normalizer": None, "pre_tokenizer": {"type": "Whitespace"}, "post_processor": None,
           "decoder": None, "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "t0"}}
    json.dump(tok, open(os.path.join(out, "tokenizer.json"), "w"))
    json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": "t1"},
              open(os.path.join(out, "tokenizer_config.json"), "w"))


def vocab_size(model):
    """The vocabulary of an mlx-lm model, flat or (Qwen3.5) a text model inside a wrapper."""
    args = model.args
    return getattr(args, "vocab_size", None) or args.text_config["vocab_size"]


def time_model(path, prompt_len, gen, rounds):
    from mlx_lm.utils import load_model
    from mlx_lm.generate import generate_step
    model, _ = load_model(__import__("pathlib").Path(path))
    vocab = vocab_size(model)
    pre, dec, ttft = [], [], []
    mx.reset_peak_memory()
    for r in range(rounds + 1):
        prompt = mx.random.randint(0, vocab * 3 // 4, (prompt_len,), key=mx.random.key(r))
        t0 = time.perf_counter()
        t_first = t_last = None
        for n, (tok, _) in enumerate(generate_step(prompt, model, max_tokens=gen)):
            now = time.perf_counter()
            if n == 0:
                t_first = now
            t_last = now
        if r == 0:
            continue  # warm-up
        pre.append(prompt_len / (t_first - t0))
        ttft.append((t_first - t0) * 1e3)
        if gen > 1:
            dec.append((gen - 1) / (t_last - t_first))
    med = lambda v: statistics.median(v) if v else 0.0
    return {"prefill_tps": med(pre), "decode_tps": med(dec), "ttft_ms": med(ttft),
            "peak_memory_bytes": mx.get_peak_memory()}


def to_float32(model):
    """Every floating parameter of `model` to float32, in place: quantized layers keep their packed
    weights, and their float32 scales and biases make the matmuls run in float32."""
    from mlx.utils import tree_map
    model.update(tree_map(lambda p: p.astype(mx.float32) if mx.issubdtype(p.dtype, mx.floating) else p,
                          model.parameters()))


def forced_logprobs(model, prompt, toks):
    """float32 log-probabilities `[len(toks), vocab]` at each of `toks`' positions after `prompt`,
    teacher-forced along `toks` in one forward pass."""
    logits = model(mx.array(prompt + toks[:-1])[None])[0, len(prompt) - 1:].astype(mx.float32)
    return logits - mx.logsumexp(logits, axis=-1, keepdims=True)


def drift(path, prompt_lens, gen):
    """bf16 against float32 on the same files (see the module docstring); one JSON line per
    prompt length, the prompts drawn as logits_check.py draws them."""
    from pathlib import Path
    from mlx_lm.utils import load_model
    from mlx_lm.models.cache import make_prompt_cache
    model, _ = load_model(Path(path))
    vocab = vocab_size(model)
    logprobs = lambda x: x.astype(mx.float32) - mx.logsumexp(x.astype(mx.float32), axis=-1, keepdims=True)
    runs = []
    for n in prompt_lens:
        prompt = mx.random.randint(0, vocab * 3 // 4, (n,), key=mx.random.key(n)).tolist()
        cache = make_prompt_cache(model)
        logits = model(mx.array(prompt)[None], cache=cache)[0, -1]
        toks, lps = [], []
        for step in range(gen):
            lp = logprobs(logits)
            mx.eval(lp)
            toks.append(int(mx.argmax(lp).item()))
            lps.append(lp)
            if step + 1 < gen:
                logits = model(mx.array([[toks[-1]]]), cache=cache)[0, -1]
        runs.append((prompt, toks, lps))
        del cache
    to_float32(model)
    for prompt, toks, lps in runs:
        ref = forced_logprobs(model, prompt, toks)
        mx.eval(ref)
        max_diff, mismatches, worst_gap, top1 = 0.0, 0, 0.0, []
        for step, (t, lp) in enumerate(zip(toks, lps)):
            r = ref[step]
            for i in mx.argsort(-lp)[:5].tolist():
                max_diff = max(max_diff, abs(lp[i].item() - r[i].item()))
            m = int(mx.argmax(r).item())
            if m != t:
                mismatches += 1
                worst_gap = max(worst_gap, r[m].item() - r[t].item())
            top1.append(float(mx.exp(r[m]).item()))
        print(json.dumps({"model": os.path.basename(path.rstrip("/")), "prompt_len": len(prompt),
                          "steps": len(toks), "max_abs_logprob_diff": round(max_diff, 4),
                          "greedy_mismatches": mismatches, "worst_mismatch_gap": round(worst_gap, 4),
                          "distinct_tokens": len(set(toks)),
                          "mean_top1_prob": round(statistics.mean(top1), 3)}), flush=True)


def copybw():
    x = mx.random.normal((256 * 1024 * 1024,)).astype(mx.bfloat16)  # 512 MB
    mx.eval(x)
    f = lambda: mx.eval(x + 1)
    for _ in range(3):
        f()
    ts = []
    for _ in range(10):
        t = time.perf_counter(); f(); ts.append(time.perf_counter() - t)
    return 2 * x.nbytes / statistics.median(ts)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make"); m.add_argument("--shape"); m.add_argument("--quant"); m.add_argument("--out")
    m.add_argument("--peaked", action="store_true")
    ms = sub.add_parser("make-streamed"); ms.add_argument("--shape"); ms.add_argument("--out")
    t = sub.add_parser("time"); t.add_argument("--model"); t.add_argument("--prompt-len", type=int)
    t.add_argument("--gen", type=int); t.add_argument("--rounds", type=int, default=3)
    d = sub.add_parser("drift"); d.add_argument("--model")
    d.add_argument("--prompt-len", type=int, nargs="+", default=[64]); d.add_argument("--gen", type=int, default=32)
    sub.add_parser("copybw")
    a = ap.parse_args()
    if a.cmd == "make":
        make(a.shape, a.quant, a.out, a.peaked)
    elif a.cmd == "make-streamed":
        make_streamed(a.shape, a.out)
    elif a.cmd == "time":
        print(json.dumps(time_model(a.model, a.prompt_len, a.gen, a.rounds)))
    elif a.cmd == "drift":
        drift(a.model, a.prompt_len, a.gen)
    else:
        print(json.dumps({"copy_bytes_per_s": copybw()}))
