// Linear layer (interface in linear.wgsl) for CPU-like devices (lavapipe, SwiftShader), prefill
// and decode alike: each invocation computes a BLOCK_M x 4 block straight from memory. No
// workgroup memory and no barriers: a CPU runs a workgroup's invocations as SIMD lanes of one
// thread, where barriers are expensive and its caches already do what workgroup tiles do on a GPU.
// A CPU also makes each lane's load of a storage buffer a load of its own, bounds-checked, so the
// count of loads sets the pace more than their bytes: weights and x are read 16 bytes at a time
// wherever rows allow it (16-bit rows with K a multiple of 8; quantized rows' x).
// Token rows per invocation: 4 for prefill; 1 for single-sequence decode, where a block of 4
// would compute the one token four times over.
override BLOCK_M: u32 = 4u;
// Invocations per workgroup (set by the Rust side, whose grid arithmetic reads the same
// constant). Small, so that a layer of few rows still spreads over every CPU thread.
override WORKGROUP: u32;

// gid.x: a block of 4 weight rows; gid.y: a block of BLOCK_M token rows.
@compute @workgroup_size(WORKGROUP)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let n0 = gid.x * 4u;
    let m0 = gid.y * BLOCK_M;
    if n0 >= shape.n || m0 >= tokens.m {
        return;
    }
    // Rows past the end read the last row (in bounds, branch-free); their results are dropped.
    var wrow: array<u32, 4>;  // first word of each weight row
    var xrow: array<u32, 4>;  // first value of each token row
    for (var i = 0u; i < 4u; i++) {
        wrow[i] = min(n0 + i, shape.n - 1u) * row_words(shape.k);
    }
    for (var i = 0u; i < BLOCK_M; i++) {
        xrow[i] = min(m0 + i, tokens.m - 1u) * shape.k;
    }
    var acc: array<vec4<f32>, 4>;  // acc[i][j]: token m0 + i, weight row n0 + j
    if DTYPE >= 3u {
        acc = quantized_dot(wrow, xrow);
    } else if DTYPE < 2u && shape.k % 8u == 0u {
        acc = wide_dot(wrow, xrow);
    } else {
        acc = pair_dot(wrow, xrow);
    }
    for (var i = 0u; i < BLOCK_M; i++) {
        for (var j = 0u; j < 4u; j++) {
            store(m0 + i, n0 + j, acc[i][j]);
        }
    }
}

// 16-bit rows with K a multiple of 8 (16-byte aligned rows): 8 values of each weight row and of
// each token row per step, one load each.
fn wide_dot(wrow: array<u32, 4>, xrow: array<u32, 4>) -> array<vec4<f32>, 4> {
    var acc: array<vec4<f32>, 4>;
    for (var q = 0u; q < shape.k / 8u; q++) {
        let w0 = unpack_eight(weight_load(wrow[0] / 4u + q));
        let w1 = unpack_eight(weight_load(wrow[1] / 4u + q));
        let w2 = unpack_eight(weight_load(wrow[2] / 4u + q));
        let w3 = unpack_eight(weight_load(wrow[3] / 4u + q));
        for (var i = 0u; i < BLOCK_M; i++) {
            let at = (xrow[i] + 8u * q) / 4u;
            acc[i] += four_rows(x[at], x[at + 1u], w0, w1, w2, w3);
        }
    }
    return acc;
}

// Any float rows (f32, or K not a multiple of 8): two values a step, read by the word.
fn pair_dot(wrow: array<u32, 4>, xrow: array<u32, 4>) -> array<vec4<f32>, 4> {
    var acc: array<vec4<f32>, 4>;
    for (var p = 0u; p < shape.k / 2u; p++) {
        let w0 = weight_pair_at(wrow[0], p, shape.k);
        let w1 = weight_pair_at(wrow[1], p, shape.k);
        let w2 = weight_pair_at(wrow[2], p, shape.k);
        let w3 = weight_pair_at(wrow[3], p, shape.k);
        for (var i = 0u; i < BLOCK_M; i++) {
            let xv = vec2<f32>(x_value(xrow[i] + 2u * p), x_value(xrow[i] + 2u * p + 1u));
            acc[i] += vec4<f32>(dot(xv, w0), dot(xv, w1), dot(xv, w2), dot(xv, w3));
        }
    }
    return acc;
}

// Quantized rows, a block of 32 values loaded at a time and used 8 values a step; each row's block scale (and Q4_K min, or Q6_K second scale)
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
        let q0 = block_quants(wrow[0], b);
        let q1 = block_quants(wrow[1], b);
        let q2 = block_quants(wrow[2], b);
        let q3 = block_quants(wrow[3], b);
        for (var e = 0u; e < 4u; e++) {
            let v = 32u * b + 8u * e;
            var scale = d;
            if DTYPE == 7u && e >= 2u {
                scale = second;
            }
            let w0 = quant_eight(q0, e);
            let w1 = quant_eight(q1, e);
            let w2 = quant_eight(q2, e);
            let w3 = quant_eight(q3, e);
            for (var i = 0u; i < BLOCK_M; i++) {
                let at = (xrow[i] + v) / 4u;  // K is whole blocks of 32: 16-byte aligned
                let lo = x[at];
                let hi = x[at + 1u];
                acc[i] += four_rows(lo, hi, w0, w1, w2, w3) * scale;
                if DTYPE == 6u {
                    acc[i] -= second * dot(lo + hi, vec4<f32>(1.0));
                }
            }
        }
    }
    return acc;
}
