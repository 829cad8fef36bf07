#!/usr/bin/env python3
"""Vision-language references from mlx-vlm: processor tensors, tiny models, greedy tokens.

The Rust tests call this with the reference python ($RMX_TEST_PYTHON, scripts/test-env.sh).
Images are loaded as mlx-vlm loads them (mlx_vlm.utils.load_image: EXIF transpose, then
Pillow's convert("RGB")) and processed by the processor mlx-vlm builds (transformers' Pillow
backend, use_fast=False).

  pixels --config-dir DIR --out OUT.f32 IMAGE...
         DIR holds a preprocessor_config.json; OUT.f32 gets each image's pixel_values
         ([3, H, W] float32, native endian) one after the other
"""

import argparse
import sys
from pathlib import Path


def load_images(paths):
    from mlx_vlm.utils import load_image

    return [load_image(str(p)) for p in paths]


def cmd_pixels(args):
    import numpy as np
    from transformers import AutoImageProcessor

    proc = AutoImageProcessor.from_pretrained(args.config_dir, use_fast=False)
    with open(args.out, "wb") as out:
        for img in load_images(args.images):
            px = proc(img, return_tensors="np")["pixel_values"]
            out.write(np.ascontiguousarray(px[0], dtype=np.float32).tobytes())


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("pixels")
    p.add_argument("--config-dir", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("images", nargs="+", type=Path)
    return ap.parse_args(argv)


def main():
    args = parse_args()
    {"pixels": cmd_pixels}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
