#!/usr/bin/env python3
"""Make the golden tokenizer / chat-template data for onetoken's tokenizer tests.

What it does
------------
Reads the two tokenizers checked in under crate/tests/fixtures/:

  * crate/tests/fixtures/qwen2.5-0.5b/  (tokenizer.json, tokenizer_config.json)
  * crate/tests/fixtures/tiny-qwen2/    (tokenizer.json, tokenizer_config.json)

and writes crate/tests/fixtures/tokenizer_cases.json with:

  "meta"      : the package versions that produced the file.
  "encode"    : {"qwen2.5-0.5b": [...], "tiny-qwen2": [...]}, each a list of
                {"text", "ids"} where ids is
                tokenizers.Tokenizer.from_file(tokenizer.json)
                    .encode(text, add_special_tokens=False).ids
                (added/special tokens such as <|im_start|> written in the text are
                matched as single ids, as in HF).
  "chat"      : cases a-f (see CHAT_CASES) of qwen2.5-0.5b's chat_template,
                rendered by HF transformers'
                AutoTokenizer.from_pretrained(dir).apply_chat_template(
                    messages, tokenize=False, add_generation_prompt=...,
                    continue_final_message=...)
                as {"name", "messages", "add_generation_prompt",
                "continue_final_message", "text", "ids"}; ids = encode(text) as above.
  "chat_tiny" : the same for the tiny-qwen2 tokenizer (cases a and c).

The script cross-checks that transformers' own tokenizer gives the same ids as the
`tokenizers` package for every string, that special tokens are single ids, and that
case (a) renders to the exact ChatML string.

Versions that made the checked-in fixture
-----------------------------------------
Python 3.11.7, tokenizers 0.23.3, transformers 5.24.0, jinja2 3.1.6 (no torch).

How to rerun
------------
From the repository root, with tokenizers + transformers (+ jinja2) installed:

    python3 -m venv /tmp/tokvenv && /tmp/tokvenv/bin/pip install tokenizers transformers jinja2
    /tmp/tokvenv/bin/python3 scripts/make-tokenizer-fixture.py

(or just `python3 scripts/make-tokenizer-fixture.py` if those packages are on your path).
No network access is needed: the tokenizers are loaded from the local directories.
"""

import json
import os
import sys

import jinja2
import tokenizers
import transformers
from tokenizers import Tokenizer
from transformers import AutoTokenizer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIX = os.path.join(ROOT, "crate", "tests", "fixtures")
DIRS = {
    "qwen2.5-0.5b": os.path.join(FIX, "qwen2.5-0.5b"),
    "tiny-qwen2": os.path.join(FIX, "tiny-qwen2"),
}
OUT = os.path.join(FIX, "tokenizer_cases.json")

ENCODE_TEXTS = [
    "Hello, world!",
    "The quick brown fox jumps over the lazy dog.",
    "What's the time? I'll check; it's 3:45pm and we've got 2 minutes.",
    "파란색 하늘은 왜 파란가요?",
    "이 문장은 한국어입니다.",
    'fn main() { println!("hi"); }',
    "def add(a, b):\n    if a > b:\n        return a - b\n    return a + b\n",
    "I ❤️ 🦀 and 🎉",
    "12345 + 678 = 13023",
    "<|im_start|>user\nHello<|im_end|>\n",
    "   leading and trailing spaces   ",
    "multiple   spaces\n\n\nand\tnewlines\n  \n end",
    '{"choice": "',
    '{"choice": "blue"}',
    "",
    "Rust로 작성된 inference engine은 정말 fast합니다! OK?",
    # NFC normalizer: decomposed "é" (e + U+0301) must encode like the composed one.
    "cafe\u0301 vs caf\u00e9",
]

SYS = {"role": "system", "content": "You are a helpful assistant."}
CHAT_CASES = [
    ("a_system_user_genprompt",
     [SYS, {"role": "user", "content": "Hello"}], True, False),
    ("b_user_only_default_system",
     [{"role": "user", "content": "What color is the sky?"}], True, False),
    ("c_response_prefix_continue",
     [SYS,
      {"role": "user", "content": "Pick a color. Answer in JSON."},
      {"role": "assistant", "content": '{"choice": "'}], False, True),
    ("d_korean_genprompt",
     [{"role": "system", "content": "당신은 친절한 도우미입니다."},
      {"role": "user", "content": "파란색 하늘은 왜 파란가요?"}], True, False),
    ("e_multi_turn_no_genprompt",
     [{"role": "user", "content": "Hi!"},
      {"role": "assistant", "content": "Hello! How can I help?"},
      {"role": "user", "content": "Tell me a joke."}], False, False),
    # Extra: a response prefix ending in whitespace. transformers 5.x keeps the trailing
    # space (it tags the final message and cuts at the tag), so text ends in "because ".
    ("f_response_prefix_trailing_space",
     [{"role": "user", "content": "Why is the sky blue?"},
      {"role": "assistant", "content": "The sky is blue because "}], False, True),
]
TINY_CASES = ("a_system_user_genprompt", "c_response_prefix_continue")

EXPECTED_A = ("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
              "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n")


def naive_render(template, messages, add_generation_prompt):
    """jinja2 with HF's settings; used only to report differences from transformers."""
    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
    return env.from_string(template).render(
        messages=messages, add_generation_prompt=add_generation_prompt, tools=None)


def main():
    toks = {k: Tokenizer.from_file(os.path.join(d, "tokenizer.json")) for k, d in DIRS.items()}
    hf = {k: AutoTokenizer.from_pretrained(d) for k, d in DIRS.items()}

    def enc(key, text):
        return toks[key].encode(text, add_special_tokens=False).ids

    def check_hf_same(key, text, ids):
        hf_ids = hf[key](text, add_special_tokens=False)["input_ids"]
        if hf_ids != ids:
            print(f"WARNING [{key}] transformers ids differ from tokenizers ids for {text!r}:\n"
                  f"  tokenizers:   {ids}\n  transformers: {hf_ids}", file=sys.stderr)

    # Special tokens must be single ids.
    for key, expect in (("qwen2.5-0.5b", (151643, 151644, 151645)), ("tiny-qwen2", (499, 500, 501))):
        for tok, want in zip(("<|endoftext|>", "<|im_start|>", "<|im_end|>"), expect):
            got = enc(key, tok)
            assert got == [want], (key, tok, got)

    encode = {}
    for key in DIRS:
        cases = []
        for text in ENCODE_TEXTS:
            ids = enc(key, text)
            check_hf_same(key, text, ids)
            cases.append({"text": text, "ids": ids})
        encode[key] = cases

    def chat(key, names=None):
        out = []
        template = hf[key].chat_template
        for name, messages, gen, cont in CHAT_CASES:
            if names is not None and name not in names:
                continue
            text = hf[key].apply_chat_template(
                messages, tokenize=False,
                add_generation_prompt=gen, continue_final_message=cont)
            if name == "a_system_user_genprompt":
                assert text == EXPECTED_A, repr(text)
            # Report where transformers differs from plain jinja2 rendering.
            if cont:
                naive = naive_render(template, messages, False)
                suffix = "<|im_end|>\n"
                naive_trim = naive[:-len(suffix)] if naive.endswith(suffix) else naive
                naive_prefix = naive_render(template, messages[:-1], True) + messages[-1]["content"]
                print(f"[{key}] {name}: naive render (no gen prompt) = {naive!r}")
                print(f"[{key}] {name}: == render minus trailing <|im_end|>\\n: {text == naive_trim}; "
                      f"== render(history, gen prompt) + prefix: {text == naive_prefix}")
            else:
                naive = naive_render(template, messages, gen)
                if naive != text:
                    print(f"[{key}] {name}: transformers {text!r} != jinja2 {naive!r}")
            ids = enc(key, text)
            check_hf_same(key, text, ids)
            out.append({"name": name, "messages": messages, "add_generation_prompt": gen,
                        "continue_final_message": cont, "text": text, "ids": ids})
        return out

    data = {
        "meta": {
            "generator": "scripts/make-tokenizer-fixture.py",
            "python": sys.version.split()[0],
            "tokenizers": tokenizers.__version__,
            "transformers": transformers.__version__,
            "jinja2": jinja2.__version__,
            "encode": "tokenizers.Tokenizer.from_file(tokenizer.json).encode(text, add_special_tokens=False).ids",
            "chat": "transformers AutoTokenizer.from_pretrained(dir).apply_chat_template(messages, tokenize=False, add_generation_prompt, continue_final_message); ids = encode(text)",
        },
        "encode": encode,
        "chat": chat("qwen2.5-0.5b"),
        "chat_tiny": chat("tiny-qwen2", TINY_CASES),
    }

    # One case per line keeps the file diffable without exploding the id lists.
    def dump_list(items, indent):
        pad = " " * indent
        return "[\n" + ",\n".join(pad + "  " + json.dumps(x, ensure_ascii=False) for x in items) + "\n" + pad + "]"

    parts = ['  "meta": ' + json.dumps(data["meta"], ensure_ascii=False, indent=2).replace("\n", "\n  ")]
    enc_parts = [f'    {json.dumps(k)}: ' + dump_list(v, 4) for k, v in encode.items()]
    parts.append('  "encode": {\n' + ",\n".join(enc_parts) + "\n  }")
    parts.append('  "chat": ' + dump_list(data["chat"], 2))
    parts.append('  "chat_tiny": ' + dump_list(data["chat_tiny"], 2))
    text = "{\n" + ",\n".join(parts) + "\n}\n"
    assert json.loads(text) == data
    with open(OUT, "w", encoding="utf-8") as f:
        f.write(text)
    print(f"wrote {os.path.relpath(OUT, ROOT)}")


if __name__ == "__main__":
    main()
