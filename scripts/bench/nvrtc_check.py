"""Compile every kernel of crates/rmx-models/src/kernels/*.cuh with NVRTC, the way MLX's
fast::cuda_kernel wraps it, without a GPU: syntax and template errors show up here instead of on
the lent H100's clock.

    . scripts/test-env.sh && $RMX_TEST_PYTHON scripts/bench/nvrtc_check.py

(the test venv has the pinned NVRTC wheels; crates/rmx-models/tests/kernels_nvrtc.rs runs this)

The instantiations mirror the launches of fastpath/ (and moe_kernels.rs, decode_layer.rs) for Qwen3-0.6B and Llama-3-8B shapes.
"""

import ctypes
import glob
import os
import pathlib
import sys
from concurrent.futures import ThreadPoolExecutor

from kernel_src import delta_layout, layer_layout, moe_scratch, section

FOUND = glob.glob(f"{sys.prefix}/lib/python3*/site-packages/nvidia/cuda_nvrtc")
if not FOUND:
    sys.exit(f"no NVRTC under {sys.prefix}: pip install the nvidia-cuda-* pins of "
             "scripts/requirements-test.txt (scripts/test-env.sh does)")
NV = pathlib.Path(FOUND[0]).parent

PRELUDE = """#include <cuda_bf16.h>
#include <cuda_fp16.h>
typedef unsigned int uint32_t;
typedef int int32_t;
typedef unsigned long long uint64_t;
typedef unsigned char uint8_t;
"""


# (section, inputs as (type, name), outputs, body, template values)
KERNELS = [
    ("qgemv", [("T", "x"), ("uint32_t", "w"), ("T", "scales"), ("T", "biases"), ("T", "nw"), ("float", "eps")],
     ["y"], "rmx::qgemv<T, BITS, G, ROWS, K, false, true>(x, w, scales, biases, y, N, nullptr, nw, eps);",
     dict(BITS=4, G=64, ROWS=2, K=4096, N=6144)),
    ("qgemv", [("T", "x"), ("uint32_t", "w"), ("T", "scales"), ("T", "biases"), ("T", "res")],
     ["y"], "rmx::qgemv<T, BITS, G, ROWS, K, true>(x, w, scales, biases, y, N, res);",
     dict(BITS=8, G=64, ROWS=2, K=4096, N=4096)),
    ("qgemv", [("T", "x"), ("uint32_t", "w"), ("T", "scales"), ("T", "biases"), ("T", "nw"), ("float", "eps")],
     ["y"], "rmx::qgemv_swiglu<T, BITS, G, ROWS, K, true>(x, w, scales, biases, y, N, nw, eps);",
     dict(BITS=4, G=64, ROWS=2, K=1024, N=3072)),
    # A batch's rows (fastpath/gemv.rs's qgemm_rows): plain, residual, SwiGLU.
    ("qgemv", [("T", "x"), ("uint32_t", "w"), ("T", "scales"), ("T", "biases"), ("float", "m")],
     ["y"], "rmx::qgemm_rows<T, BITS, G, ROWS, K, MR>(x, w, scales, biases, y, N, (int)m[0]);",
     dict(BITS=4, G=64, ROWS=2, K=4096, N=6144, MR=8)),
    ("qgemv", [("T", "x"), ("uint32_t", "w"), ("T", "scales"), ("T", "biases"), ("float", "m"), ("T", "res")],
     ["y"], "rmx::qgemm_rows<T, BITS, G, ROWS, K, MR, true>(x, w, scales, biases, y, N, (int)m[0], res);",
     dict(BITS=8, G=64, ROWS=2, K=4096, N=4096, MR=8)),
    ("qgemv", [("T", "x"), ("uint32_t", "w"), ("T", "scales"), ("T", "biases"), ("float", "m")],
     ["y"], "rmx::qgemm_rows<T, BITS, G, ROWS, K, MR, false, true>(x, w, scales, biases, y, N, (int)m[0]);",
     dict(BITS=4, G=64, ROWS=2, K=4096, N=14336, MR=8)),
    ("attn", [("T", "qs"), ("T", "ks"), ("T", "vs"), ("T", "qn"), ("T", "kn"), ("float", "inv_freq"),
              ("int32_t", "pos"), ("float", "par"), ("T", "kc"), ("T", "vc")],
     ["o"], "rmx::decode_attn<T, H, KV, D, NORM, TRADITIONAL, QOFF, KOFF, VOFF>(qs, ks, vs, qn, kn, inv_freq, pos, par, kc, vc, o);",
     dict(H=16, KV=8, D=128, NORM="true", TRADITIONAL="false", QOFF=0, KOFF=2048, VOFF=3072)),
    # A batch's rows (fastpath/attention.rs's decode_attention_batch).
    ("attn", [("T", "qkv"), ("T", "qn"), ("T", "kn"), ("float", "inv_freq"), ("int32_t", "pos"),
              ("int32_t", "pads"), ("float", "par"), ("T", "kc"), ("T", "vc")],
     ["o"], "rmx::decode_attn_batch<T, H, KV, D, NORM, TRADITIONAL, S>(qkv, qn, kn, inv_freq, pos, pads, par, kc, vc, o);",
     dict(H=32, KV=8, D=128, NORM="false", TRADITIONAL="false", S=6144)),
    # Gemma 3's head size, the largest decode_attn takes.
    ("attn", [("T", "qs"), ("T", "ks"), ("T", "vs"), ("T", "qn"), ("T", "kn"), ("float", "inv_freq"),
              ("int32_t", "pos"), ("float", "par"), ("T", "kc"), ("T", "vc")],
     ["o"], "rmx::decode_attn<T, H, KV, D, NORM, TRADITIONAL, QOFF, KOFF, VOFF>(qs, ks, vs, qn, kn, inv_freq, pos, par, kc, vc, o);",
     dict(H=4, KV=1, D=256, NORM="true", TRADITIONAL="false", QOFF=0, KOFF=0, VOFF=0)),
    # Qwen3.5's gated attention: a quarter of each 256-wide head rotated, q rows with a gate.
    ("attn", [("T", "qs"), ("T", "ks"), ("T", "vs"), ("T", "qn"), ("T", "kn"), ("float", "inv_freq"),
              ("int32_t", "pos"), ("float", "par"), ("T", "kc"), ("T", "vc")],
     ["o"], "rmx::decode_attn<T, H, KV, D, NORM, TRADITIONAL, QOFF, KOFF, VOFF, ROT, GATED>(qs, ks, vs, qn, kn, inv_freq, pos, par, kc, vc, o);",
     dict(H=16, KV=4, D=256, NORM="true", TRADITIONAL="false", QOFF=0, KOFF=8192, VOFF=9216, ROT=64,
          GATED="true")),
    ("swiglu", [("T", "gate"), ("T", "up")], ["y"], "rmx::swiglu<T, F, GS, US, GOFF, UOFF>(gate, up, y);",
     dict(F=3072, GS=6144, US=6144, GOFF=0, UOFF=3072)),
    # The greedy choice over Llama-3's vocabulary (fastpath/pick.rs).
    ("pick", [("T", "logits"), ("T", "lse"), ("uint32_t", "keys")], [("uint32_t", "tokens")],
     "rmx::greedy_pick<T, NT, BPR, RMAX>(logits, lse, V, keys, tokens);",
     dict(NT=256, BPR=64, RMAX=64, V=128256)),
    # A 4-bit and an 8-bit embedding's rows (fastpath/embed_rows.rs), Llama-3-8B's table.
    ("embed_rows", [("uint32_t", "ids"), ("uint32_t", "w"), ("T", "scales"), ("T", "biases")], ["y"],
     "rmx::embed_rows<T, I, BITS, G, DIM, VOCAB>(ids, w, scales, biases, y);",
     dict(I="uint32_t", BITS=4, G=64, DIM=4096, VOCAB=128256)),
    ("embed_rows", [("int32_t", "ids"), ("uint32_t", "w"), ("T", "scales"), ("T", "biases")], ["y"],
     "rmx::embed_rows<T, I, BITS, G, DIM, VOCAB>(ids, w, scales, biases, y);",
     dict(I="int32_t", BITS=8, G=32, DIM=1024, VOCAB=151936)),
    ("qkv_rope", [("T", "qkv"), ("T", "qn"), ("T", "kn"), ("float", "inv_freq"), ("int32_t", "offset"), ("float", "eps")],
     ["q", "k", "v"], "rmx::qkv_rope<T, H, KV, D, NORM, TRADITIONAL>(qkv, qn, kn, inv_freq, offset, eps, q, k, v);",
     dict(H=32, KV=8, D=128, NORM="false", TRADITIONAL="false")),
    ("qkv_rope", [("T", "qkv"), ("T", "qn"), ("T", "kn"), ("float", "inv_freq"), ("int32_t", "pos"), ("float", "eps")],
     ["q", "k", "v"], "rmx::prefill_heads<T, H, KV, D, NORM, TRADITIONAL>(qkv, qn, kn, inv_freq, pos, eps, q, k, v);",
     dict(H=16, KV=8, D=128, NORM="true", TRADITIONAL="false")),
]

# Gated DeltaNet's recurrence at Qwen3.5's shape (key and value heads of 128, 16 key heads, 32
# value heads) and at Qwen3.5's default (key heads of 192).
for dk, hk, hv in ((128, 16, 32), (192, 16, 64)):
    KERNELS.append(("gated_delta", [("T", "q"), ("T", "k"), ("T", "v"), ("float", "g"), ("T", "beta"),
                                    ("float", "state_in"), ("float", "tlen")],
                    ["y", ("float", "state_out")],
                    "rmx::gated_delta<T, Dk, Dv, Hk, Hv>(q, k, v, g, beta, state_in, tlen, y, state_out);",
                    dict(Dk=dk, Dv=128, Hk=hk, Hv=hv)))

# A DeltaNet layer's fused decode step (fastpath/gated_delta.rs delta_step) at Qwen3.5-9B's shape
# and at the default's (key heads of 192, 64 value heads); its weights' type W is a template
# parameter of its own (bf16 here, under either activation type).
for dk, hk, hv in ((128, 16, 32), (192, 16, 64)):
    KERNELS.append(("gated_delta", [("T", "proj"), ("T", "conv_in"), ("W", "conv_w"), ("W", "dt_bias"),
                                    ("float", "rate"), ("W", "norm_w"), ("float", "state_in"), ("float", "eps")],
                    ["y", "conv_out", ("float", "state_out")],
                    "rmx::delta_step<T, W, Dk, Dv, Hk, Hv, K, NT>(proj, conv_in, conv_w, dt_bias, rate, norm_w, state_in, eps, y, conv_out, state_out);",
                    dict(Dk=dk, Dv=128, Hk=hk, Hv=hv, K=4, NT=1024, W="__nv_bfloat16")))

# A MoE layer's decode step (moe_kernels.rs) at the Qwen3-30B-A3B shape (hidden 2048, experts of
# 768, top 8) in 4 and 8 bits.
for bits in (4, 8):
    KERNELS.append(("moe", [("T", "x"), ("uint32_t", "w"), ("T", "scales"), ("T", "biases"), ("uint32_t", "idx")],
                    ["y"], "rmx::qgemv_swiglu<T, BITS, G, ROWS, K, false, true>(x, w, scales, biases, y, F, nullptr, nullptr, idx);",
                    dict(BITS=bits, G=64, ROWS=2, K=2048, F=768)))
    KERNELS.append(("moe", [("T", "act"), ("uint32_t", "w"), ("T", "scales"), ("T", "biases"), ("uint32_t", "idx"),
                            ("T", "scores")],
                    ["y"], "rmx::moe_down<T, BITS, G, ROWS, K, TOPK>(act, w, scales, biases, idx, scores, y, N);",
                    dict(BITS=bits, G=64, ROWS=2, K=768, N=2048, TOPK=8)))
# The decode step's fused forms: gate/up with the layer's norm, down adding the residual.
KERNELS.append(("moe", [("T", "x"), ("uint32_t", "w"), ("T", "scales"), ("T", "biases"), ("T", "nw"), ("float", "eps"),
                        ("uint32_t", "idx")],
                ["y"], "rmx::qgemv_swiglu<T, BITS, G, ROWS, K, true, true>(x, w, scales, biases, y, F, nw, eps, idx);",
                dict(BITS=4, G=64, ROWS=2, K=2048, F=768)))
KERNELS.append(("moe", [("T", "x"), ("uint32_t", "w"), ("T", "scales"), ("T", "biases"), ("T", "nw"), ("float", "eps"),
                        ("uint32_t", "idx"), ("T", "lb"), ("float", "ap")],
                ["y"], "rmx::qgemv_swiglu<T, BITS, G, ROWS, K, true, true, true>(x, w, scales, biases, y, F, nw, eps, idx, lb, ap);",
                dict(BITS=4, G=64, ROWS=2, K=2880, F=2880)))
KERNELS.append(("moe", [("T", "act"), ("uint32_t", "w"), ("T", "scales"), ("T", "biases"), ("uint32_t", "idx"),
                        ("T", "scores"), ("T", "res")],
                ["y"], "rmx::moe_down<T, BITS, G, ROWS, K, TOPK, false, true>(act, w, scales, biases, idx, scores, y, N, nullptr, res);",
                dict(BITS=4, G=64, ROWS=2, K=768, N=2048, TOPK=8)))
KERNELS.append(("moe", [("T", "act"), ("uint32_t", "w"), ("T", "scales"), ("T", "biases"), ("uint32_t", "idx"),
                        ("T", "scores"), ("T", "db"), ("T", "res")],
                ["y"], "rmx::moe_down<T, BITS, G, ROWS, K, TOPK, true, true>(act, w, scales, biases, idx, scores, y, N, db, res);",
                dict(BITS=8, G=64, ROWS=2, K=2880, N=2880, TOPK=4)))

# The router's choice (moe_kernels.rs route): Qwen3-30B-A3B (128 experts, top 8, renormalized),
# Qwen3.5-35B-A3B (256, top 8), GPT-OSS-20B (32, top 4, softmax after).
for e, k, mode in ((128, 8, 1), (256, 8, 1), (32, 4, 2), (60, 4, 0)):
    KERNELS.append(("moe", [("T", "logits")], [("uint32_t", "idx"), "scores"],
                    "rmx::moe_route<T, E, TOPK, MODE>(logits, idx, scores);", dict(E=e, TOPK=k, MODE=mode)))
# ... and GPT-OSS's (hidden 2880, experts of 2880, top 4: linear biases, swiglu_oai).
for bits in (4, 8):
    KERNELS.append(("moe", [("T", "x"), ("uint32_t", "w"), ("T", "scales"), ("T", "biases"), ("uint32_t", "idx"),
                            ("T", "lb"), ("float", "ap")],
                    ["y"], "rmx::qgemv_swiglu<T, BITS, G, ROWS, K, false, true, true>(x, w, scales, biases, y, F, nullptr, nullptr, idx, lb, ap);",
                    dict(BITS=bits, G=64, ROWS=2, K=2880, F=2880)))
    KERNELS.append(("moe", [("T", "act"), ("uint32_t", "w"), ("T", "scales"), ("T", "biases"), ("uint32_t", "idx"),
                            ("T", "scores"), ("T", "db")],
                    ["y"], "rmx::moe_down<T, BITS, G, ROWS, K, TOPK, true>(act, w, scales, biases, idx, scores, y, N, db);",
                    dict(BITS=bits, G=64, ROWS=2, K=2880, N=2880, TOPK=4)))

# The one-launch decoder layer (decode_layer.rs), at Qwen3-0.6B and Llama-3-8B shapes, with integer
# (IDOT) and float products;
# the scratch offsets are decode_layer.rs's scratch_layout for them (kernel_src.layer_layout).
LAYER_INS = [("T", "x"), ("uint32_t", "wq"), ("T", "sq"), ("T", "bq"), ("uint32_t", "wo"), ("T", "so"),
             ("T", "bo"), ("uint32_t", "wg"), ("T", "sg"), ("T", "bg"), ("uint32_t", "wd"), ("T", "sd"),
             ("T", "bd"), ("T", "n1"), ("T", "n2"), ("T", "qn"), ("T", "kn"), ("float", "inv_freq"),
             ("int32_t", "pos"), ("float", "par"), ("T", "kc"), ("T", "vc"), ("uint32_t", "bar")]
LAYER_BODY = ("rmx::decode_layer<T, BITS, G, HID, H, KV, D, F, QKNORM, TRADITIONAL, NT, SMAX, O_ML, O_PART, "
              "O_ATT, O_H, O_ACT, O_X, IDOT>(x, wq, sq, bq, wo, so, bo, wg, sg, bg, wd, sd, bd, n1, n2, qn, kn, "
              "inv_freq, pos, par, kc, vc, bar, y, scratch);")


for bits, hid, h, kv, f, qk, idot in ((4, 1024, 16, 8, 3072, "true", "true"),
                                     (8, 4096, 32, 8, 14336, "false", "true"),
                                     (4, 4096, 32, 8, 14336, "false", "true"),
                                     (4, 4096, 32, 8, 11008, "false", "false"),
                                     (8, 4096, 32, 8, 14336, "false", "false")):
    KERNELS.append(("layer", LAYER_INS, ["y", ("float", "scratch")], LAYER_BODY,
                    dict(BITS=bits, G=64, HID=hid, H=h, KV=kv, D=128, F=f, QKNORM=qk,
                         TRADITIONAL="false", NT=512, **layer_layout(hid, h, kv, 128, f)[0],
                         IDOT=idot)))


# Several layers a launch, as decode_layer.rs's input_names() and body() build it.
PER_LAYER = ["wq", "sq", "bq", "wo", "so", "bo", "wg", "sg", "bg", "wd", "sd", "bd", "n1", "n2", "qn", "kn",
             "kc", "vc"]
LAYER_T = {"wq": "uint32_t", "wo": "uint32_t", "wg": "uint32_t", "wd": "uint32_t"}


# A MoE block's tensors (decode_layer/moe.rs's PER_LAYER) and the kernel's template type for it.
PER_MOE = ["mwr", "msr", "mbr", "mwsg", "mssg", "mbsg", "mwg", "msg", "mbg", "mwd", "msd", "mbd", "mwsu", "mssu",
           "mbsu", "mwsd", "mssd", "mbsd", "mlr", "mlg", "mld", "map"]
MOE_TYPE = "rmx::MoeShape<E, TOPK, FE, FS, RBITS, RG, RMODE, O_MOE, OAI>"


def table(ty, var, nl, fields, byte_fields=()):
    """decode_layer.rs's table(): the lines that fill `var`, nl entries of rmx::ty<T> (fields in
    byte_fields, uint8 scales of mxfp4 products, cast to const T*)."""
    body = f"__shared__ rmx::{ty}<T> {var}[{nl}];\nif (threadIdx.x == 0) {{\n"
    for i in range(nl):
        vals = [f"reinterpret_cast<const T*>({p}{i})" if p in byte_fields else f"{p}{i}" for p in fields]
        body += f"  {var}[{i}] = rmx::{ty}<T>{{{', '.join(vals)}}};\n"
    return body + "}\n"


# The scales that are bytes with mxfp4 products (decode_layer.rs / moe.rs MX_SCALES).
MX_LAYER = ("sq", "so", "sg", "sd")
MX_MOE = ("msg", "msd", "mssu", "mssd")


def moe_table(nl, mx=False):
    """decode_layer/moe.rs's table(): the MoE blocks' inputs and the lines that fill mtab."""
    ins = [("uint32_t" if p.startswith("mw") else "uint8_t" if mx and p in MX_MOE else "T", f"{p}{i}")
           for i in range(nl) for p in PER_MOE]
    return ins, table("MoePtrs", "mtab", nl, PER_MOE, MX_MOE if mx else ())


def moe_launch(tmpl, mx=False):
    """decode_layer/moe.rs's kernel(): a MoE block as a launch of its own (decode_moe), with
    `tmpl` its template values; `mx`: mxfp4 experts."""
    ins, body = moe_table(1, mx)
    KERNELS.append(("layer_moe", [("T", "x"), ("T", "n2"), ("float", "par"), ("uint32_t", "bar")] + ins,
                    ["y", ("float", "scratch")],
                    body + f"__syncthreads();\nrmx::decode_moe<T, BITS, G, HID, NT, KMAX, IDOT, {MOE_TYPE}, "
                    f"{'true' if mx else 'false'}>(x, n2, mtab, par, bar, y, scratch);",
                    tmpl))


def layers_kernel(nl, mlp="true", moe=False, extras=None, mx=False):
    """decode_layer.rs's kernel(): `extras` says which of lbq, lbo, sk the layers have (xtab);
    `mx`: mxfp4 products."""
    ins = [("T", "x"), ("float", "inv_freq"), ("int32_t", "pos"), ("float", "par"), ("uint32_t", "bar")]
    ins += [(LAYER_T.get(p, "uint8_t" if mx and p in MX_LAYER else "T"), f"{p}{i}")
            for i in range(nl) for p in PER_LAYER]
    body = table("LayerPtrs", "tab", nl, PER_LAYER, MX_LAYER if mx else ())
    if moe:
        mins, mbody = moe_table(nl, mx)
        ins += mins
        body += mbody
    args = ", mtab" if moe else ""
    if extras:
        body += f"__shared__ rmx::AttnExtras<T> xtab[{nl}];\nif (threadIdx.x == 0) {{\n"
        for i in range(nl):
            fields = [f"{f}{i}" if on else "nullptr" for f, on in zip(("lbq", "lbo", "sk"), extras)]
            body += f"  xtab[{i}] = rmx::AttnExtras<T>{{{', '.join(fields)}}};\n"
            ins += [("T", f) for f in fields if f != "nullptr"]
        body += "}\n"
        args = (args or ", nullptr") + ", xtab"
    body += ("__syncthreads();\nrmx::decode_layers<T, BITS, G, HID, H, KV, D, F, QKNORM, TRADITIONAL, NT, "
             f"SMAX, O_ML, O_PART, O_ATT, O_H, O_ACT, O_X, IDOT, {mlp}, {MOE_TYPE if moe else 'rmx::NoMoe'}, ROT, "
             f"GATED, {'true' if mx else 'false'}>(x, tab, {nl}, inv_freq, pos, par, bar, y, scratch{args});")
    return ins, body


_ins, _body = layers_kernel(8)
KERNELS.append(("layer", _ins, ["y", ("float", "scratch")], _body,
                dict(BITS=4, G=64, HID=1024, H=16, KV=8, D=128, F=3072, QKNORM="true",
                     TRADITIONAL="false", NT=512, **layer_layout(1024, 16, 8, 128, 3072)[0], IDOT="true")))

# A MoE layer's attention half (the experts run after the launch), at Qwen3-30B-A3B's shape.
_ins, _body = layers_kernel(1, mlp="false")
KERNELS.append(("layer", _ins, ["y", ("float", "scratch")], _body,
                dict(BITS=4, G=64, HID=2048, H=32, KV=4, D=128, F=0, QKNORM="true",
                     TRADITIONAL="false", NT=512, **layer_layout(2048, 32, 4, 128, 0)[0], IDOT="true")))

# MoE layers with their experts in the launch (decode_layer/moe.rs), at Qwen3-30B-A3B's shape (128
# experts, top 8 renormalized, FE 768, the router 8-bit), integer and float products.
for bits, idot in ((4, "true"), (8, "false")):
    _lay, _end = layer_layout(2048, 32, 4, 128, 8 * 768)
    _ins, _body = layers_kernel(2, mlp="false", moe=True)
    KERNELS.append(("layer_moe", _ins, ["y", ("float", "scratch")], _body,
                    dict(BITS=bits, G=64, HID=2048, H=32, KV=4, D=128, F=8 * 768, QKNORM="true",
                         TRADITIONAL="false", NT=512, **_lay, IDOT=idot, E=128, TOPK=8, FE=768, FS=0,
                         RBITS=8, RG=64, OAI="false", RMODE=1, O_MOE=_end)))

# Qwen3.5's gated attention (an output gate, a rope over 64 of 256 dimensions): the 9B's layer with
# its MLP, and the 35B-A3B's with its experts.
_ins, _body = layers_kernel(1)
KERNELS.append(("layer", _ins, ["y", ("float", "scratch")], _body,
                dict(BITS=4, G=64, HID=4096, H=16, KV=4, D=256, F=12288, QKNORM="true", TRADITIONAL="false",
                     NT=512, **layer_layout(4096, 16, 4, 256, 12288, gated=True)[0], IDOT="true", ROT=64,
                     GATED="true")))
_lay, _end = layer_layout(2048, 16, 2, 256, 8 * 512 + 512, gated=True)
_ins, _body = layers_kernel(1, mlp="false", moe=True)
KERNELS.append(("layer_moe", _ins, ["y", ("float", "scratch")], _body,
                dict(BITS=4, G=64, HID=2048, H=16, KV=2, D=256, F=8 * 512 + 512, QKNORM="true", TRADITIONAL="false",
                     NT=512, **_lay, IDOT="true", ROT=64, GATED="true", E=256, TOPK=8, FE=512, FS=512, RBITS=8,
                     RG=64, OAI="false", RMODE=1, O_MOE=_end)))

# GPT-OSS-20B's layers with their experts in the launch: q/k/v and o biases, sinks, head 64 (64
# query heads, 8 key/value heads), 32 experts top 4 of 2880 with biases and swiglu_oai. And Qwen2's
# dense layers: a q/k/v bias only.
_lay, _end = layer_layout(2880, 64, 8, 64, 4 * 2880)
_ins, _body = layers_kernel(2, mlp="false", moe=True, extras=(True, True, True))
KERNELS.append(("layer_moe", _ins, ["y", ("float", "scratch")], _body,
                dict(BITS=4, G=64, HID=2880, H=64, KV=8, D=64, F=4 * 2880, QKNORM="false", TRADITIONAL="false",
                     NT=512, **_lay, IDOT="true", E=32, TOPK=4, FE=2880, FS=0, RBITS=4, RG=64, OAI="true",
                     RMODE=2, O_MOE=_end)))
_ins, _body = layers_kernel(4, extras=(True, False, False))
KERNELS.append(("layer", _ins, ["y", ("float", "scratch")], _body,
                dict(BITS=4, G=64, HID=1536, H=12, KV=2, D=128, F=8960, QKNORM="false", TRADITIONAL="false",
                     NT=512, **layer_layout(1536, 12, 2, 128, 8960)[0], IDOT="true")))

# GPT-OSS-20B in mxfp4 (mlx-lm's own conversion: every product mxfp4, a byte scale per 32, the router
# 8-bit affine): its layers with their experts in the launch, and the experts as a launch of their own,
# float products (RMX_LAYER_MXFP4=1) and integer ones (=2).
_lay, _end = layer_layout(2880, 64, 8, 64, 4 * 2880)
_ins, _body = layers_kernel(2, mlp="false", moe=True, extras=(True, True, True), mx=True)
for idot in ("false", "true"):
    KERNELS.append(("layer_moe", _ins, ["y", ("float", "scratch")], _body,
                    dict(BITS=4, G=32, HID=2880, H=64, KV=8, D=64, F=4 * 2880, QKNORM="false",
                         TRADITIONAL="false", NT=512, **_lay, IDOT=idot, E=32, TOPK=4, FE=2880, FS=0, RBITS=8,
                         RG=64, OAI="true", RMODE=2, O_MOE=_end)))
    moe_launch(dict(BITS=4, G=32, HID=2880, NT=512, KMAX=4 * 2880, IDOT=idot, E=32, TOPK=4, FE=2880, FS=0,
                    RBITS=8, RG=64, OAI="true", RMODE=2, O_MOE=moe_scratch(4 * 2880)), mx=True)

# A MoE block as a launch of its own (Qwen3.5-35B-A3B's gated-attention layers: 256 experts, top 8,
# FE 512, a shared expert of 512).
moe_launch(dict(BITS=4, G=64, HID=2048, NT=512, KMAX=8 * 512 + 512, IDOT="true", E=256, TOPK=8, FE=512,
                FS=512, RBITS=8, RG=64, OAI="false", RMODE=1, O_MOE=moe_scratch(8 * 512 + 512)))

# Qwen3-Next-80B-A3B's experts: 512 of them (moe_route's 16 logits a lane), top 10 (a warp's lanes
# split 16 ways in the down phase, 6 groups idle).
moe_launch(dict(BITS=4, G=64, HID=2048, NT=512, KMAX=10 * 512 + 512, IDOT="true", E=512, TOPK=10, FE=512,
                FS=512, RBITS=8, RG=64, OAI="false", RMODE=1, O_MOE=moe_scratch(10 * 512 + 512)))

# GPT-OSS-20B's experts as a launch of their own (32 experts, top 4 then a softmax, FE 2880, linear
# biases on the router and every expert product, swiglu_oai), integer and float products.
for bits, rbits, idot in ((4, 4, "true"), (8, 8, "false")):
    moe_launch(dict(BITS=bits, G=64, HID=2880, NT=512, KMAX=4 * 2880, IDOT=idot, E=32, TOPK=4, FE=2880, FS=0,
                    RBITS=rbits, RG=64, OAI="true", RMODE=2, O_MOE=moe_scratch(4 * 2880)))

# Consecutive DeltaNet layers (decode_layer/delta.rs), at Qwen3.5-9B's and -27B's shapes.
PER_DELTA = ["wi", "si", "bi", "wo", "so", "bo", "wg", "sg", "bg", "wd", "sd", "bd", "n1", "n2", "cw", "dtb",
             "rate", "nw", "cvin", "stin"]
DELTA_T = {"wi": "uint32_t", "wo": "uint32_t", "wg": "uint32_t", "wd": "uint32_t", "rate": "float",
           "stin": "float"}


def delta_kernel(nl, mlp="true", moe=False):
    ins = [("T", "x"), ("float", "par"), ("uint32_t", "bar")]
    ins += [(DELTA_T.get(p, "T"), f"{p}{i}") for i in range(nl) for p in PER_DELTA]
    outs = ["y", ("float", "scratch")]
    for i in range(nl):
        outs += [f"cvout{i}", ("float", f"stout{i}")]
    body = table("DeltaPtrs", "tab", nl, PER_DELTA + ["cvout", "stout"])
    if moe:
        mins, mbody = moe_table(nl)
        ins += mins
        body += mbody
    body += ("__syncthreads();\nrmx::decode_delta_layers<T, BITS, G, HID, HK, HV, DK, DV, KC, F, NT, O_Y, O_H, "
             f"O_ACT, O_X, IDOT, {mlp}{', ' + MOE_TYPE if moe else ''}>(x, tab, {nl}, par, bar, y, "
             f"scratch{', mtab' if moe else ''});")
    return ins, outs, body


# And a MoE hybrid's DeltaNet half (Qwen3.5-35B-A3B: the experts run after the launch).
for bits, hid, hv, f, idot, nl, mlp in ((4, 4096, 32, 12288, "true", 3, "true"),
                                        (8, 5120, 48, 17408, "false", 3, "true"),
                                        (4, 2048, 32, 0, "true", 1, "false")):
    _ins, _outs, _body = delta_kernel(nl, mlp)
    KERNELS.append(("layer_delta", _ins, _outs, _body,
                    dict(BITS=bits, G=64, HID=hid, HK=16, HV=hv, DK=128, DV=128, KC=4, F=f, NT=512,
                         **delta_layout(hid, 16, hv, 128, 128, f)[0], IDOT=idot)))

# And with its experts in the launch (Qwen3.5-35B-A3B: 256 experts, top 8, FE 512, a shared expert of
# 512), three layers a launch.
for bits, idot in ((4, "true"), (8, "false")):
    _lay, _end = delta_layout(2048, 16, 32, 128, 128, 8 * 512 + 512)
    _ins, _outs, _body = delta_kernel(3, "false", moe=True)
    KERNELS.append((("layer_delta", "layer_moe"), _ins, _outs, _body,
                    dict(BITS=bits, G=64, HID=2048, HK=16, HV=32, DK=128, DV=128, KC=4, F=8 * 512 + 512,
                         NT=512, **_lay, IDOT=idot, E=256, TOPK=8, FE=512, FS=512, RBITS=8, RG=64, OAI="false", RMODE=1,
                         O_MOE=_end)))


# A batch's decode step through the same layers (decode_layer/rows.rs's call()): one kernel for
# any number of rows, its scratch offsets in pos; with BLOCK, one sequence's consecutive tokens
# (a speculative verify's), and with SHARE its rows' attention sharing key and value loads; with
# MMA, a batch's 4-bit products on bf16 tensor cores (layer_rows_mma.cuh).
def rows_kernel(nl, block, share, mma):
    ins, body = layers_kernel(nl)
    ins = ins[:3] + [("int32_t", "pads")] + ins[3:]
    body = body.replace("rmx::decode_layers<", "rmx::decode_layers_rows<").replace(
        "SMAX, O_ML, O_PART, O_ATT, O_H, O_ACT, O_X, IDOT, true, rmx::NoMoe, ROT, GATED, false>",
        f"SMAX, MR, {block}, {share}, {mma}>").replace("inv_freq, pos, par,", "inv_freq, pos, pads, par,")
    return ins, body


for block, share, mma in (("false", "false", "false"), ("true", "false", "false"),
                          ("true", "true", "false"), ("false", "false", "true")):
    # Llama-3-8B's shape, a Qwen3-0.6B-like one (8 bits, q/k norms), SmolLM2-135M's (heads of 64).
    for bits, hid, h, kv, d, f, qk, nl in ((4, 4096, 32, 8, 128, 14336, "false", 4),
                                           (8, 1024, 16, 8, 128, 3072, "true", 2),
                                           (4, 576, 9, 3, 64, 1536, "false", 2)):
        if mma == "true" and bits != 4:
            continue  # the tensor-core products take 4-bit weights only
        _ins, _body = rows_kernel(nl, block, share, mma)
        KERNELS.append(("layer_rows", _ins, ["y", ("float", "scratch")], _body,
                        dict(BITS=bits, G=64, HID=hid, H=h, KV=kv, D=d, F=f, QKNORM=qk,
                             TRADITIONAL="false", NT=512, SMAX=64, MR=8)))


def program(sec, ins, outs, body, tmpl, dtype):
    # Template parameters that name a type (a value starting "__nv_", "float" or an int type) stand for it in
    # the parameter list and are `using` declarations in the body.
    types = {k: v for k, v in tmpl.items()
             if isinstance(v, str) and (v.startswith("__nv_") or v in ("float", "uint32_t", "int32_t"))}
    args = [f"const {dtype if t == 'T' else types.get(t, t)}* {n}" for t, n in ins]
    args += [f"{dtype}* {n}" if isinstance(n, str) else f"{n[0]}* {n[1]}" for n in outs]
    if "ROT, GATED" in body and "ROT" not in tmpl:
        # The layer kernel's whole-head rope without a gate (decode_layer.rs passes both always).
        tmpl = dict(tmpl, ROT=tmpl["D"], GATED="false")
    consts = "".join(f"  using {k} = {v};\n" if k in types else
                     f"  constexpr {'bool' if v in ('true', 'false') else 'int'} {k} = {v};\n"
                     for k, v in tmpl.items())
    secs = sec if isinstance(sec, tuple) else (sec,)
    return (PRELUDE + section(*secs) + "\n__global__ void k(" + ", ".join(args) + ") {\n"
            + f"  using T = {dtype};\n" + consts + "  " + body + "\n}\n")


# With RMX_PTXAS=<path to ptxas> (pip's nvidia-cuda-nvcc-cu12 has one), each kernel's registers
# and spills for sm_90 are printed too: the layer kernel needs <= 128 registers per thread for its
# one 512-thread block per SM.
PTXAS = os.environ.get("RMX_PTXAS")


def registers(nvrtc, prog):
    import subprocess
    import tempfile
    size = ctypes.c_size_t()
    nvrtc.nvrtcGetPTXSize(prog, ctypes.byref(size))
    ptx = ctypes.create_string_buffer(size.value)
    nvrtc.nvrtcGetPTX(prog, ptx)
    with tempfile.NamedTemporaryFile(suffix=".ptx") as f:
        f.write(ptx.value)
        f.flush()
        out = subprocess.run([PTXAS, "-arch=sm_90", "-v", f.name, "-o", "/dev/null"],
                             capture_output=True, text=True)
    return " ".join(l.split(":", 1)[-1].strip() for l in (out.stderr + out.stdout).splitlines()
                    if "registers" in l or "spill" in l)


def compile_one(nvrtc, includes, sec, ins, outs, body, tmpl, dtype):
    """(ok, printed lines) for one kernel in one dtype."""
    src = program(sec, ins, outs, body, tmpl, dtype).encode()
    prog = ctypes.c_void_p()
    assert nvrtc.nvrtcCreateProgram(ctypes.byref(prog), src, b"k.cu", 0, None, None) == 0
    opts = [b"--gpu-architecture=compute_90", b"-std=c++17"] + [i.encode() for i in includes]
    arr = (ctypes.c_char_p * len(opts))(*opts)
    rc = nvrtc.nvrtcCompileProgram(prog, len(opts), arr)
    size = ctypes.c_size_t()
    nvrtc.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
    log = ctypes.create_string_buffer(size.value)
    nvrtc.nvrtcGetProgramLog(prog, log)
    ok = rc == 0
    name = "+".join(sec) if isinstance(sec, tuple) else sec
    lines = [f"{'ok  ' if ok else 'FAIL'} {name:9} {body.splitlines()[-1].split('(')[0]:22} {dtype}"]
    if not ok or log.value.strip():
        lines.append(log.value.decode())
    if ok and PTXAS:
        lines.append("     " + registers(nvrtc, prog))
    return ok, lines


def main():
    nvrtc = ctypes.CDLL(str(NV / "cuda_nvrtc/lib/libnvrtc.so.12"))
    includes = [f"-I{NV / 'cuda_runtime/include'}", f"-I{NV / 'cuda_cccl/include'}"]
    jobs = [(k, dtype) for k in KERNELS for dtype in ("__nv_bfloat16", "__half")]
    # NVRTC compiles independent programs on several threads (ctypes lets go of the GIL during
    # the call): one per core, printed in the list's order.
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        results = list(pool.map(lambda job: compile_one(nvrtc, includes, *job[0], job[1]), jobs))
    failed = 0
    for ok, lines in results:
        failed += not ok
        for line in lines:
            print(line)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
