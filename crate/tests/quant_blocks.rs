//! Quantized blocks against the `gguf` Python package (llama.cpp's gguf-py, bit-exact ports of
//! ggml's reference quantizers; fixtures/quant_blocks.json, made by scripts/make-quant-fixture.py):
//! our quantizer gives the same scales and quants, GGUF blocks convert to our GPU layout, and
//! dequantize to exactly gguf-py's values.

mod common;

use common::fixture;
use onetoken::quant::Quant;

fn f32s(v: &serde_json::Value) -> Vec<f32> {
    v.as_array().unwrap().iter().map(|b| f32::from_bits(b.as_u64().unwrap() as u32)).collect()
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

#[test]
fn quantize_and_dequantize_match_gguf_py() {
    let fixture: serde_json::Value =
        serde_json::from_slice(&std::fs::read(fixture("quant_blocks.json")).unwrap()).unwrap();
    let cases = fixture["cases"].as_array().unwrap();
    assert!(cases.len() >= 7);
    for case in cases {
        let (name, cols) = (case["name"].as_str().unwrap(), case["cols"].as_u64().unwrap() as usize);
        let values = f32s(&case["values"]);
        for quant in [Quant::Q8_0, Quant::Q5_0, Quant::Q4_0] {
            let want = &case[quant.name()];
            let gguf = hex(want["gguf_hex"].as_str().unwrap());
            let per_row = cols / 32 * quant.block_type().bytes();
            for (r, row) in values.chunks(cols).enumerate() {
                let what = format!("{name} row {r} {}", quant.name());
                let mut converted = Vec::new();
                quant.row_from_gguf(&gguf[r * per_row..][..per_row], cols, &mut converted);
                let mut ours = Vec::new();
                quant.quantize_row(row, &mut ours);
                assert_eq!(ours, converted, "{what}: our quantizer vs gguf-py's blocks");
                let back = quant.dequantize_row(&converted, cols);
                let want_back = &f32s(&want["dequantized"])[r * cols..][..cols];
                let same = back.iter().zip(want_back).all(|(a, b)| a.to_bits() == b.to_bits());
                assert!(same, "{what}: dequantized {back:?} vs gguf-py {want_back:?}");
            }
        }
    }
}
