"""Qwen3.5 checkpoints as the Hub ships them, with their multi-token-prediction head, and that
head's guesses computed by a reference built from mlx-lm's own Qwen3.5 layer and norms.

  make --src DIR --out DIR [--seed N] [--head random|successor]
      DIR (a tiny Qwen3.5 that tiny_models.py wrote, f32 or bf16) rewritten in transformers'
      layout (`model.language_model.*`, convolutions as [channels, 1, kernel], RMS norms stored
      minus one, fused experts), plus an `mtp.*` head of one full-attention layer: random, or
      (`successor`, for a model tiny_models.py scripted) one that passes the token's embedding
      through to the lm_head, so it guesses the token the script puts after it: the model's
      own next-but-one token, on the script.
  convert --src DIR --out DIR [--bits B]
      mlx_lm.convert of DIR (quantized to B bits, groups of 64, when given): what `rmx import`
      must write, less the head.
  compare --mlx-lm DIR --rmx DIR
      JSON: tensors only one side has, tensors whose values differ, and whether the configs'
      quantization blocks agree.
  reference --model DIR --prompt-ids 1,2,3 --chain N
      JSON: `rows`, the head's greedy guess at each prompt position (the state at i with the
      token at i + 1 guessing the token at i + 2; the last row pairs the state at the last
      position with the model's own next token), and `chain`, N more guesses, each made from
      the head's previous output and guess.

mlx-lm loads the rewritten model through its own sanitize (which drops `mtp.*`), so the model's
tokens stay mlx-lm's; vLLM's qwen3_5_mtp.py defines the head: fc(concat(norm_e(embed(t)),
norm_h(h))) -> decoder layer -> norm, the embedding and lm_head shared with the model.
"""

import argparse
import json
import shutil
import sys
from pathlib import Path

import mlx.core as mx
import mlx.nn as nn

# Norms transformers stores minus one (mlx-lm's sanitize list and the head's own).
SHIFTED = (
    ".input_layernorm.weight",
    ".post_attention_layernorm.weight",
    "model.norm.weight",
    ".q_norm.weight",
    ".k_norm.weight",
    "mtp.norm.weight",
    "mtp.pre_fc_norm_hidden.weight",
    "mtp.pre_fc_norm_embedding.weight",
)


def is_next(config):
    """Qwen3-Next (its config at the top, experts stored one by one) or Qwen3.5."""
    return config["model_type"] == "qwen3_next"


def text_args(config):
    if is_next(config):
        from mlx_lm.models.qwen3_next import ModelArgs

        return ModelArgs.from_dict(config)
    from mlx_lm.models.qwen3_5 import TextModelArgs

    return TextModelArgs.from_dict(config["text_config"])


def mtp_layer(args):
    """The head's layer: a full-attention decoder layer of the family, with the experts where
    the model has them (vLLM builds it as a full-attention layer of the model's own kind)."""
    if hasattr(args, "mlp_only_layers"):
        from mlx_lm.models.qwen3_next import Qwen3NextDecoderLayer

        i = next(
            i for i in range(1, 1000)
            if (i + 1) % args.full_attention_interval == 0 and i not in args.mlp_only_layers
            and (i + 1) % args.decoder_sparse_step == 0
        )
        return Qwen3NextDecoderLayer(args, layer_idx=i)
    from mlx_lm.models.qwen3_5 import DecoderLayer

    return DecoderLayer(args, layer_idx=args.full_attention_interval - 1)


def split_experts(weights):
    """switch_mlp's stacked experts one by one, as Qwen3-Next's checkpoints store them."""
    out = {}
    for k, v in weights.items():
        if ".switch_mlp." in k:
            mlp, rest = k.split(".switch_mlp.")
            proj = rest[: -len(".weight")]
            for e in range(v.shape[0]):
                out[f"{mlp}.experts.{e}.{proj}.weight"] = v[e]
        else:
            out[k] = v
    return out


def fuse_experts(weights):
    """switch_mlp's stacked experts as transformers' fused gate_up_proj / down_proj."""
    out = {}
    for k, v in weights.items():
        if ".switch_mlp.up_proj.weight" in k or ".switch_mlp.down_proj.weight" in k:
            continue
        if k.endswith(".switch_mlp.gate_proj.weight"):
            mlp = k[: -len(".switch_mlp.gate_proj.weight")]
            up = weights[f"{mlp}.switch_mlp.up_proj.weight"]
            out[f"{mlp}.experts.gate_up_proj"] = mx.concatenate([v, up], axis=1)
            out[f"{mlp}.experts.down_proj"] = weights[f"{mlp}.switch_mlp.down_proj.weight"]
        else:
            out[k] = v
    return out


def unshift(weights):
    return {
        k: (v - 1.0 if v.ndim == 1 and k.endswith(SHIFTED) else v) for k, v in weights.items()
    }


def cmd_make(a):
    from mlx.utils import tree_flatten

    src, out = Path(a.src), Path(a.out)
    config = json.loads((src / "config.json").read_text())
    if "quantization" in config:
        sys.exit("mtp_model.py make: the source must be a float model (f32 or bf16)")
    tmp = Path(str(out) + ".tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    weights = {}
    for f in sorted(src.glob("*.safetensors")):
        if f.name == "vision.safetensors":
            continue
        weights.update(mx.load(str(f)))
    nxt = is_next(config)
    dtype = weights["model.embed_tokens.weight" if nxt else "language_model.model.embed_tokens.weight"].dtype
    hf = {}
    for k, v in weights.items():
        if nxt:
            pass
        elif k.startswith("language_model.model."):
            k = "model.language_model." + k[len("language_model.model."):]
        elif k.startswith("language_model."):
            k = k[len("language_model."):]
        if k.endswith("conv1d.weight"):
            v = v.swapaxes(1, 2)
        hf[k] = v
    # The head: random, as the model's own weights are (std 0.02 products, norms near 1, the
    # fc's halves each about as strong as the other).
    args = text_args(config)
    mx.random.seed(a.seed)
    layer = mtp_layer(args)
    head = {f"mtp.layers.0.{k}": v for k, v in tree_flatten(layer.parameters())}
    h = args.hidden_size
    head["mtp.fc.weight"] = mx.random.normal((h, 2 * h)) * (1.0 / (2 * h) ** 0.5)
    for n in ("mtp.norm", "mtp.pre_fc_norm_hidden", "mtp.pre_fc_norm_embedding"):
        head[f"{n}.weight"] = mx.ones((h,))
    for k, v in list(head.items()):
        if k.endswith("A_log") or k.endswith("norm.weight"):
            head[k] = v + 0.1 * mx.random.normal(v.shape)
        elif v.ndim >= 2 and not k.endswith("fc.weight"):
            head[k] = mx.random.normal(v.shape) * (1.0 / v.shape[-1] ** 0.5)
    if a.head == "successor":
        # fc keeps the embedding's half; the layer adds nothing (zero output projections), the
        # norms are plain: the lm_head sees the token's normalized embedding, as the scripted
        # model's own lm_head does (tiny_models.py script_weights).
        head["mtp.fc.weight"] = mx.concatenate([mx.eye(h), mx.zeros((h, h))], axis=1)
        for k, v in list(head.items()):
            if k.endswith("norm.weight"):
                head[k] = mx.ones_like(v)
            elif "o_proj." in k or "down_proj." in k:
                head[k] = mx.zeros_like(v)
    hf.update(head)
    hf = unshift(split_experts(hf) if nxt else fuse_experts(hf))
    hf = {k: (v.astype(dtype) if mx.issubdtype(v.dtype, mx.floating) and not k.endswith("A_log") else v)
          for k, v in hf.items()}
    mx.save_safetensors(str(tmp / "model.safetensors"), hf, metadata={"format": "pt"})
    if nxt:
        config["num_nextn_predict_layers"] = 1
    else:
        config["text_config"]["mtp_num_hidden_layers"] = 1
    config.pop("vision_config", None)
    (tmp / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    for f in src.iterdir():
        if f.is_file() and f.suffix != ".safetensors" and f.name != "config.json" and not f.name.endswith(".index.json"):
            shutil.copy(f, tmp / f.name)
    if out.exists():
        shutil.rmtree(out)
    tmp.rename(out)


class Head(nn.Module):
    """vLLM's Qwen3_5MultiTokenPredictor, one layer, from mlx-lm's pieces."""

    def __init__(self, args):
        super().__init__()
        h, eps = args.hidden_size, args.rms_norm_eps
        self.fc = nn.Linear(2 * h, h, bias=False)
        self.pre_fc_norm_embedding = nn.RMSNorm(h, eps=eps)
        self.pre_fc_norm_hidden = nn.RMSNorm(h, eps=eps)
        self.layers = [mtp_layer(args)]
        self.norm = nn.RMSNorm(h, eps=eps)

    def __call__(self, embeds, hidden, cache):
        from mlx_lm.models.base import create_attention_mask

        x = mx.concatenate(
            [self.pre_fc_norm_embedding(embeds), self.pre_fc_norm_hidden(hidden)], axis=-1
        )
        x = self.fc(x)
        mask = create_attention_mask(x, cache)
        return self.norm(self.layers[0](x, mask=mask, cache=cache))


def load_head(model_dir, args):
    weights = {}
    for f in sorted(Path(model_dir).glob("*.safetensors")):
        weights.update({k: v for k, v in mx.load(str(f)).items() if k.startswith("mtp.")})
    weights = {k: (v + 1.0 if v.ndim == 1 and k.endswith(SHIFTED) else v) for k, v in weights.items()}
    stacked, single = {}, {}
    for k, v in weights.items():
        if ".experts." in k and k.split(".experts.")[1].split(".")[0].isdigit():
            mlp, rest = k.split(".experts.")
            e, proj = rest.split(".", 1)
            single.setdefault((mlp, proj), {})[int(e)] = v
        elif k.endswith(".experts.gate_up_proj"):
            mlp = k[: -len(".experts.gate_up_proj")]
            mid = v.shape[1] // 2
            stacked[f"{mlp}.switch_mlp.gate_proj.weight"] = v[:, :mid]
            stacked[f"{mlp}.switch_mlp.up_proj.weight"] = v[:, mid:]
        elif k.endswith(".experts.down_proj"):
            stacked[k[: -len(".experts.down_proj")] + ".switch_mlp.down_proj.weight"] = v
        else:
            stacked[k] = v
    for (mlp, proj), by_e in single.items():
        stacked[f"{mlp}.switch_mlp.{proj}"] = mx.stack([by_e[e] for e in range(len(by_e))])
    head = Head(args)
    head.load_weights([(k[len("mtp."):], v) for k, v in stacked.items()], strict=True)
    return head


def cmd_reference(a):
    import mlx_lm.utils as mu
    from mlx_lm.models.cache import KVCache

    sys.path.insert(0, str(Path(__file__).parent))
    import tiny_models

    tiny_models.patch_cpu_gather_mm()
    model, config = mu.load_model(Path(a.model))
    args = text_args(config)
    head = load_head(a.model, args)
    lm = getattr(model, "language_model", model)
    ids = [int(t) for t in a.prompt_ids.split(",")]
    cache = lm.make_cache()
    hidden = lm.model(mx.array([ids]), cache)
    project = lambda h: lm.model.embed_tokens.as_linear(h) if args.tie_word_embeddings else lm.lm_head(h)
    nxt = int(mx.argmax(project(hidden[:, -1]), axis=-1).item())
    embed = lm.model.embed_tokens
    hc = KVCache()
    out = head(embed(mx.array([ids[1:] + [nxt]])), hidden, hc)
    rows = mx.argmax(project(out), axis=-1)[0].tolist()
    chain, guess, last = [], rows[-1], out[:, -1:]
    for _ in range(a.chain):
        last = head(embed(mx.array([[guess]])), last, hc)
        guess = int(mx.argmax(project(last[:, -1]), axis=-1).item())
        chain.append(guess)
    print(json.dumps({"next": nxt, "rows": rows, "chain": chain}))


def cmd_convert(a):
    import contextlib
    import io

    from mlx_lm import convert

    with contextlib.redirect_stdout(io.StringIO()):
        if a.bits:
            convert(a.src, a.out, quantize=True, q_bits=a.bits, q_group_size=64)
        else:
            convert(a.src, a.out)


def cmd_compare(a):
    def tensors(d):
        out = {}
        for f in sorted(Path(d).glob("*.safetensors")):
            out.update(mx.load(str(f)))
        return out

    ref, got = tensors(a.mlx_lm), tensors(a.rmx)
    differ = [
        k for k in sorted(set(ref) & set(got))
        if ref[k].shape != got[k].shape or ref[k].dtype != got[k].dtype
        or not mx.array_equal(ref[k], got[k]).item()
    ]
    def quant(d):
        q = json.loads((Path(d) / "config.json").read_text()).get("quantization")
        # the head's own per-module entries are rmx's alone
        return q and {k: v for k, v in q.items() if not k.startswith("mtp.")}

    print(json.dumps({
        "only_mlx_lm": sorted(set(ref) - set(got)),
        "only_rmx": sorted(set(got) - set(ref)),
        "differ": differ,
        "same_quantization": quant(a.mlx_lm) == quant(a.rmx),
        "tensors": len(ref),
    }))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make")
    m.add_argument("--src", required=True)
    m.add_argument("--out", required=True)
    m.add_argument("--seed", type=int, default=35)
    m.add_argument("--head", choices=["random", "successor"], default="random")
    r = sub.add_parser("reference")
    r.add_argument("--model", required=True)
    r.add_argument("--prompt-ids", required=True)
    r.add_argument("--chain", type=int, default=3)
    c = sub.add_parser("convert")
    c.add_argument("--src", required=True)
    c.add_argument("--out", required=True)
    c.add_argument("--bits", type=int)
    k = sub.add_parser("compare")
    k.add_argument("--mlx-lm", required=True)
    k.add_argument("--rmx", required=True)
    a = p.parse_args()
    {"make": cmd_make, "reference": cmd_reference, "convert": cmd_convert, "compare": cmd_compare}[a.cmd](a)


if __name__ == "__main__":
    main()
