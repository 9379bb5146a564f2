// Linear layer (interface in linear.wgsl) for CPU-like devices (lavapipe, SwiftShader), prefill
// and decode alike: each invocation computes a 4 x 4 block straight from memory. No workgroup
// memory and no barriers: a CPU runs a workgroup's invocations as SIMD lanes of one thread,
// where barriers are expensive and its caches already do what workgroup tiles do on a GPU.
@group(0) @binding(2) var<storage, read> x: array<vec2<f32>>;      // [M, K / 2]
@group(0) @binding(3) var<storage, read> w: array<u32>;            // [N, K] packed

// Token rows per invocation: 4 for prefill; 1 for single-sequence decode, where a block of 4
// would compute the one token four times over.
override BLOCK_M: u32 = 4u;

// gid.x: a block of 4 weight rows; gid.y: a block of BLOCK_M token rows.
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let n0 = gid.x * 4u;
    let m0 = gid.y * BLOCK_M;
    if n0 >= shape.n || m0 >= tokens.m {
        return;
    }
    let kp = shape.k / 2u;
    // Rows past the end read the last row (in bounds, branch-free); their results are dropped.
    var wrow: array<u32, 4>;  // first word of each weight row
    var xrow: array<u32, 4>;
    for (var i = 0u; i < 4u; i++) {
        wrow[i] = min(n0 + i, shape.n - 1u) * row_words(shape.k);
    }
    for (var i = 0u; i < BLOCK_M; i++) {
        xrow[i] = min(m0 + i, tokens.m - 1u) * kp;
    }
    var acc: array<vec4<f32>, 4>;  // acc[i][j]: token m0 + i, weight row n0 + j
    if DTYPE >= 3u {
        acc = quantized_dot(wrow, xrow);
    } else {
        for (var p = 0u; p < kp; p++) {
            let w0 = weight_pair_at(wrow[0], p, shape.k);
            let w1 = weight_pair_at(wrow[1], p, shape.k);
            let w2 = weight_pair_at(wrow[2], p, shape.k);
            let w3 = weight_pair_at(wrow[3], p, shape.k);
            for (var i = 0u; i < BLOCK_M; i++) {
                let xv = x[xrow[i] + p];
                acc[i] += vec4<f32>(dot(xv, w0), dot(xv, w1), dot(xv, w2), dot(xv, w3));
            }
        }
    }
    for (var i = 0u; i < BLOCK_M; i++) {
        for (var j = 0u; j < 4u; j++) {
            store(m0 + i, n0 + j, acc[i][j]);
        }
    }
}

// Eight quants of the row starting at word `base`, from value v (a multiple of 8): two Q8_0
// words, or one Q4_0 or Q4_K word, or one Q5_0 or Q6_K word with its high bits, unscaled.
fn quant_eight(base: u32, v: u32) -> array<vec4<f32>, 2> {
    if DTYPE == 3u {
        return array(unpack_q8(w[base + v / 4u]), unpack_q8(w[base + v / 4u + 1u]));
    }
    let word = w[base + v / 8u];
    if DTYPE == 6u {
        return array(unpack_nibbles_lo(word), unpack_nibbles_hi(word));
    }
    if DTYPE == 5u {
        let high = w[fifth_bits_at(base, shape.k, v / 32u)] >> (v % 32u);
        return array(unpack_q5_lo(word, high), unpack_q5_hi(word, high));
    }
    if DTYPE == 7u {
        let high = w[base + shape.k / 8u + v / 16u] >> (2u * (v % 16u));
        return array(unpack_q6_lo(word, high), unpack_q6_hi(word, high));
    }
    return array(unpack_q4_lo(word), unpack_q4_hi(word));
}

// The scale and min of block b of the row starting at word `base` (min 0 but for Q4_K; for
// Q6_K, the scales times d of the block's two halves of 16).
fn block_scale_min(base: u32, b: u32) -> vec2<f32> {
    if DTYPE == 7u {
        let head = base + quant_words(shape.k) + b / 8u * 5u;
        let t = 2u * (b % 8u);
        return vec2<f32>(q6k_scale(w[head + t / 4u], w[head + 4u], t), q6k_scale(w[head + t / 4u], w[head + 4u], t + 1u));
    }
    if DTYPE == 6u {
        let head = base + quant_words(shape.k) + b / 8u * 4u;
        return q4k_scale_min(vec4<u32>(w[head], w[head + 1u], w[head + 2u], w[head + 3u]), b % 8u);
    }
    return vec2<f32>(pick_scale(w[base + quant_words(shape.k) + b / 2u], b), 0.0);
}

// Quantized rows, 8 values a step; each row's block scale (and Q4_K min, or Q6_K second scale)
// is read once per block of 32 and applies to the four rows' dot products at once (not a
// lookup per value pair).
fn quantized_dot(wrow: array<u32, 4>, xrow: array<u32, 4>) -> array<vec4<f32>, 4> {
    var acc: array<vec4<f32>, 4>;
    for (var b = 0u; b < shape.k / 32u; b++) {
        let s0 = block_scale_min(wrow[0], b);
        let s1 = block_scale_min(wrow[1], b);
        let s2 = block_scale_min(wrow[2], b);
        let s3 = block_scale_min(wrow[3], b);
        let d = vec4<f32>(s0.x, s1.x, s2.x, s3.x);
        let second = vec4<f32>(s0.y, s1.y, s2.y, s3.y);  // Q4_K: the mins; Q6_K: the second 16's scales
        for (var v = 32u * b; v < 32u * b + 32u; v += 8u) {
            var scale = d;
            if DTYPE == 7u && v >= 32u * b + 16u {
                scale = second;
            }
            let w0 = quant_eight(wrow[0], v);
            let w1 = quant_eight(wrow[1], v);
            let w2 = quant_eight(wrow[2], v);
            let w3 = quant_eight(wrow[3], v);
            for (var i = 0u; i < BLOCK_M; i++) {
                let at = xrow[i] + v / 2u;  // x holds pairs
                let lo = vec4<f32>(x[at], x[at + 1u]);
                let hi = vec4<f32>(x[at + 2u], x[at + 3u]);
                acc[i] += vec4<f32>(
                    dot(lo, w0[0]) + dot(hi, w0[1]),
                    dot(lo, w1[0]) + dot(hi, w1[1]),
                    dot(lo, w2[0]) + dot(hi, w2[1]),
                    dot(lo, w3[0]) + dot(hi, w3[1]),
                ) * scale;
                if DTYPE == 6u {
                    acc[i] -= second * dot(lo + hi, vec4<f32>(1.0));
                }
            }
        }
    }
    return acc;
}
