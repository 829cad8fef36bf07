"""Encodes TEXTS (a JSON list in a file) with our tokenizer.json and with a reference, and prints
one JSON object per text: {"text", "ours", "reference", "decoded"}.

The reference is either a tokenizer.json (`--ref-json PATH`) or the tokenizer transformers builds
from the GGUF itself (`--ref-gguf PATH`: transformers' own GGUF tokenizer conversion, called
without torch)."""
import argparse
import json

from tokenizers import Tokenizer

ap = argparse.ArgumentParser()
ap.add_argument("ours")
ap.add_argument("texts")
ap.add_argument("--ref-json")
ap.add_argument("--ref-gguf")
a = ap.parse_args()

ours = Tokenizer.from_file(a.ours)
if a.ref_json:
    ref = Tokenizer.from_file(a.ref_json)
else:
    import gguf
    from transformers.integrations.gguf.gguf_tokenizer_mapping import GGUF_TOKENIZER_MAPPING, convert_gguf_tokenizer

    r = gguf.GGUFReader(a.ref_gguf)
    fields = {}
    for key, name in GGUF_TOKENIZER_MAPPING["tokenizer"].items():
        f = r.fields.get("tokenizer." + key)
        if f is not None:
            fields[name] = f.contents()
    ref, _ = convert_gguf_tokenizer(r.fields["general.architecture"].contents(), fields)

for text in json.load(open(a.texts)):
    mine = ours.encode(text).ids
    print(json.dumps({
        "text": text,
        "ours": mine,
        "reference": ref.encode(text).ids,
        "decoded": ours.decode(mine, skip_special_tokens=False),
    }))
