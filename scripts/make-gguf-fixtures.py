#!/usr/bin/env python3
"""Make onetoken's GGUF fixtures with the `gguf` Python package (llama.cpp's gguf-py: its
writer, and dequantizers that are ports of ggml's):

  crate/tests/fixtures/gguf_blocks.json
      For each block type onetoken reads (Q8_0, Q4_0, Q5_0, Q4_K, Q6_K): blocks of random bytes
      (scales set to finite f16 values), as hex, and gguf.quants.dequantize of them as float32
      bit patterns. Random bytes reach every quant and scale pattern, which quantizing smooth
      values would not (gguf-py has no K-quant quantizer anyway).
  crate/tests/fixtures/tiny-qwen2/model.gguf
      The tiny fixture model (tiny-qwen2/model.safetensors, config.json, tokenizer.json and
      tokenizer_config.json) as a whole-model GGUF, written by gguf.GGUFWriter with llama.cpp's
      Qwen2 names and metadata keys: matrices in a mix of Q8_0, Q4_0, Q5_0, F16, BF16 and F32
      (quantized by gguf.quants.quantize), norms and biases F32, the tokenizer as
      tokenizer.ggml.* (tokens padded to the vocabulary with unused [PAD] entries, as
      llama.cpp's converter does) and the chat template.
  crate/tests/fixtures/qwen2.5-0.5b/tokenizer.gguf      (only with --real-gguf FILE)
      The general.* and tokenizer.* metadata of a real llama.cpp Qwen2.5 GGUF (the one used:
      Qwen2.5-Coder-0.5B-Instruct Q4_K_M, sha256 1d9614638d18024d0fbb36575a15f1302a3adf04
      4df10345688ec4f6e1c4ff32), without tensors: the tokenizer as llama.cpp's converter wrote
      it, to check ours reads it back.

Usage: python3 -m venv /tmp/q && /tmp/q/bin/pip install gguf==0.19.0 numpy &&
       /tmp/q/bin/python scripts/make-gguf-fixtures.py [--real-gguf FILE]
"""
import json
import struct
import sys
from importlib.metadata import version
from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType as T, GGUFReader, GGUFValueType, GGUFWriter, quants

FIXTURES = Path(__file__).resolve().parent.parent / "crate/tests/fixtures"
SOURCE = f"gguf {version('gguf')} (llama.cpp gguf-py), numpy {version('numpy')}"

# Bytes per block and where its f16 scales sit.
BLOCKS = {T.Q8_0: (34, [0]), T.Q4_0: (18, [0]), T.Q5_0: (22, [0]), T.Q4_K: (144, [0, 2]), T.Q6_K: (210, [208])}


def bits(a):
    return [int(v) for v in np.asarray(a, np.float32).view(np.uint32).ravel()]


def blocks_fixture():
    rng = np.random.default_rng(1)
    out = {"source": SOURCE, "types": []}
    for ty, (size, scales) in BLOCKS.items():
        raw = rng.integers(0, 256, (4, size), dtype=np.uint8)
        for b in range(4):
            for at in scales:
                # Finite scales from tiny to large, both signs; block 3 has a zero scale.
                d = 0.0 if b == 3 else float(rng.choice([-1, 1]) * 10.0 ** rng.uniform(-6, 1))
                raw[b, at:at + 2] = np.frombuffer(np.float16(d).tobytes(), np.uint8)
        values = quants.dequantize(raw.reshape(-1), ty)
        out["types"].append({"type": ty.name, "hex": raw.tobytes().hex(), "dequantized": bits(values)})
    path = FIXTURES / "gguf_blocks.json"
    path.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {path}")


def read_safetensors(path):
    raw = path.read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        a, b = t["data_offsets"]
        assert t["dtype"] == "BF16"
        u16 = np.frombuffer(raw[8 + n + a:8 + n + b], np.uint16).astype(np.uint32) << 16
        out[name] = u16.view(np.float32).reshape(t["shape"])
    return out


# How each matrix of the tiny model is stored: every type the kernels read directly, and
# Q5_0 and the float types, spread over both layers. (K-quants need rows of 256 values; the
# tiny model's are 64 and 128.)
TINY_TYPES = {
    "token_embd.weight": T.Q8_0,
    "blk.0.attn_q.weight": T.Q8_0, "blk.0.attn_k.weight": T.Q4_0, "blk.0.attn_v.weight": T.Q5_0,
    "blk.0.attn_output.weight": T.F16, "blk.0.ffn_gate.weight": T.Q5_0, "blk.0.ffn_up.weight": T.Q4_0,
    "blk.0.ffn_down.weight": T.BF16,
    "blk.1.attn_q.weight": T.Q4_0, "blk.1.attn_k.weight": T.Q8_0, "blk.1.attn_v.weight": T.F32,
    "blk.1.attn_output.weight": T.Q5_0, "blk.1.ffn_gate.weight": T.Q8_0, "blk.1.ffn_up.weight": T.F16,
    "blk.1.ffn_down.weight": T.Q4_0,
}

NAMES = {
    "input_layernorm.weight": "attn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight", "self_attn.q_proj.bias": "attn_q.bias",
    "self_attn.k_proj.weight": "attn_k.weight", "self_attn.k_proj.bias": "attn_k.bias",
    "self_attn.v_proj.weight": "attn_v.weight", "self_attn.v_proj.bias": "attn_v.bias",
    "self_attn.o_proj.weight": "attn_output.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight", "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
}


def gguf_name(hf):
    if hf == "model.embed_tokens.weight":
        return "token_embd.weight"
    if hf == "model.norm.weight":
        return "output_norm.weight"
    _, _, layer, rest = hf.split(".", 3)
    return f"blk.{layer}.{NAMES[rest]}"


def add_tokenizer(w, tokenizer_json, tokenizer_config, vocab_size):
    tok = json.loads(tokenizer_json.read_text())
    cfg = json.loads(tokenizer_config.read_text())
    tokens = [None] * vocab_size
    types = [5] * vocab_size  # unused, as llama.cpp marks padding
    for text, i in tok["model"]["vocab"].items():
        tokens[i], types[i] = text, 1
    for added in tok["added_tokens"]:
        tokens[added["id"]], types[added["id"]] = added["content"], 3 if added["special"] else 4
    tokens = [t if t is not None else f"[PAD{i}]" for i, t in enumerate(tokens)]
    merges = [m if isinstance(m, str) else " ".join(m) for m in tok["model"]["merges"]]
    ids = {t: i for i, t in enumerate(tokens)}
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_eos_token_id(ids[cfg["eos_token"]])
    w.add_pad_token_id(ids[cfg["pad_token"]])
    w.add_bos_token_id(ids["<|endoftext|>"])
    w.add_add_bos_token(False)
    w.add_chat_template(cfg["chat_template"])


def tiny_gguf():
    src = FIXTURES / "tiny-qwen2"
    config = json.loads((src / "config.json").read_text())
    tensors = read_safetensors(src / "model.safetensors")
    path = src / "model.gguf"
    w = GGUFWriter(path, "qwen2")
    w.add_name("tiny-qwen2")
    w.add_block_count(config["num_hidden_layers"])
    w.add_context_length(config["max_position_embeddings"])
    w.add_embedding_length(config["hidden_size"])
    w.add_feed_forward_length(config["intermediate_size"])
    w.add_head_count(config["num_attention_heads"])
    w.add_head_count_kv(config["num_key_value_heads"])
    w.add_rope_freq_base(config["rope_theta"])
    w.add_layer_norm_rms_eps(config["rms_norm_eps"])
    w.add_file_type(7)  # mostly Q8_0
    add_tokenizer(w, src / "tokenizer.json", src / "tokenizer_config.json", config["vocab_size"])
    for hf in sorted(tensors):
        name, values = gguf_name(hf), tensors[hf]
        ty = TINY_TYPES.get(name, T.F32)
        if ty == T.F32:
            w.add_tensor(name, values)
        elif ty == T.F16:
            w.add_tensor(name, values.astype(np.float16))
        else:  # BF16 and the block types: gguf-py's own conversion
            w.add_tensor(name, quants.quantize(values, ty), raw_dtype=ty)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"wrote {path}")


def tokenizer_gguf(real):
    r = GGUFReader(real)
    path = FIXTURES / "qwen2.5-0.5b/tokenizer.gguf"
    w = GGUFWriter(path, r.fields["general.architecture"].contents())
    for key, field in r.fields.items():
        if not key.startswith(("tokenizer.", "general.")) or key == "general.architecture":
            continue
        value = field.contents()
        if field.types[0] == GGUFValueType.ARRAY:
            w.add_key_value(key, value, GGUFValueType.ARRAY, sub_type=field.types[-1])
        else:
            w.add_key_value(key, value, field.types[0])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.close()
    print(f"wrote {path}")


def main():
    blocks_fixture()
    tiny_gguf()
    if "--real-gguf" in sys.argv:
        tokenizer_gguf(sys.argv[sys.argv.index("--real-gguf") + 1])


if __name__ == "__main__":
    main()
