"""What the GPU scripts need of crates/rmx-models/src/kernels/*.cuh, the way the engine
builds it: a section's NVRTC header (kernel_source.rs's `header()`) and the layer kernel's scratch
layout and shared memory (decode_layer.rs's `scratch_layout()` and `shared_bytes()`), kept here
once for nvrtc_check.py and layer_lab.py."""
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
KERNELS = ROOT / "crates/rmx-models/src/kernels"
# kernel_source.rs's SECTIONS (their order) and SECTION_USES
SECTIONS = ["common", "qgemv", "qkv_rope", "attn", "swiglu", "route", "layer", "layer_rows_mma", "layer_rows",
            "layer_moe", "gated_delta", "moe", "layer_delta", "pick",
            "embed_rows"]
SECTION_USES = {("moe", "qgemv"), ("moe", "route"), ("layer_rows", "layer"), ("layer_rows", "layer_rows_mma"),
                ("layer_moe", "layer"), ("layer_moe", "route"), ("layer_delta", "layer"),
                ("layer_delta", "gated_delta")}
SPLITS = 64  # decode_layer.rs's SPLITS, the kernel's SMAX


def section(*names):
    """The "common" section, those `names` use and their own, comment lines dropped, ending
    in a newline: MLX appends its own source after a header, and a last line with a trailing
    comment would swallow MLX's next line."""
    out = []
    for sec in SECTIONS:
        if sec == "common" or any(sec == n or (n, sec) in SECTION_USES for n in names):
            for line in (KERNELS / f"{sec}.cuh").read_text().splitlines():
                if line.strip() and not line.strip().startswith("//"):
                    out.append(line)
    return "\n".join(out) + "\n"


def layer_layout(hid, h, kv, d, f, gated=False):
    """The layer kernel's scratch offsets as template values, and the scratch size in floats
    (gated: q's rows hold each head's gate too)."""
    lines = lambda n: (n + 31) // 32 * 32
    ml = lines(((2 if gated else 1) * h + 2 * kv) * d // 2)
    part = ml + lines(h * SPLITS * 2)
    att = part + lines(h * SPLITS * d)
    res = att + lines(h * d // 2)
    act = res + lines(hid // 2)
    xo = act + lines(f // 2)
    return (dict(SMAX=SPLITS, O_ML=ml, O_PART=part, O_ATT=att, O_H=res, O_ACT=act, O_X=xo),
            xo + lines(hid // 2))


def layer_shared_bytes(hid, h, d, f, bits):
    """The layer kernel's dynamic shared memory in bytes (decode_layer.rs's shared_bytes)."""
    k = max(hid, h * d, f)
    return 4 * (k + k // (128 // bits) + 32)


def delta_layout(hid, hk, hv, dk, dv, f):
    """The DeltaNet layer kernel's scratch offsets as template values, and the scratch size in
    floats (decode_layer/delta.rs's scratch_layout)."""
    lines = lambda n: (n + 31) // 32 * 32
    p = 2 * hk * dk + 2 * hv * dv + 2 * hv
    o_y = lines(p // 2)
    o_h = o_y + lines(hv * dv // 2)
    o_act = o_h + lines(hid // 2)
    o_x = o_act + lines(f // 2)
    return dict(O_Y=o_y, O_H=o_h, O_ACT=o_act, O_X=o_x), o_x + lines(hid // 2)


def moe_scratch(act):
    """decode_layer/moe.rs's standalone launch: its activations' floats, where O_MOE starts."""
    return (act // 2 + 31) // 32 * 32
