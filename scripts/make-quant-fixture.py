#!/usr/bin/env python3
"""Make crate/tests/fixtures/quant_blocks.json: Q8_0, Q5_0 and Q4_0 blocks made by the `gguf` Python
package (llama.cpp's gguf-py, whose quantizers are bit-exact ports of ggml's reference ones),
for onetoken's quantization tests.

For each case (rows of float32 values), and each of Q8_0, Q5_0 and Q4_0, the file holds:
  "gguf_hex"    : gguf.quants.quantize(values, type) as hex (llama.cpp's block layout:
                  f16 scale then the quants, block by block);
  "dequantized" : gguf.quants.dequantize(those bytes, type), float32.
Values are written as float32 bit patterns (u32) so they survive JSON exactly.

Usage: python3 -m venv /tmp/q && /tmp/q/bin/pip install gguf numpy &&
       /tmp/q/bin/python scripts/make-quant-fixture.py
"""
import json
from importlib.metadata import version
from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType, quants

OUT = Path(__file__).resolve().parent.parent / "crate/tests/fixtures/quant_blocks.json"


def cases():
    rng = np.random.default_rng(0)
    ramp = (np.arange(64, dtype=np.float32) - 30) / 17
    # A block whose largest magnitude is negative, one all zero, one with a single value.
    signs = np.concatenate([np.full(31, 0.25, np.float32), [-2.0]]).astype(np.float32)
    single = np.zeros(32, np.float32)
    single[7] = 3.5
    # Values on Q8_0's half steps (ties round away from zero) and Q4_0's clamp at +7.
    ties = (np.arange(32, dtype=np.float32) - 16) * np.float32(0.5)
    ties[0] = 127.0 / 2
    return [
        ("ramp", 64, ramp),
        ("negative largest", 32, signs),
        ("zeros", 32, np.zeros(32, np.float32)),
        ("single", 32, single),
        ("ties", 32, ties),
        ("normal", 96, rng.normal(0, 0.02, 2 * 96).astype(np.float32)),
        ("wide", 64, (rng.standard_normal(64) * np.exp(rng.uniform(-8, 8, 64))).astype(np.float32)),
    ]


def bits(a):
    return [int(v) for v in np.asarray(a, np.float32).view(np.uint32).ravel()]


def main():
    out = {
        "source": f"gguf {version('gguf')} (llama.cpp gguf-py), numpy {version('numpy')}",
        "cases": [],
    }
    for name, cols, values in cases():
        rows = values.reshape(-1, cols)
        case = {"name": name, "cols": cols, "values": bits(rows)}
        for qtype in (GGMLQuantizationType.Q8_0, GGMLQuantizationType.Q5_0, GGMLQuantizationType.Q4_0):
            blocks = quants.quantize(rows, qtype)
            back = quants.dequantize(blocks, qtype)
            case[qtype.name.lower()] = {"gguf_hex": blocks.tobytes().hex(), "dequantized": bits(back)}
        out["cases"].append(case)
    OUT.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
