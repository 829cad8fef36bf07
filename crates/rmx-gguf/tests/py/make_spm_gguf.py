"""A tensor-less GGUF holding a SentencePiece vocabulary the way llama.cpp stores Llama 2's
(`tokenizer.ggml.model = "llama"`: tokens, scores, token types, no merges), made from an HF
tokenizer.json. The SentencePiece scores are rebuilt from its merges: a piece scores minus the
rank of the first merge that makes it, which is the order SentencePiece's BPE merges in.
usage: make_spm_gguf.py TOKENIZER_JSON OUT.gguf"""
import json
import sys

import gguf

tok = json.load(open(sys.argv[1]))
vocab = tok["model"]["vocab"]
tokens = [None] * len(vocab)
for t, i in vocab.items():
    tokens[i] = t
unk = vocab[tok["model"]["unk_token"]]
special = {a["id"] for a in tok["added_tokens"] if a["special"]}
merges = [m.split(" ") if isinstance(m, str) else m for m in tok["model"]["merges"]]
rank = {}
for r, (a, b) in enumerate(merges):
    rank.setdefault(a + b, r)
types, scores = [], []
for i, t in enumerate(tokens):
    if i == unk:
        types.append(2)
    elif i in special:
        types.append(3)
    elif t.startswith("<0x") and len(t) == 6:
        types.append(6)
    else:
        types.append(1)
    scores.append(-float(rank.get(t, len(merges) + i)) if types[-1] == 1 else 0.0)

w = gguf.GGUFWriter(sys.argv[2], "llama")
w.add_tokenizer_model("llama")
w.add_token_list(tokens)
w.add_token_scores(scores)
w.add_token_types(types)
w.add_bos_token_id(vocab["<s>"])
w.add_eos_token_id(vocab["</s>"])
w.add_unk_token_id(unk)
w.add_add_bos_token(True)
w.add_add_space_prefix(True)
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
