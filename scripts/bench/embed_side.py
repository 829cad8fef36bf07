#!/usr/bin/env python3
"""The reference side of scripts/gpu-embed-bench.sh: mlx-embeddings 0.1.0's own model code.

  make  --shape S --quant {bf16,8bit,4bit} --out DIR
        a random-weight embedding model of a real model's exact shape (SHAPES), laid out as
        mlx-embeddings' convert writes it (tests/py/tiny_encoders.py: model.safetensors + index,
        config.json with "quantization" when quantized), with the sentence-transformers files
        (modules.json, 1_Pooling/config.json, sentence_bert_config.json,
        config_sentence_transformers.json) and a word-level tokenizer.json of the model's
        vocabulary size (the benchmark feeds token ids: the tokenizer only has to load).
        bf16: every weight bf16. 8bit / 4bit: as `mlx_embeddings.convert -q --q-bits B` does,
        over its default --dtype float16 (scales, biases, norms and whatever stays unquantized
        are float16), group 64, affine; every Linear and Embedding whose weight's last
        dimension is a multiple of 64 is quantized, the word embeddings included.
  time  --model DIR --tokens N[,N...] --batch B[,B...] --rounds R [--warmup 1]
        times mlx-embeddings' forward on B synthetic inputs of N token ids each (equal lengths:
        no padding; an all-ones attention mask, as a tokenizer's batch carries), then
        sentence-transformers' pooling (1_Pooling: CLS, last token or mean) and Normalize in
        float32, up to mx.eval of the pooled vectors; the model stays in its saved dtype. The
        ids are rmx's (crates/rmx-engine/src/bench.rs synthetic_prompt, same seeds: the lower
        3/4 of the vocabulary), so each case feeds both engines the same inputs. One JSON line
        per (tokens, batch): {"tokens", "batch", "inputs_per_s", "tokens_per_s", "latency_ms",
        "peak_memory_bytes"}, medians over the rounds; the peak (reset before each case, after
        loading) includes the weights, as rmx bench's does. Lengths are cut to the model's
        max_seq_length, as rmx bench cuts them.

Needs mlx and mlx-embeddings (installed --no-deps is enough: its model modules are imported
without the package's __init__, see tests/py/tiny_encoders.py's mlx_embeddings_module, whose
load_model, randomize, save_weights and friends this reuses); no transformers, tokenizers or
network.
"""
import argparse
import copy
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "py"))
import tiny_encoders as te  # noqa: E402

XLMR = te.FAMILY_SPECS["xlm_roberta"]
BERT_CLS = te.FAMILY_SPECS["bert_cls"]
QWEN3 = te.FAMILY_SPECS["qwen3_embedding"]

# Each: the config.json the real model has (the keys of its family in tiny_encoders, the sizes
# here), its pooling and its sentence_bert_config.json.
SHAPES = {
    # BAAI/bge-m3: XLM-RoBERTa large, 8192 positions (+ padding_idx + 1), CLS pooling.
    "bge-m3": dict(
        base=XLMR, pooling="cls", max_seq_length=8192,
        config=dict(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16,
                    intermediate_size=4096, vocab_size=250002, max_position_embeddings=8194,
                    type_vocab_size=1, pad_token_id=1, layer_norm_eps=1e-5)),
    # BAAI/bge-small-en-v1.5: BERT, CLS pooling, lowercased input.
    "bge-small": dict(
        base=BERT_CLS, pooling="cls", max_seq_length=512,
        config=dict(hidden_size=384, num_hidden_layers=12, num_attention_heads=12,
                    intermediate_size=1536, vocab_size=30522, max_position_embeddings=512,
                    type_vocab_size=2, pad_token_id=0, layer_norm_eps=1e-12)),
    # Qwen/Qwen3-Embedding-0.6B: Qwen3-0.6B's decoder (tied embeddings, no lm_head),
    # vocabulary 151669, last-token pooling.
    "qwen3-embedding-0.6b": dict(
        base=QWEN3, pooling="lasttoken", max_seq_length=8192,
        config=dict(hidden_size=1024, num_hidden_layers=28, num_attention_heads=16,
                    num_key_value_heads=8, head_dim=128, intermediate_size=3072,
                    vocab_size=151669, max_position_embeddings=32768, rms_norm_eps=1e-6,
                    rope_theta=1000000, tie_word_embeddings=True)),
    # For trying the scripts on a CPU machine (every dimension a multiple of 64: all quantize).
    "tiny-bert": dict(
        base=BERT_CLS, pooling="cls", max_seq_length=512,
        config=dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                    intermediate_size=128, vocab_size=1024, max_position_embeddings=512,
                    type_vocab_size=2, pad_token_id=0, layer_norm_eps=1e-12)),
    "tiny-qwen3-embedding": dict(
        base=QWEN3, pooling="lasttoken", max_seq_length=8192,
        config=dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                    num_key_value_heads=2, head_dim=16, intermediate_size=128, vocab_size=1024,
                    max_position_embeddings=4096, rms_norm_eps=1e-6, rope_theta=1000000,
                    tie_word_embeddings=True)),
}
QUANTS = ["bf16", "8bit", "4bit"]


def word_level_tokenizer(out, vocab_size, cfg):
    """tokenizer.json as scripts/bench/mlx_side.py writes it (WordLevel "t0".."t{V-1}", split on
    whitespace), the model's special tokens named in tokenizer_config.json by their ids."""
    vocab = {f"t{i}": i for i in range(vocab_size)}
    tok = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [],
           "normalizer": None, "pre_tokenizer": {"type": "Whitespace"}, "post_processor": None,
           "decoder": None, "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "t0"}}
    (out / "tokenizer.json").write_text(json.dumps(tok), encoding="utf-8")
    tc = {"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": 8192}
    if cfg["model_type"] == "qwen3":
        eos = f"t{min(cfg['eos_token_id'], vocab_size - 1)}"
        tc.update(eos_token=eos, pad_token=eos, padding_side="left")
    else:
        tc.update(pad_token=f"t{cfg.get('pad_token_id') or 0}", unk_token="t0")
    te.write_json(out / "tokenizer_config.json", tc)


def make(shape, quant, out):
    import mlx.core as mx
    import mlx.nn as nn
    from mlx.utils import tree_flatten, tree_unflatten

    spec = SHAPES[shape]
    out = Path(out)
    if spec["base"] is QWEN3 and "embedding" not in out.name.lower():
        # rmx reads a Qwen3 as an embedding model by its modules.json too, but a real MLX
        # conversion has none: the folder's name is what tells (crates/rmx-models/src/embed).
        sys.exit(f"{out.name}: a Qwen3-Embedding folder's name must contain 'embedding'")
    cfg = copy.deepcopy(spec["base"]["config"])
    cfg.update(spec["config"])
    if cfg["model_type"] == "qwen3":
        cfg["eos_token_id"] = cfg["bos_token_id"] = min(cfg["eos_token_id"], cfg["vocab_size"] - 1)
    tmp = Path(str(out) + ".tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)

    arch = te.mlx_embeddings_module(cfg["model_type"])
    model = arch.Model(arch.ModelArgs.from_dict(cfg))
    te.randomize(model, 0)
    dtype = mx.bfloat16 if quant == "bf16" else mx.float16
    model.update(tree_unflatten([(k, v.astype(dtype)) for k, v in tree_flatten(model.parameters())]))
    if quant in ("8bit", "4bit"):
        bits = 8 if quant == "8bit" else 4
        nn.quantize(model, group_size=te.GROUP_SIZE, bits=bits, mode="affine",
                    class_predicate=te.convert_predicate)
        cfg["quantization"] = {"group_size": te.GROUP_SIZE, "bits": bits, "mode": "affine"}
    mx.eval(model.parameters())
    te.save_weights(tmp, model)
    del model
    te.save_config(cfg, tmp / "config.json")

    te.write_json(tmp / "modules.json", te.MODULES)
    (tmp / "1_Pooling").mkdir()
    te.write_json(tmp / "1_Pooling" / "config.json", te.pooling_config(cfg["hidden_size"], spec["pooling"]))
    te.write_json(tmp / "sentence_bert_config.json",
                  {**spec["base"]["sentence_bert"], "max_seq_length": spec["max_seq_length"]})
    te.write_json(tmp / "config_sentence_transformers.json", spec["base"]["st_config"])
    word_level_tokenizer(tmp, cfg["vocab_size"], cfg)

    if out.exists():
        shutil.rmtree(out)
    os.rename(tmp, out)


def synthetic_prompt(n, vocab, seed):
    """crates/rmx-engine/src/bench.rs synthetic_prompt: xorshift64 from `seed`, ids below 3/4
    of the vocabulary."""
    m64 = (1 << 64) - 1
    s = 0x9E3779B97F4A7C15 ^ ((seed * 0xBF58476D1CE4E5B9) & m64)
    top = max(vocab * 3 // 4, 1)
    out = []
    for _ in range(n):
        s ^= (s << 13) & m64
        s ^= s >> 7
        s ^= (s << 17) & m64
        out.append(s % top)
    return out


def pooled(model, cfg, st, ids):
    """mlx-embeddings' forward, then sentence-transformers' pooling and Normalize (float32):
    the pooled token picked before the cast, so only the vectors are converted."""
    import mlx.core as mx

    x = mx.array(ids, dtype=mx.int32)
    mask = mx.ones(x.shape, dtype=mx.int32)
    hidden = model(x, attention_mask=mask).last_hidden_state
    if st["pooling"] == "cls_token":
        v = hidden[:, 0].astype(mx.float32)
    elif st["pooling"] == "lasttoken":
        v = hidden[:, -1].astype(mx.float32)  # no padding: every input's last token is the last
    else:
        return te.pool(hidden, mask, st)
    if st["normalize"]:
        v = v / mx.maximum(mx.linalg.norm(v, axis=-1, keepdims=True), 1e-12)
    return v


def time_model(path, lens, batches, rounds, warmup):
    import mlx.core as mx

    model, cfg = te.load_model(path)
    st = te.read_st(path)
    vocab = cfg["vocab_size"]
    limit = st["max_seq_length"]
    med = statistics.median
    for li, n in enumerate(lens):
        n = min(n, limit)
        for b in batches:
            ips, tps, lat = [], [], []
            mx.reset_peak_memory()
            for r in range(warmup + rounds):
                ids = [synthetic_prompt(n, vocab, li * 1_000_000 + r * 1000 + i) for i in range(b)]
                t = time.perf_counter()
                v = pooled(model, cfg, st, ids)
                mx.eval(v)
                s = time.perf_counter() - t
                if r >= warmup:
                    ips.append(b / s)
                    tps.append(b * n / s)
                    lat.append(s * 1e3)
            print(json.dumps({"tokens": n, "batch": b, "inputs_per_s": med(ips), "tokens_per_s": med(tps),
                              "latency_ms": med(lat), "peak_memory_bytes": mx.get_peak_memory()}),
                  flush=True)


def ints(text):
    return [int(x) for x in text.split(",") if x]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make")
    m.add_argument("--shape", required=True, choices=sorted(SHAPES))
    m.add_argument("--quant", required=True, choices=QUANTS)
    m.add_argument("--out", required=True)
    t = sub.add_parser("time")
    t.add_argument("--model", required=True)
    t.add_argument("--tokens", type=ints, required=True, help="N[,N...]")
    t.add_argument("--batch", type=ints, required=True, help="B[,B...]")
    t.add_argument("--rounds", type=int, default=5)
    t.add_argument("--warmup", type=int, default=1)
    a = ap.parse_args()
    if a.cmd == "make":
        make(a.shape, a.quant, a.out)
    else:
        time_model(a.model, a.tokens, a.batch, a.rounds, a.warmup)


if __name__ == "__main__":
    main()
