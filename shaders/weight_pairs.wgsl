// Reads a packed matrix `w: array<u32>` (declared by the kernel) two values at a time; see
// packed.wgsl, which must come first.

// Values 2p and 2p+1 of the row starting at word `base` (row * row_words(cols)) of a matrix of
// `cols` columns (even; a multiple of 32 when quantized).
fn weight_pair_at(base: u32, p: u32, cols: u32) -> vec2<f32> {
    switch DTYPE {
        case 2u: {
            return vec2<f32>(bitcast<f32>(w[base + 2u * p]), bitcast<f32>(w[base + 2u * p + 1u]));
        }
        case 3u: {
            let v = 2u * p;
            let q = unpack_q8(w[base + v / 4u]);
            let d = pick_scale(w[base + quant_words(cols) + v / 64u], v / 32u);
            return select(q.xy, q.zw, (v & 2u) == 2u) * d;
        }
        case 4u, 5u: {
            let v = 2u * p;
            let word = w[base + v / 8u] >> (4u * (v % 8u));
            var q = vec2<u32>(word & 15u, (word >> 4u) & 15u);
            var zero = 8.0;
            if DTYPE == 5u {
                let fifth = w[fifth_bits_at(base, cols, v / 32u)] >> (v % 32u);
                q |= (vec2<u32>(fifth, fifth >> 1u) & vec2<u32>(1u)) << vec2<u32>(4u);
                zero = 16.0;
            }
            let d = pick_scale(w[base + quant_words(cols) + v / 64u], v / 32u);
            return (vec2<f32>(q) - zero) * d;
        }
        case 6u: {
            let v = 2u * p;
            let word = w[base + v / 8u] >> (4u * (v % 8u));
            let q = vec2<f32>(f32(word & 15u), f32((word >> 4u) & 15u));
            let head = base + quant_words(cols) + v / 256u * 4u;
            let dm = q4k_scale_min(vec4<u32>(w[head], w[head + 1u], w[head + 2u], w[head + 3u]), v / 32u % 8u);
            return q * dm.x - dm.y;
        }
        case 7u: {
            let v = 2u * p;
            let word = w[base + v / 8u] >> (4u * (v % 8u));
            let high = w[base + cols / 8u + v / 16u] >> (2u * (v % 16u));
            let q = vec2<u32>(word & 15u, (word >> 4u) & 15u) | ((vec2<u32>(high, high >> 2u) & vec2<u32>(3u)) << vec2<u32>(4u));
            let head = base + quant_words(cols) + v / 256u * 5u;
            let t = v % 256u / 16u;
            return (vec2<f32>(q) - 32.0) * q6k_scale(w[head + t / 4u], w[head + 4u], t);
        }
        default: {
            return unpack_word(w[base + p]);
        }
    }
}

// Values 2p and 2p+1 of row `row`.
fn weight_pair(row: u32, p: u32, cols: u32) -> vec2<f32> {
    return weight_pair_at(row * row_words(cols), p, cols);
}
