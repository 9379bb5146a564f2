// Reads a packed matrix two values at a time; see packed.wgsl, which must come first. The
// kernel declares the matrix and `fn weight_word(i: u32) -> u32`, its word i.

// Values 2p and 2p+1 of the row starting at word `base` (row * row_words(cols)) of a matrix of
// `cols` columns (even; a multiple of 32 when quantized).
fn weight_pair_at(base: u32, p: u32, cols: u32) -> vec2<f32> {
    switch DTYPE {
        case 2u: {
            return vec2<f32>(bitcast<f32>(weight_word(base + 2u * p)), bitcast<f32>(weight_word(base + 2u * p + 1u)));
        }
        case 3u: {
            let v = 2u * p;
            let q = unpack_q8(weight_word(base + v / 4u));
            let d = pick_scale(weight_word(base + quant_words(cols) + v / 64u), v / 32u);
            return select(q.xy, q.zw, (v & 2u) == 2u) * d;
        }
        case 4u, 5u: {
            let v = 2u * p;
            let word = weight_word(base + v / 8u) >> (4u * (v % 8u));
            var q = vec2<u32>(word & 15u, (word >> 4u) & 15u);
            var zero = 8.0;
            if DTYPE == 5u {
                let fifth = weight_word(fifth_bits_at(base, cols, v / 32u)) >> (v % 32u);
                q |= (vec2<u32>(fifth, fifth >> 1u) & vec2<u32>(1u)) << vec2<u32>(4u);
                zero = 16.0;
            }
            let d = pick_scale(weight_word(base + quant_words(cols) + v / 64u), v / 32u);
            return (vec2<f32>(q) - zero) * d;
        }
        case 6u: {
            let v = 2u * p;
            let word = weight_word(base + v / 8u) >> (4u * (v % 8u));
            let q = vec2<f32>(f32(word & 15u), f32((word >> 4u) & 15u));
            let head = base + quant_words(cols) + v / 256u * 4u;
            let dm = q4k_scale_min(vec4<u32>(weight_word(head), weight_word(head + 1u), weight_word(head + 2u), weight_word(head + 3u)), v / 32u % 8u);
            return q * dm.x - dm.y;
        }
        case 7u: {
            let v = 2u * p;
            let word = weight_word(base + v / 8u) >> (4u * (v % 8u));
            let high = weight_word(base + cols / 8u + v / 16u) >> (2u * (v % 16u));
            let q = vec2<u32>(word & 15u, (word >> 4u) & 15u) | ((vec2<u32>(high, high >> 2u) & vec2<u32>(3u)) << vec2<u32>(4u));
            let head = base + quant_words(cols) + v / 256u * 5u;
            let t = v % 256u / 16u;
            return (vec2<f32>(q) - 32.0) * q6k_scale(weight_word(head + t / 4u), weight_word(head + 4u), t);
        }
        default: {
            return unpack_word(weight_word(base + p));
        }
    }
}

// Values 2p and 2p+1 of row `row`.
fn weight_pair(row: u32, p: u32, cols: u32) -> vec2<f32> {
    return weight_pair_at(row * row_words(cols), p, cols);
}
