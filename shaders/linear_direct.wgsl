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
    for (var i = 0u; i < BLOCK_M; i++) {
        for (var j = 0u; j < 4u; j++) {
            store(m0 + i, n0 + j, acc[i][j]);
        }
    }
}
