#!/usr/bin/env python3
"""Vision-language references from mlx-vlm: processor tensors, tiny models, greedy tokens.

The Rust tests call this with the reference python ($RMX_TEST_PYTHON, scripts/test-env.sh).
Images are loaded as mlx-vlm loads them (mlx_vlm.utils.load_image: EXIF transpose, then
Pillow's convert("RGB")) and processed by the processor mlx-vlm builds (transformers' Pillow
backend, use_fast=False).

  pixels --config-dir DIR --out OUT.f32 [--pixtral-patch N] IMAGE...
         DIR holds a preprocessor_config.json; OUT.f32 gets each image's pixel_values
         ([3, H, W] float32, native endian) one after the other, OUT.json their [H, W];
         --pixtral-patch: mlx-vlm's Pixtral processor with sides a multiple of N (Mistral 3)
         --qwen: mlx-vlm's Qwen3-VL processor (Qwen3.5), its patches put back as [3, h, w]
         --gemma4: mlx-vlm's Gemma4ImageProcessor (patch budget, aspect kept)
  tower [--family qwen3_5|gemma4] --quant f32|bf16 --out DIR IMAGE...
         a tiny random Qwen3.5 vision tower (mlx-vlm's Qwen3-VL VisionModel) written to DIR as
         an mlx-vlm conversion writes `vision_tower.*`, with config.json and the processor's
         config; DIR/features.f32 its features for the images ([rows, 48] float32; shape and
         grids in DIR/features.json)
  mrope --dtype f32|bf16 --out DIR
         Qwen3.5's mRoPE by mlx-vlm on a prompt with two images: DIR/mrope.json (ids, grids,
         get_rope_index's positions and delta), DIR/q.f32 and DIR/rotated.f32 ([1, 2, L, 32])
  make --quant f32|bf16 [--family gemma3|mistral3|qwen3_5|gemma4] [--real-tower [--skeleton]]
       --out DIR
         a tiny random-weight Gemma 3 (or, --family mistral3, Mistral Small 3.1: Pixtral's
         tower, 4x4 patches merged 2x2, images within 64 pixels) vision-language model (Gemma3ForConditionalGeneration)
         made with mlx-vlm's model classes and written as an mlx-vlm conversion: the text
         tower of tiny_models.py's gemma3_vl, a 2-layer SigLIP tower (32x32 images, 4x4
         patches) and the avg-pool projector (16 image tokens), Gemma 3's real tokenizer,
         chat template and processor configs. --real-tower: the family's real tower shape
         (Gemma 3's SigLIP at 896 pixels, Mistral Small 3.1's Pixtral within 1,540, Qwen3.5's
         27 x 1,152 tower with its pixel budget) for timing;
         --skeleton: names and shapes only (weights.json), for scripts/bench/fill_weights.py
  prompt-ids --per-image N --images K --prompt TEXT --out OUT.json
         Gemma 3's processor (mlx-vlm's Gemma3Processor over the fixture tokenizer) on a user
         turn of K images then TEXT through the chat template, without added special tokens
         (the template writes the BOS): {"rendered", "ids"}
  reference --model DIR --out OUT.json [--max-tokens 12] --prompt TEXT IMAGE...
         mlx-vlm's greedy tokens for a user turn of the images then TEXT through the chat
         template: {"prompt_ids", "tokens"}; the first step's log-probabilities in OUT.f32
         [--prompt-ids IDS.json]: these prompt ids instead of the processor's (the images'
         pixels still the processor's)
"""

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def load_images(paths):
    from mlx_vlm.utils import load_image

    return [load_image(str(p)) for p in paths]


def cmd_pixels(args):
    import numpy as np

    if args.qwen:
        # Qwen3-VL / Qwen3.5's processor as mlx-vlm runs it: flattened patches, each image's
        # two temporal copies; turned back into [3, h, w] here (the first copy) so the test
        # compares the tensors before the model's own patchify.
        from mlx_vlm.models.qwen3_vl.processing_qwen3_vl import (
            Qwen3VLImageProcessor,
            _qwen_vl_image_kwargs,
        )

        qp = Qwen3VLImageProcessor(**_qwen_vl_image_kwargs(args.config_dir))
        ps, tps, ms = qp.patch_size, qp.temporal_patch_size, qp.merge_size

        def proc(img):
            out = qp([img])
            t, gh, gw = (int(v) for v in out["image_grid_thw"][0])
            px = np.asarray(out["pixel_values"]).reshape(t, gh // ms, gw // ms, ms, ms, 3, tps, ps, ps)
            px = px.transpose(0, 6, 5, 1, 3, 7, 2, 4, 8).reshape(t, tps, 3, gh * ps, gw * ps)
            assert np.array_equal(px[:, 0], px[:, -1]), "the temporal copies differ"
            return {"pixel_values": px[:, 0]}
    elif args.gemma4:
        # Gemma 4's processor as mlx-vlm builds it from a flat preprocessor_config.json.
        from mlx_vlm.models.gemma4.processing_gemma4 import Gemma4ImageProcessor

        cfg = json.loads((Path(args.config_dir) / "preprocessor_config.json").read_text())
        keys = ("patch_size", "max_soft_tokens", "pooling_kernel_size", "do_normalize",
                "do_rescale", "rescale_factor", "image_mean", "image_std")
        gp = Gemma4ImageProcessor(**{k: cfg[k] for k in keys if k in cfg})

        def proc(img):
            data, _ = gp([img])
            px = data["pixel_values"]
            return {"pixel_values": np.asarray(px[0])[None]}
    elif args.pixtral_patch:
        # Mistral 3's processor: mlx-vlm's own PixtralImageProcessor, called with the patch
        # times the spatial merge (mlx_vlm.models.mistral3.processing_mistral3).
        from mlx_vlm.models.pixtral.image_processing_pixtral import PixtralImageProcessor

        base = PixtralImageProcessor.from_pretrained(args.config_dir)
        proc = lambda img: base(img, patch_size=args.pixtral_patch)
    else:
        from transformers import AutoImageProcessor

        proc = AutoImageProcessor.from_pretrained(args.config_dir, use_fast=False)
    sizes = []
    with open(args.out, "wb") as out:
        for img in load_images(args.images):
            px = np.asarray(proc(img)["pixel_values"])[0]
            sizes.append(list(px.shape[1:]))
            out.write(np.ascontiguousarray(px, dtype=np.float32).tobytes())
    Path(args.out).with_suffix(".json").write_text(json.dumps(sizes))


# Gemma 3's vision side, tiny: 8x8 patches of 4x4 pixels, pooled 2x2 into 16 image tokens.
VISION = {
    "model_type": "siglip_vision_model",
    "hidden_size": 32,
    "intermediate_size": 48,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "patch_size": 4,
    "image_size": 32,
    "layer_norm_eps": 1e-6,
}
MM_TOKENS = 16


def vlm_config():
    import tiny_models

    cfg = json.loads(json.dumps(tiny_models.FAMILY_SPECS["gemma3_vl"]["config"]))
    cfg["text_config"]["mm_tokens_per_image"] = MM_TOKENS
    cfg["vision_config"] = dict(VISION)
    cfg["mm_tokens_per_image"] = MM_TOKENS
    cfg["boi_token_index"] = 255999
    cfg["eoi_token_index"] = 256000
    return cfg


def randomize_vision(model, seed, prefixes=("vision_tower.", "multi_modal_projector.")):
    """O(1) activations through a vision tower and its projector (the parameters under
    `prefixes`; all of them for None): the image tokens matter to the greedy tokens, as the
    text tokens do."""
    import mlx.core as mx
    from mlx.utils import tree_flatten, tree_unflatten

    params = [(k, v) for k, v in tree_flatten(model.parameters())
              if prefixes is None or k.startswith(prefixes)]
    keys = mx.random.split(mx.random.key(seed), len(params))
    new = []
    for (name, p), key in zip(params, keys):
        normal = lambda std, mean=0.0: mean + std * mx.random.normal(p.shape, key=key)
        leaf = name.rsplit(".", 2)[-2] if "." in name else name
        if name.endswith("mm_soft_emb_norm.weight"):
            w = normal(0.1)  # Gemma's RMSNorm scales by 1 + w
        elif leaf == "ln_pre" or ("norm" in leaf and name.endswith(".weight")):
            w = normal(0.1, 1.0)
        elif name.endswith(("patch_conv.weight", "patch_embedding.weight",
                            "patch_embed.proj.weight")):
            # a convolution [out, ..., in] (MLX's layout): its fan-in is all but the first axis
            w = normal(1.0 / (p.size // p.shape[0]) ** 0.5)
        elif name.endswith((".bias", "std_bias")):
            w = normal(0.1)
        elif name.endswith("std_scale"):
            w = normal(0.1, 1.0)
        elif name.endswith(("position_embedding.weight", "pos_embed.weight",
                            "position_embedding_table")):
            w = normal(0.5)
        elif name.endswith("mm_input_projection_weight"):
            # [vision hidden, text hidden], used as x @ W
            w = normal(1.0 / p.shape[0] ** 0.5)
        elif name.endswith(".weight") and len(p.shape) == 2:
            w = normal(1.0 / p.shape[-1] ** 0.5)
        else:
            raise ValueError(f"don't know how to initialise {name} {p.shape}")
        new.append((name, w.astype(mx.float32)))
    model.update(tree_unflatten(new))


# Mistral Small 3.1's vision side, tiny: 4x4-pixel patches, merged 2x2 (a merged patch is 8
# pixels a side), images within 64 pixels a side (so at most 8 x 8 = 64 image tokens).
PIXTRAL = {
    "model_type": "pixtral",
    "hidden_size": 32,
    "head_dim": 8,
    "intermediate_size": 48,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "image_size": 64,
    "patch_size": 4,
    "rope_theta": 10000.0,
    "rms_norm_eps": 1e-5,
}
# The ids Mistral Small 3.1's Tekken tokenizer gives its image tokens (and its pad), where
# Mistral Nemo's has <pad>, [PREFIX], [MIDDLE], [SUFFIX].
MISTRAL3_IMAGE_TOKENS = {10: "[IMG]", 11: "<pad>", 12: "[IMG_BREAK]", 13: "[IMG_END]"}
# Mistral Small 3.1's chat template, the parts a user turn of text and images takes.
MISTRAL3_TEMPLATE = (
    "{{- bos_token }}{%- for message in messages %}{%- if message['role'] == 'user' %}"
    "{{- '[INST]' }}{%- if message['content'] is string %}{{- message['content'] }}"
    "{%- else %}{%- for block in message['content'] %}{%- if block['type'] == 'text' %}"
    "{{- block['text'] }}{%- elif block['type'] in ['image', 'image_url'] %}{{- '[IMG]' }}"
    "{%- endif %}{%- endfor %}{%- endif %}{{- '[/INST]' }}"
    "{%- elif message['role'] == 'assistant' %}{{- message['content'] + eos_token }}"
    "{%- endif %}{%- endfor %}"
)


# Qwen3.5's vision tower, tiny: 4x4-pixel patches of two frames, merged 2x2, a 4x4 position
# table (interpolated up and down to each image's grid), heads of 16 (padded to 64 for MLX's
# fused attention, as Qwen3.5's 72 are to 80).
QWEN_VISION = {
    "model_type": "qwen3_5",
    "depth": 2,
    "hidden_size": 64,
    "intermediate_size": 96,
    "out_hidden_size": 48,
    "num_heads": 4,
    "patch_size": 4,
    "spatial_merge_size": 2,
    "temporal_patch_size": 2,
    "num_position_embeddings": 16,
    "in_channels": 3,
    "deepstack_visual_indexes": [],
}
QWEN_IMAGE_TOKEN = 248056


# Gemma 4's vision side, tiny: 4-pixel patches pooled 2x2, heads of 16 (padded to 64 for the
# fused attention), 16 soft tokens an image at most.
GEMMA4_VISION = {
    "model_type": "gemma4_vision", "hidden_size": 64, "intermediate_size": 96,
    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 4, "head_dim": 16,
    "rms_norm_eps": 1e-6, "patch_size": 4, "position_embedding_size": 64,
    "pooling_kernel_size": 2, "default_output_length": 16, "standardize": True,
    "rope_parameters": {"rope_theta": 100.0, "rope_type": "default"},
}
GEMMA4_TEXT_HIDDEN = 48
GEMMA4_IMAGE_TOKEN = 258880


def cmd_tower(args):
    """A tiny vision tower written as an mlx-vlm conversion writes it, with its config and
    processor config; then its features for IMAGES through mlx-vlm's processor, as
    get_input_embeddings runs it: Qwen3.5's (mlx-vlm's Qwen3-VL VisionModel) or, --family
    gemma4, Gemma 4's (VisionModel and embed_vision)."""
    if args.family == "gemma4":
        return tower_gemma4(args)
    import mlx.core as mx
    import numpy as np
    from mlx.utils import tree_flatten
    from mlx_vlm.models.qwen3_5.config import VisionConfig
    from mlx_vlm.models.qwen3_vl.processing_qwen3_vl import (
        Qwen3VLImageProcessor,
        _qwen_vl_image_kwargs,
    )
    from mlx_vlm.models.qwen3_vl.vision import VisionModel

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    model = VisionModel(VisionConfig.from_dict(dict(QWEN_VISION)))
    randomize_vision(model, 3141 + (args.quant == "bf16"), None)
    dtype = mx.float32 if args.quant == "f32" else mx.bfloat16
    model.set_dtype(dtype)
    weights = {f"vision_tower.{k}": v for k, v in tree_flatten(model.parameters())}
    mx.save_safetensors(str(out / "model.safetensors"), weights, metadata={"format": "mlx"})
    (out / "config.json").write_text(json.dumps({
        "model_type": "qwen3_5", "image_token_id": QWEN_IMAGE_TOKEN,
        "vision_config": QWEN_VISION}, indent=2))
    # Qwen3.5's preprocessor_config.json at the tiny sizes: factor 8, 64 to 1,024 pixels.
    (out / "preprocessor_config.json").write_text(json.dumps({
        "do_normalize": True, "do_rescale": True, "image_mean": [0.5, 0.5, 0.5],
        "image_processor_type": "Qwen2VLImageProcessorFast", "image_std": [0.5, 0.5, 0.5],
        "merge_size": 2, "patch_size": 4, "processor_class": "Qwen3VLProcessor",
        "rescale_factor": 0.00392156862745098, "temporal_patch_size": 2,
        "size": {"longest_edge": 1024, "shortest_edge": 64}}, indent=2))
    proc = Qwen3VLImageProcessor(**_qwen_vl_image_kwargs(str(out)))
    px = proc(load_images(args.images))
    feats, _ = model(mx.array(px["pixel_values"]).astype(dtype), mx.array(px["image_grid_thw"]))
    feats = np.array(feats.astype(mx.float32))
    (out / "features.f32").write_bytes(np.ascontiguousarray(feats).tobytes())
    patch = QWEN_VISION["patch_size"]
    (out / "features.json").write_text(json.dumps({
        "shape": list(feats.shape), "grid_thw": px["image_grid_thw"].tolist(),
        "sizes": [[h * patch, w * patch] for _, h, w in px["image_grid_thw"].tolist()]}))


def cmd_mrope(args):
    """Qwen3.5's mRoPE as mlx-vlm computes it, for a prompt with two images: get_rope_index's
    positions and deltas, and queries [1, 2, L, 32] (a seeded normal, in --dtype) turned by
    Qwen3_5RotaryEmbedding (rotary 16 of 32, sections [3, 3, 2], theta 1e7)."""
    import types

    import mlx.core as mx
    import numpy as np
    from mlx_vlm.models.qwen3_5.language import LanguageModel, Qwen3_5RotaryEmbedding

    image, start, end = 248056, 248053, 248054
    grids = [[1, 4, 6], [1, 6, 2]]
    ids = [1, 2, start] + [image] * 6 + [end, 3, start] + [image] * 3 + [end, 4, 5, 6]
    cfg = types.SimpleNamespace(
        image_token_id=image, video_token_id=248057, vision_start_token_id=start,
        vision_config=types.SimpleNamespace(spatial_merge_size=2))
    pos, delta = LanguageModel.get_rope_index(
        types.SimpleNamespace(config=cfg), mx.array([ids]), mx.array(grids))
    dtype = mx.float32 if args.dtype == "f32" else mx.bfloat16
    q = mx.random.normal((1, 2, len(ids), 32), key=mx.random.key(7)).astype(dtype)
    rope = Qwen3_5RotaryEmbedding(16, base=1e7, mrope_section=[3, 3, 2])
    out, _ = rope.apply_rotary(q, q, pos)
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "mrope.json").write_text(json.dumps({
        "ids": ids, "grids": [[h, w] for _, h, w in grids], "image": image, "start": start,
        "positions": np.array(pos)[:, 0, :].tolist(), "delta": int(np.array(delta)[0, 0])}))
    for name, a in (("q", q), ("rotated", out)):
        (out_dir / f"{name}.f32").write_bytes(np.array(a.astype(mx.float32)).tobytes())


# Real towers' shapes (`make --real-tower`), for timing an image on a GPU: Gemma 3 4B-27B's
# SigLIP (896-pixel images, 256 image tokens) and Mistral Small 3.1's Pixtral (within 1,540).
REAL_VISION = {
    "model_type": "siglip_vision_model", "hidden_size": 1152, "intermediate_size": 4304,
    "num_hidden_layers": 27, "num_attention_heads": 16, "patch_size": 14, "image_size": 896,
    "layer_norm_eps": 1e-6,
}
REAL_PIXTRAL = {
    "model_type": "pixtral", "hidden_size": 1024, "head_dim": 64, "intermediate_size": 4096,
    "num_hidden_layers": 24, "num_attention_heads": 16, "image_size": 1540, "patch_size": 14,
    "rope_theta": 10000.0, "rms_norm_eps": 1e-5,
}
# Qwen3.5's (every size: 27 blocks of 1,152, 16-pixel patches merged 2x2), and its processor's
# pixel budget as Qwen3-VL's preprocessor_config.json gives it.
REAL_QWEN_VISION = {
    "model_type": "qwen3_5", "depth": 27, "hidden_size": 1152, "intermediate_size": 4304,
    "num_heads": 16, "patch_size": 16, "spatial_merge_size": 2, "temporal_patch_size": 2,
    "num_position_embeddings": 2304, "in_channels": 3, "deepstack_visual_indexes": [],
}
QWEN_BUDGET = {"longest_edge": 1024, "shortest_edge": 64}
SKELETON = False


def tower_gemma4(args):
    import mlx.core as mx
    import mlx.nn as nn
    import numpy as np
    from mlx.utils import tree_flatten
    from mlx_vlm.models.gemma4.config import VisionConfig
    from mlx_vlm.models.gemma4.gemma4 import MultimodalEmbedder
    from mlx_vlm.models.gemma4.processing_gemma4 import Gemma4ImageProcessor
    from mlx_vlm.models.gemma4.vision import VisionModel

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    class Tower(nn.Module):
        def __init__(self):
            super().__init__()
            self.vision_tower = VisionModel(VisionConfig.from_dict(dict(GEMMA4_VISION)))
            self.embed_vision = MultimodalEmbedder(
                GEMMA4_VISION["hidden_size"], GEMMA4_TEXT_HIDDEN, GEMMA4_VISION["rms_norm_eps"])

    model = Tower()
    randomize_vision(model, 2718 + (args.quant == "bf16"), None)
    dtype = mx.float32 if args.quant == "f32" else mx.bfloat16
    model.set_dtype(dtype)
    weights = dict(tree_flatten(model.parameters()))
    mx.save_safetensors(str(out / "model.safetensors"), weights, metadata={"format": "mlx"})
    (out / "config.json").write_text(json.dumps({
        "model_type": "gemma4", "image_token_id": GEMMA4_IMAGE_TOKEN,
        "text_config": {"hidden_size": GEMMA4_TEXT_HIDDEN}, "vision_config": GEMMA4_VISION},
        indent=2))
    pre = {"do_normalize": False, "do_rescale": True, "do_resize": True,
           "image_processor_type": "Gemma4ImageProcessor", "max_soft_tokens": 16,
           "patch_size": 4, "pooling_kernel_size": 2, "processor_class": "Gemma4Processor",
           "resample": 3, "rescale_factor": 0.00392156862745098}
    (out / "preprocessor_config.json").write_text(json.dumps(pre, indent=2))
    proc = Gemma4ImageProcessor(**{k: pre[k] for k in ("patch_size", "max_soft_tokens",
                                                       "pooling_kernel_size", "do_normalize")})
    data, tokens = proc(load_images(args.images))
    px = data["pixel_values"]
    pixels = [mx.array(p) for p in px] if isinstance(px, list) else mx.array(px)
    feats = model.embed_vision(model.vision_tower(pixels))[0]
    feats = np.array(feats.astype(mx.float32))
    (out / "features.f32").write_bytes(np.ascontiguousarray(feats).tobytes())
    sizes = [list(np.asarray(p).shape[-2:]) for p in px]
    (out / "features.json").write_text(json.dumps({
        "shape": list(feats.shape), "sizes": sizes, "tokens": tokens}))


def build_vlm(module, cfg):
    """mlx-vlm's model of `cfg` (a module of mlx_vlm.models), as mlx_vlm.utils.load builds it."""
    from mlx_vlm.utils import update_module_configs

    model_cfg = update_module_configs(
        module.ModelConfig.from_dict(cfg), module, json.loads(json.dumps(cfg)), ["text", "vision"])
    return module.Model(model_cfg)


def save_model(tmp, model, cfg, quant, skip=None):
    """The weights in `quant` (f32 or bf16) as an mlx-vlm conversion writes them, and config.
    With --skeleton only their names and shapes (weights.json) for fill_weights.py to fill on
    the machine that runs them."""
    import mlx.core as mx
    from mlx.utils import tree_flatten
    from mlx_vlm.utils import save_config

    dtype = mx.float32 if quant == "f32" else mx.bfloat16
    if SKELETON:
        shapes = {k: list(v.shape) for k, v in tree_flatten(model.parameters()) if k != skip}
        (tmp / "weights.json").write_text(json.dumps({"dtype": quant, "shapes": shapes}))
        cfg["torch_dtype"] = "float32" if quant == "f32" else "bfloat16"
        save_config(cfg, tmp / "config.json")
        return
    weights = {k: v.astype(dtype) for k, v in tree_flatten(model.parameters()) if k != skip}
    mx.save_safetensors(str(tmp / "model.safetensors"), weights, metadata={"format": "mlx"})
    index = {"metadata": {"total_size": sum(v.nbytes for v in weights.values())},
             "weight_map": {k: "model.safetensors" for k in sorted(weights)}}
    (tmp / "model.safetensors.index.json").write_text(json.dumps(index, indent=4))
    cfg["torch_dtype"] = "float32" if quant == "f32" else "bfloat16"
    save_config(cfg, tmp / "config.json")


def mistral3_tokenizer(tmp):
    """Mistral Nemo's Tekken tokenizer with Mistral Small 3.1's image tokens at their ids."""
    import tiny_models

    tok_dir = tiny_models.fixtures_dir() / "tokenizer-mistral_nemo" / "models"
    tok = json.loads((tok_dir / "tokenizer.json").read_text())
    old = {}
    for t in tok["added_tokens"]:
        if t["id"] in MISTRAL3_IMAGE_TOKENS:
            old[t["content"]] = t["id"]
            t["content"] = MISTRAL3_IMAGE_TOKENS[t["id"]]
    vocab = tok["model"]["vocab"]
    for name, i in old.items():
        if vocab.get(name) == i:
            del vocab[name]
            vocab[MISTRAL3_IMAGE_TOKENS[i]] = i
    (tmp / "tokenizer.json").write_text(json.dumps(tok, ensure_ascii=False))
    config = json.loads((tok_dir / "tokenizer_config.json").read_text())
    for i, name in MISTRAL3_IMAGE_TOKENS.items():
        entry = config.get("added_tokens_decoder", {}).get(str(i))
        if entry:
            entry["content"] = name
    config["chat_template"] = MISTRAL3_TEMPLATE
    config["pad_token"] = "<pad>"
    (tmp / "tokenizer_config.json").write_text(json.dumps(config, indent=2, ensure_ascii=False))
    added = [dict(t) for t in tok["added_tokens"]]
    return added


def make_mistral3(args, tmp):
    import tiny_models
    from mlx_vlm.models import mistral3

    spec = tiny_models.FAMILY_SPECS["mistral3"]
    cfg = json.loads(json.dumps(spec["config"]))
    cfg["vision_config"] = dict(PIXTRAL)
    cfg["spatial_merge_size"] = 2
    cfg["multimodal_projector_bias"] = True
    cfg["vision_feature_layer"] = -1
    cfg["pad_token_id"] = 11
    model = build_vlm(mistral3, cfg)
    added = mistral3_tokenizer(tmp)
    seed = tiny_models.seed_for("mistral3_vlm", args.quant)
    tiny_models.randomize(model.language_model, cfg, seed, added, spec["tokenizer_size"])
    randomize_vision(model, seed + 1)
    save_model(tmp, model, cfg, args.quant)
    (tmp / "generation_config.json").write_text(json.dumps(
        {**spec["generation"], "transformers_version": "4.57.0"}, indent=2))
    # Mistral Small 3.1's processor configs, at the tiny image size.
    (tmp / "preprocessor_config.json").write_text(json.dumps({
        "do_convert_rgb": True, "do_normalize": True, "do_rescale": True, "do_resize": True,
        "image_mean": [0.48145466, 0.4578275, 0.40821073],
        "image_processor_type": "PixtralImageProcessor",
        "image_std": [0.26862954, 0.26130258, 0.27577711],
        "patch_size": {"height": PIXTRAL["patch_size"], "width": PIXTRAL["patch_size"]},
        "processor_class": "PixtralProcessor", "resample": 3,
        "rescale_factor": 0.00392156862745098,
        "size": {"longest_edge": PIXTRAL["image_size"]},
    }, indent=2))
    (tmp / "processor_config.json").write_text(json.dumps({
        "image_break_token": "[IMG_BREAK]", "image_end_token": "[IMG_END]",
        "image_token": "[IMG]", "patch_size": PIXTRAL["patch_size"],
        "processor_class": "PixtralProcessor", "spatial_merge_size": 2,
    }, indent=2))


# A Qwen3-VL style chat template, the parts a user turn of text and images takes (Qwen3.5's
# own writes each image as <|vision_start|><|image_pad|><|vision_end|> the same way).
QWEN_TEMPLATE = (
    "{%- for message in messages %}{{- '<|im_start|>' + message['role'] + '\\n' }}"
    "{%- if message['content'] is string %}{{- message['content'] }}{%- else %}"
    "{%- for c in message['content'] %}{%- if c['type'] in ['image', 'image_url'] %}"
    "{{- '<|vision_start|><|image_pad|><|vision_end|>' }}{%- elif c['type'] == 'text' %}"
    "{{- c['text'] }}{%- endif %}{%- endfor %}{%- endif %}{{- '<|im_end|>\\n' }}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)


def make_qwen3_5(args, tmp):
    """Qwen3.5 with its vision tower: tiny_models.py's qwen3_5 text model, QWEN_VISION's tower
    (its rows as wide as the text), the Qwen3 tokenizer's vision tokens."""
    import tiny_models
    from mlx_vlm.models import qwen3_5

    spec = tiny_models.FAMILY_SPECS["qwen3_5"]
    cfg = json.loads(json.dumps(spec["config"]))
    cfg["vision_config"] = {**QWEN_VISION, "out_hidden_size": cfg["text_config"]["hidden_size"]}
    cfg.update(image_token_id=151655, video_token_id=151656, vision_start_token_id=151652,
               vision_end_token_id=151653)
    model = build_vlm(qwen3_5, cfg)
    tok_dir = tiny_models.fixtures_dir() / "tokenizer-qwen3" / "models"
    added = tiny_models.read_added_tokens(tok_dir / "tokenizer.json")
    seed = tiny_models.seed_for("qwen3_5_vlm", args.quant)
    tiny_models.randomize(model.language_model, cfg, seed, added, spec["tokenizer_size"])
    randomize_vision(model, seed + 1)
    save_model(tmp, model, cfg, args.quant)
    tiny_models.link_or_copy(tok_dir / "tokenizer.json", tmp / "tokenizer.json")
    config = json.loads((tok_dir / "tokenizer_config.json").read_text())
    config["chat_template"] = QWEN_TEMPLATE
    (tmp / "tokenizer_config.json").write_text(json.dumps(config, indent=2, ensure_ascii=False))
    (tmp / "generation_config.json").write_text(json.dumps(
        {**spec["generation"], "transformers_version": "4.57.0"}, indent=2))
    # Qwen3.5's processor configs at the tiny sizes (4-pixel patches merged 2x2: factor 8, 64
    # to 1,024 pixels), or the real ones with --real-tower.
    (tmp / "preprocessor_config.json").write_text(json.dumps({
        "do_normalize": True, "do_rescale": True, "image_mean": [0.5, 0.5, 0.5],
        "image_processor_type": "Qwen2VLImageProcessorFast", "image_std": [0.5, 0.5, 0.5],
        "merge_size": QWEN_VISION["spatial_merge_size"], "patch_size": QWEN_VISION["patch_size"],
        "processor_class": "Qwen3VLProcessor", "rescale_factor": 0.00392156862745098,
        "temporal_patch_size": 2, "size": dict(QWEN_BUDGET)}, indent=2))


# Gemma 4's image tokens, in Gemma 3's tokenizer's unused slots (no Gemma 4 tokenizer is
# published where the tests can fetch it), named as Gemma 4's: <|image> <image|> <|image|>.
GEMMA4_IMAGE_TOKENS = {"<unused5>": "<|image>", "<unused6>": "<image|>", "<unused7>": "<|image|>"}
# Gemma 4's way with a user turn of images and text: the template writes <|image|> for each
# image, the processor widens it to <|image> + a placeholder per soft token + <image|>.
GEMMA4_VLM_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}<start_of_turn>"
    "{{ 'model' if message['role'] == 'assistant' else message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] | trim }}{% else %}"
    "{% for c in message['content'] %}{% if c['type'] == 'image' %}<|image|>"
    "{% elif c['type'] == 'text' %}{{ c['text'] | trim }}{% endif %}{% endfor %}{% endif %}"
    "<end_of_turn>\n{% endfor %}{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}"
)
# Gemma 4 E2B/E4B's vision encoder and processor (mlx-vlm's VisionConfig defaults: 16 blocks
# of 768, 16-pixel patches pooled 3x3, 280 soft tokens an image), for `make --real-tower`.
REAL_GEMMA4_VISION = {
    "model_type": "gemma4_vision", "hidden_size": 768, "intermediate_size": 3072,
    "num_hidden_layers": 16, "num_attention_heads": 12, "num_key_value_heads": 12,
    "head_dim": 64, "rms_norm_eps": 1e-6, "patch_size": 16, "position_embedding_size": 10240,
    "pooling_kernel_size": 3, "default_output_length": 280, "standardize": False,
    "rope_parameters": {"rope_theta": 100.0, "rope_type": "default"},
}


def make_gemma4(args, tmp):
    """Gemma 4 E2B's layout (tiny_models.py's gemma4 text model: sliding window 8, KV sharing,
    per-layer inputs) with GEMMA4_VISION's encoder, images attended both ways
    (use_bidirectional_attention "vision"), and the processor config as Gemma 4's repos ship
    it (processor_config.json's image_processor)."""
    import tiny_models
    from mlx_vlm.models import gemma4

    spec = tiny_models.FAMILY_SPECS["gemma4"]
    cfg = json.loads(json.dumps(spec["config"]))
    cfg["text_config"]["use_bidirectional_attention"] = "vision"
    cfg["vision_config"] = dict(GEMMA4_VISION)
    tok_dir = tiny_models.fixtures_dir() / "tokenizer-gemma3" / "models"
    renames = {**spec["tokenizer_tokens"], **GEMMA4_IMAGE_TOKENS}
    tiny_models.write_renamed_tokens(tok_dir / "tokenizer.json", tmp / "tokenizer.json", renames)
    added = tiny_models.read_added_tokens(tok_dir / "tokenizer.json")
    ids = {renames[t["content"]]: t["id"] for t in added if t["content"] in renames}
    for t in added:
        if t["content"] in renames:
            t["content"], t["special"] = renames[t["content"]], True
    cfg.update(image_token_id=ids["<|image|>"], boi_token_id=ids["<|image>"],
               eoi_token_id=ids["<image|>"], pad_token_id=0)
    model = build_vlm(gemma4, cfg)
    seed = tiny_models.seed_for("gemma4_vlm", args.quant)
    tiny_models.randomize(model.language_model, cfg, seed, added, spec["tokenizer_size"])
    randomize_vision(model, seed + 1, ("vision_tower.", "embed_vision."))
    save_model(tmp, model, cfg, args.quant)
    config = json.loads((tok_dir / "tokenizer_config.json").read_text())
    for i, entry in config.get("added_tokens_decoder", {}).items():
        if entry.get("content") in renames:
            entry["content"], entry["special"] = renames[entry["content"]], True
    special = {"boi_token": "<|image>", "eoi_token": "<image|>", "image_token": "<|image|>"}
    config.update(special, extra_special_tokens=special, chat_template=GEMMA4_VLM_TEMPLATE)
    config.pop("processor_class", None)
    (tmp / "tokenizer_config.json").write_text(json.dumps(config, indent=2, ensure_ascii=False))
    # The processor's own copy of the template (mlx-vlm then leaves the BOS to the template).
    (tmp / "chat_template.json").write_text(
        json.dumps({"chat_template": GEMMA4_VLM_TEMPLATE}, indent=2))
    (tmp / "generation_config.json").write_text(json.dumps(
        {**spec["generation"], "transformers_version": "4.57.0"}, indent=2))
    v = GEMMA4_VISION
    (tmp / "processor_config.json").write_text(json.dumps({
        "image_processor": {
            "do_convert_rgb": True, "do_normalize": False, "do_rescale": True,
            "do_resize": True, "image_mean": [0.0, 0.0, 0.0], "image_std": [1.0, 1.0, 1.0],
            "image_processor_type": "Gemma4ImageProcessor",
            "max_soft_tokens": v["default_output_length"], "patch_size": v["patch_size"],
            "pooling_kernel_size": v["pooling_kernel_size"], "resample": 3,
            "rescale_factor": 0.00392156862745098},
        "image_seq_length": v["default_output_length"], "processor_class": "Gemma4Processor",
    }, indent=2))


def cmd_make(args):
    """Writes beside the folder, then renames it into place: a folder there is whole."""
    import shutil

    global MM_TOKENS, SKELETON
    if args.real_tower:
        VISION.clear()
        VISION.update(REAL_VISION)
        PIXTRAL.clear()
        PIXTRAL.update(REAL_PIXTRAL)
        QWEN_VISION.clear()
        QWEN_VISION.update(REAL_QWEN_VISION)
        QWEN_BUDGET.update(longest_edge=16777216, shortest_edge=65536)
        GEMMA4_VISION.clear()
        GEMMA4_VISION.update(REAL_GEMMA4_VISION)
        MM_TOKENS = 256
    SKELETON = args.skeleton

    out = Path(args.out)
    tmp = Path(str(out) + ".tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    {"gemma3": make_gemma3, "mistral3": make_mistral3,
     "qwen3_5": make_qwen3_5, "gemma4": make_gemma4}[args.family](args, tmp)
    if out.exists():
        shutil.rmtree(out)
    os.rename(tmp, out)


def make_gemma3(args, tmp):
    import tiny_models
    from mlx_vlm.models import gemma3

    cfg = vlm_config()
    model = build_vlm(gemma3, cfg)
    tok_dir = tiny_models.fixtures_dir() / "tokenizer-gemma3" / "models"
    added = tiny_models.read_added_tokens(tok_dir / "tokenizer.json")
    seed = tiny_models.seed_for("gemma3_vlm", args.quant)
    # The text tower as tiny_models.py randomizes gemma3_vl's (tied: its lm_head goes).
    lm = model.language_model
    tiny_models.randomize(lm, cfg, seed, added, tiny_models.FAMILY_SPECS["gemma3_vl"]["tokenizer_size"])
    randomize_vision(model, seed + 1)
    # Tied, as gemma3_vl: no lm_head in the files (mlx-vlm's sanitize copies the embedding).
    save_model(tmp, model, cfg, args.quant, skip="language_model.lm_head.weight")
    tiny_models.link_or_copy(tok_dir / "tokenizer.json", tmp / "tokenizer.json")
    tiny_models.link_or_copy(tok_dir / "tokenizer_config.json", tmp / "tokenizer_config.json")
    # The processor's own copy of the template, as Gemma 3's repos ship it: with it mlx-vlm
    # leaves the BOS to the template (mlx_vlm.utils.should_add_special_tokens).
    template = json.loads((tok_dir / "tokenizer_config.json").read_text())["chat_template"]
    (tmp / "chat_template.json").write_text(json.dumps({"chat_template": template}, indent=2))
    (tmp / "generation_config.json").write_text(json.dumps(
        {**tiny_models.FAMILY_SPECS["gemma3"]["generation"], "transformers_version": "4.57.0"}, indent=2))
    # Gemma 3's processor configs, at the tiny image size.
    (tmp / "preprocessor_config.json").write_text(json.dumps({
        "do_convert_rgb": None, "do_normalize": True, "do_pan_and_scan": None,
        "do_rescale": True, "do_resize": True, "image_mean": [0.5, 0.5, 0.5],
        "image_processor_type": "Gemma3ImageProcessor", "image_seq_length": MM_TOKENS,
        "image_std": [0.5, 0.5, 0.5], "processor_class": "Gemma3Processor", "resample": 2,
        "rescale_factor": 0.00392156862745098,
        "size": {"height": VISION["image_size"], "width": VISION["image_size"]},
    }, indent=2))
    (tmp / "processor_config.json").write_text(json.dumps(
        {"image_seq_length": MM_TOKENS, "processor_class": "Gemma3Processor"}, indent=2))


def cmd_reference(args):
    import mlx.core as mx
    from mlx_vlm.generate import stream_generate
    from mlx_vlm.utils import load, prepare_inputs, should_add_special_tokens

    model, processor = load(args.model)
    content = [{"type": "image"} for _ in args.images] + [{"type": "text", "text": args.prompt}]
    prompt = processor.tokenizer.apply_chat_template(
        [{"role": "user", "content": content}], tokenize=False, add_generation_prompt=True)
    images = [str(p) for p in args.images]
    # The ids stream_generate makes (mlx_vlm.generate.dispatch._prepare_generation_inputs).
    inputs = prepare_inputs(
        processor, images=images, prompts=prompt,
        image_token_index=getattr(model.config, "image_token_index", None)
        or model.config.image_token_id,
        add_special_tokens=should_add_special_tokens(model.config.model_type, processor))
    given = {}
    if args.prompt_ids:
        ids = json.loads(Path(args.prompt_ids).read_text())
        inputs["input_ids"] = mx.array([ids])
        # Taken as they are by mlx_vlm.generate.dispatch._prepare_generation_inputs.
        given = {"input_ids": inputs["input_ids"], "pixel_values": inputs["pixel_values"],
                 "mask": mx.ones_like(inputs["input_ids"])}
        for key in ("image_sizes", "image_grid_thw"):  # Mistral 3's, Qwen's
            if key in inputs:
                given[key] = inputs[key]
        if "mm_token_type_ids" in inputs:
            # Gemma 4's processor marks each image placeholder 1 (its images' blocks).
            image = model.config.image_token_id
            given["mm_token_type_ids"] = (inputs["input_ids"] == image).astype(mx.int32)
    results = list(stream_generate(
        model, processor, prompt, image=images, max_tokens=args.max_tokens, temperature=0.0,
        **given))
    tokens = [r.token for r in results]
    import numpy as np

    # The first step's log-probabilities, beside OUT.json as OUT.f32.
    first = results[0].logprobs
    if isinstance(first, mx.array):
        first = first.astype(mx.float32)  # numpy reads no bfloat16
    first = np.array(first, dtype=np.float32).reshape(-1)
    Path(args.out).with_suffix(".f32").write_bytes(first.tobytes())
    Path(args.out).write_text(json.dumps({
        "prompt_ids": inputs["input_ids"][0].tolist(),
        "tokens": tokens,
    }))


def cmd_prompt_ids(args):
    import shutil
    import tempfile

    import PIL.Image
    import tiny_models
    from mlx_vlm.models.gemma3.processing_gemma3 import Gemma3Processor

    tok_dir = tiny_models.fixtures_dir() / "tokenizer-gemma3" / "models"
    with tempfile.TemporaryDirectory() as d:
        for f in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copyfile(tok_dir / f, Path(d) / f)
        (Path(d) / "preprocessor_config.json").write_text(json.dumps({
            "image_processor_type": "Gemma3ImageProcessor", "image_seq_length": args.per_image,
            "size": {"height": 32, "width": 32}}))
        (Path(d) / "processor_config.json").write_text(json.dumps(
            {"image_seq_length": args.per_image, "processor_class": "Gemma3Processor"}))
        processor = Gemma3Processor.from_pretrained(d)
    content = [{"type": "image"} for _ in range(args.images)]
    content.append({"type": "text", "text": args.prompt})
    rendered = processor.tokenizer.apply_chat_template(
        [{"role": "user", "content": content}], tokenize=False, add_generation_prompt=True)
    images = [PIL.Image.new("RGB", (8, 8)) for _ in range(args.images)] or None
    ids = processor(text=rendered, images=images, add_special_tokens=False)["input_ids"][0]
    Path(args.out).write_text(json.dumps({"rendered": rendered, "ids": [int(i) for i in ids.tolist()]}))


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("pixels")
    p.add_argument("--config-dir", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--pixtral-patch", type=int, default=0)
    p.add_argument("--qwen", action="store_true")
    p.add_argument("--gemma4", action="store_true")
    p.add_argument("images", nargs="+", type=Path)
    mr = sub.add_parser("mrope")
    mr.add_argument("--dtype", choices=["f32", "bf16"], required=True)
    mr.add_argument("--out", required=True)
    t = sub.add_parser("tower")
    t.add_argument("--family", choices=["qwen3_5", "gemma4"], default="qwen3_5")
    t.add_argument("--quant", choices=["f32", "bf16"], required=True)
    t.add_argument("--out", required=True)
    t.add_argument("images", nargs="+", type=Path)
    m = sub.add_parser("make")
    m.add_argument("--quant", choices=["f32", "bf16"], required=True)
    m.add_argument("--family", choices=["gemma3", "mistral3", "qwen3_5", "gemma4"],
                   default="gemma3")
    m.add_argument("--real-tower", action="store_true")
    m.add_argument("--skeleton", action="store_true")
    m.add_argument("--out", required=True)
    q = sub.add_parser("prompt-ids")
    q.add_argument("--per-image", type=int, required=True)
    q.add_argument("--images", type=int, required=True)
    q.add_argument("--prompt", required=True)
    q.add_argument("--out", required=True)
    r = sub.add_parser("reference")
    r.add_argument("--model", required=True)
    r.add_argument("--out", required=True)
    r.add_argument("--max-tokens", type=int, default=12)
    r.add_argument("--prompt-ids")
    r.add_argument("--prompt", required=True)
    r.add_argument("images", nargs="+", type=Path)
    return ap.parse_args(argv)


def main():
    args = parse_args()
    {"pixels": cmd_pixels, "make": cmd_make, "prompt-ids": cmd_prompt_ids,
     "reference": cmd_reference, "tower": cmd_tower, "mrope": cmd_mrope}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
