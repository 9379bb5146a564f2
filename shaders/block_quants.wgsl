// What the CPU-like linear kernels (linear_direct.wgsl, linear_blocks.wgsl) share: eight
// products with four weight rows at once, and a quantized block's quants as they read them;
// after packed.wgsl (DTYPE) and linear_w.wgsl or linear_w_texture.wgsl (w).

// Token row values lo (4) and hi (the next 4) times 8 values of each of four weight rows.
fn four_rows(lo: vec4<f32>, hi: vec4<f32>, w0: array<vec4<f32>, 2>, w1: array<vec4<f32>, 2>,
    w2: array<vec4<f32>, 2>, w3: array<vec4<f32>, 2>) -> vec4<f32> {
    return vec4<f32>(
        dot(lo, w0[0]) + dot(hi, w0[1]),
        dot(lo, w1[0]) + dot(hi, w1[1]),
        dot(lo, w2[0]) + dot(hi, w2[1]),
        dot(lo, w3[0]) + dot(hi, w3[1]),
    );
}

// The quants of block b (32 values) of the row starting at word `base`, 16 bytes a load:
// Q8_0's 8 words, or the 4 words of nibbles of the other formats (then `.y` is unused), and in
// `high` the block's extra bits: Q5_0's word of fifth bits, Q6_K's two words of high 2 bits.
struct BlockQuants {
    lo: vec4<u32>,
    hi: vec4<u32>,
    high: vec2<u32>,
}

fn block_quants(base: u32, b: u32) -> BlockQuants {
    var q: BlockQuants;
    if DTYPE == 3u {
        q.lo = weight_load(base / 4u + 2u * b);
        q.hi = weight_load(base / 4u + 2u * b + 1u);
        return q;
    }
    q.lo = weight_load(base / 4u + b);
    q.high = block_high_bits(base, b);
    return q;
}

// Values 8e .. 8e + 7 of a block's quants (e < 4), unscaled.
fn quant_eight(q: BlockQuants, e: u32) -> array<vec4<f32>, 2> {
    if DTYPE == 3u {
        let pair = select(q.lo, q.hi, e >= 2u);
        let words = select(pair.xy, pair.zw, e % 2u == 1u);
        return array(unpack_q8(words.x), unpack_q8(words.y));
    }
    let word = q.lo[e];
    if DTYPE == 6u {
        return array(unpack_nibbles_lo(word), unpack_nibbles_hi(word));
    }
    if DTYPE == 5u {
        let high = q.high.x >> (8u * e);
        return array(unpack_q5_lo(word, high), unpack_q5_hi(word, high));
    }
    if DTYPE == 7u {
        let high = q.high[e / 2u] >> (16u * (e % 2u));
        return array(unpack_q6_lo(word, high), unpack_q6_hi(word, high));
    }
    return array(unpack_q4_lo(word), unpack_q4_hi(word));
}
