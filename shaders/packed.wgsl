// Packed weights, prepended to every kernel that reads a weight matrix `w`.
// A matrix stays in its file's form: two 16-bit values per u32 word (bf16 or f16), or one f32
// per word. Values are widened here; all arithmetic is f32. `shader-f16` is never needed.
// DTYPE: 0 = bf16, 1 = f16, 2 = f32.
override DTYPE: u32 = 0u;

// Values 2p and 2p+1 of `w`, counting along rows (row-major [rows, cols], cols even).
fn weight_pair(p: u32) -> vec2<f32> {
    if DTYPE == 2u {
        return vec2<f32>(bitcast<f32>(w[2u * p]), bitcast<f32>(w[2u * p + 1u]));
    }
    let word = w[p];
    if DTYPE == 1u {
        return unpack2x16float(word);
    }
    // bf16 is the top half of an f32: shift each half into place.
    return vec2<f32>(bitcast<f32>(word << 16u), bitcast<f32>(word & 0xffff0000u));
}
