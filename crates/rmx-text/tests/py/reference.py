"""What transformers says, for the rmx-text parity tests.

Reads one JSON request on stdin and writes one JSON answer on stdout, so that a test pays for
importing transformers once:
  {"renders":  [{"dir", "template"?, "messages", "tools"?, "add_generation_prompt", "kwargs"}],
   "encodes":  [{"dir", "text", "add_special_tokens"}],
   "decodes":  [{"dir", "ids", "skip_special_tokens"}],
   "specials": [dir]}
Each render answers {"text": ...} or {"raised": message} for raise_exception(), or
{"error": description} for any other failure.
"""

import json
import sys

import jinja2
from transformers import AutoTokenizer
from transformers.utils import logging

logging.set_verbosity_error()
_tokenizers = {}


def tokenizer(path):
    if path not in _tokenizers:
        _tokenizers[path] = AutoTokenizer.from_pretrained(path)
    return _tokenizers[path]


def render(case):
    tok = tokenizer(case["dir"])
    try:
        text = tok.apply_chat_template(
            case["messages"],
            tools=case.get("tools"),
            add_generation_prompt=case["add_generation_prompt"],
            chat_template=case.get("template"),
            tokenize=False,
            **case.get("kwargs", {}),
        )
        return {"text": text}
    except jinja2.exceptions.TemplateError as e:
        if type(e) is jinja2.exceptions.TemplateError:
            return {"raised": str(e)}
        return {"error": f"{type(e).__name__}: {e}"}
    except Exception as e:  # noqa: BLE001 - any failure is an answer to compare
        return {"error": f"{type(e).__name__}: {e}"}


def main():
    request = json.load(sys.stdin)
    answer = {
        "renders": [render(case) for case in request.get("renders", [])],
        "encodes": [
            tokenizer(c["dir"]).encode(c["text"], add_special_tokens=c["add_special_tokens"])
            for c in request.get("encodes", [])
        ],
        "decodes": [
            tokenizer(c["dir"]).decode(
                c["ids"],
                skip_special_tokens=c["skip_special_tokens"],
                clean_up_tokenization_spaces=False,
            )
            for c in request.get("decodes", [])
        ],
        "specials": [tokenizer(d).special_tokens_map for d in request.get("specials", [])],
    }
    json.dump(answer, sys.stdout, ensure_ascii=False)


if __name__ == "__main__":
    main()
