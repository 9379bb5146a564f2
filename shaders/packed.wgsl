// Packed weights: a matrix stays in its file's form, two 16-bit values per u32 word (bf16 or
// f16) or one f32 per word, or is quantized in blocks of 32 values with one f16 scale each
// (Q8_0: a signed byte per value; Q4_0: a nibble per value, minus 8; Q5_0: a nibble plus a
// fifth bit per value, minus 16), or in GGUF's Q4_K super-blocks of 256 (a nibble per value;
// each block of 32 with a 6-bit scale and min under the super-block's f16 d and dmin). A
// quantized row holds its quants in value order (Q5_0: then one word of fifth bits per block,
// padded to 16 bytes), then its scales two per word, padded to 16 bytes (Q4_K: 16 bytes per
// super-block, as GGUF has them). Q6_K: the low nibbles, then the high 2 bits (4 values a byte),
// then per super-block of 256 its 16 signed 8-bit scales (one per 16 values) and f16 d in 5
// words (quant.rs). Values are widened here; all arithmetic is f32, so `shader-f16` is never
// needed. Prepended to every kernel that reads a weight matrix.
// DTYPE: 0 = bf16, 1 = f16, 2 = f32, 3 = q8_0, 4 = q4_0, 5 = q5_0, 6 = q4_k, 7 = q6_k.
override DTYPE: u32 = 0u;

// The two 16-bit values of one word (DTYPE 0 or 1), low half first.
fn unpack_word(word: u32) -> vec2<f32> {
    if DTYPE == 1u {
        return unpack2x16float(word);
    }
    // bf16 is the top half of an f32: shift each half into place.
    return vec2<f32>(bitcast<f32>(word << 16u), bitcast<f32>(word & 0xffff0000u));
}

// The eight 16-bit values of a 16-byte load (DTYPE 0 or 1), in order.
fn unpack_eight(v: vec4<u32>) -> array<vec4<f32>, 2> {
    return array(vec4<f32>(unpack_word(v.x), unpack_word(v.y)), vec4<f32>(unpack_word(v.z), unpack_word(v.w)));
}

// The four signed bytes of a Q8_0 word, in value order.
fn unpack_q8(word: u32) -> vec4<f32> {
    let bytes = bitcast<vec4<i32>>(vec4<u32>(word << 24u, word << 16u, word << 8u, word));
    return vec4<f32>(bytes >> vec4<u32>(24u));  // arithmetic shift: sign-extended
}

// Values 0..3 and 4..7 of a Q4_0 word (its nibbles, low first, minus 8).
fn unpack_q4_lo(word: u32) -> vec4<f32> {
    return vec4<f32>((vec4<u32>(word) >> vec4<u32>(0u, 4u, 8u, 12u)) & vec4<u32>(15u)) - 8.0;
}
fn unpack_q4_hi(word: u32) -> vec4<f32> {
    return vec4<f32>((vec4<u32>(word) >> vec4<u32>(16u, 20u, 24u, 28u)) & vec4<u32>(15u)) - 8.0;
}

// Values 0..3 of a word of nibbles, each widened by `width` high bits from `high` (bits
// width * j for value j), minus `zero`: Q5_0 (1 bit, zero 16) and Q6_K (2 bits, zero 32).
fn unpack_wide(word: u32, high: u32, width: u32, zero: f32) -> vec4<f32> {
    let nibbles = (vec4<u32>(word) >> vec4<u32>(0u, 4u, 8u, 12u)) & vec4<u32>(15u);
    let top = ((vec4<u32>(high) >> (vec4<u32>(0u, 1u, 2u, 3u) * width)) & vec4<u32>((1u << width) - 1u)) << vec4<u32>(4u);
    return vec4<f32>(nibbles | top) - zero;
}

// Values 0..3 and 4..7 of a Q5_0 word: its nibbles, each with a fifth bit from `high` (bit j
// for the word's value j), minus 16.
fn unpack_q5_lo(word: u32, high: u32) -> vec4<f32> {
    return unpack_wide(word, high, 1u, 16.0);
}
fn unpack_q5_hi(word: u32, high: u32) -> vec4<f32> {
    return unpack_wide(word >> 16u, high >> 4u, 1u, 16.0);
}

// Values 0..3 and 4..7 of a Q4_K word: its nibbles, unsigned.
fn unpack_nibbles_lo(word: u32) -> vec4<f32> {
    return vec4<f32>((vec4<u32>(word) >> vec4<u32>(0u, 4u, 8u, 12u)) & vec4<u32>(15u));
}
fn unpack_nibbles_hi(word: u32) -> vec4<f32> {
    return unpack_nibbles_lo(word >> 16u);
}

// Scale and min of block j (0..7) of a Q4_K super-block, from its 4 words: d and dmin (f16),
// then 12 bytes s[0..12] of 6-bit scales and mins packed as llama.cpp packs them (blocks 0..3:
// the low 6 bits of s[j] and s[j + 4]; blocks 4..7: the nibbles of s[j + 4] and the top 2 bits
// of s[j - 4] and s[j]).
fn q4k_scale_min(words: vec4<u32>, j: u32) -> vec2<f32> {
    let dm = unpack2x16float(words.x);
    let at = 8u * (j % 4u);
    let a = extractBits(words.y, at, 8u);  // s[j % 4]
    let b = extractBits(words.z, at, 8u);  // s[j % 4 + 4]
    let c = extractBits(words.w, at, 8u);  // s[j % 4 + 8]
    var scale = a & 63u;
    var min = b & 63u;
    if j >= 4u {
        scale = (c & 15u) | ((a >> 6u) << 4u);
        min = (c >> 4u) | ((b >> 6u) << 4u);
    }
    return vec2<f32>(dm.x * f32(scale), dm.y * f32(min));
}

// Values 0..3 and 4..7 of a Q6_K word of nibbles, each with its high 2 bits from `high` (bits
// 2j for the word's value j), minus 32.
fn unpack_q6_lo(word: u32, high: u32) -> vec4<f32> {
    return unpack_wide(word, high, 2u, 32.0);
}
fn unpack_q6_hi(word: u32, high: u32) -> vec4<f32> {
    return unpack_wide(word >> 16u, high >> 8u, 2u, 32.0);
}

// A signed byte of a word, as f32 (Q6_K's scales).
fn signed_byte(word: u32, byte: u32) -> f32 {
    return f32(bitcast<i32>(word << (24u - 8u * byte)) >> 24u);
}

// Words of a quantized row's quants (DTYPE 3 to 7; Q5_0's fifth bits and Q6_K's high bits
// included).
fn quant_words(cols: u32) -> u32 {
    switch DTYPE {
        case 3u: { return cols / 4u; }
        case 5u: { return cols / 8u + (cols / 32u + 3u) / 4u * 4u; }
        case 7u: { return cols / 8u + cols / 16u; }
        default: { return cols / 8u; }
    }
}

// Q6_K: d times the scale of values 16t..16t+15 of a super-block, from the word holding that
// scale and the word holding d (the caller reads them: they sit at 5 sb + t / 4 and 5 sb + 4
// words past the quants).
fn q6k_scale(scale_word: u32, d_word: u32, t: u32) -> f32 {
    return unpack2x16float(d_word).x * signed_byte(scale_word, t % 4u);
}

// The word of Q5_0 fifth bits of `block` in the row starting at word `base`.
fn fifth_bits_at(base: u32, cols: u32, block: u32) -> u32 {
    return base + cols / 8u + block;
}

// Words of one row of `cols` values (cols a multiple of 32 when quantized).
fn row_words(cols: u32) -> u32 {
    switch DTYPE {
        case 2u: { return cols; }
        case 3u, 4u, 5u: { return quant_words(cols) + (cols / 32u + 7u) / 8u * 4u; }
        case 6u: { return quant_words(cols) + cols / 64u; }
        case 7u: { return quant_words(cols) + (cols / 256u * 5u + 3u) / 4u * 4u; }
        default: { return cols / 2u; }
    }
}

// The scale of `block` from the word holding it and its neighbour (even blocks low).
fn pick_scale(word: u32, block: u32) -> f32 {
    let pair = unpack2x16float(word);
    return select(pair.x, pair.y, (block & 1u) == 1u);
}
