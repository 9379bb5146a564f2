// Packed weights: a matrix stays in its file's form, two 16-bit values per u32 word (bf16 or
// f16), or one f32 per word. Values are widened here; all arithmetic is f32, so `shader-f16`
// is never needed. Prepended to every kernel that reads a weight matrix.
// DTYPE: 0 = bf16, 1 = f16, 2 = f32.
override DTYPE: u32 = 0u;

// The two 16-bit values of one word (DTYPE 0 or 1), low half first.
fn unpack_word(word: u32) -> vec2<f32> {
    if DTYPE == 1u {
        return unpack2x16float(word);
    }
    // bf16 is the top half of an f32: shift each half into place.
    return vec2<f32>(bitcast<f32>(word << 16u), bitcast<f32>(word & 0xffff0000u));
}
