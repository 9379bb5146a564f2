// Causal GQA attention for CPU-like devices (lavapipe, SwiftShader), prefill and decode alike:
// one invocation per (token, query head) walks the token's keys with an online softmax, straight
// from memory. No workgroup memory and no barriers: a CPU runs a workgroup's invocations as the
// SIMD lanes of one thread, where a barrier costs a pass over every lane and its caches already
// keep the token's keys close. A workgroup is WORKGROUP query heads of one token, so its lanes
// share the token's length (no divergence) and, within a GQA group, its key and value rows.
// Keys and values are read 16 bytes at a time (a CPU counts loads, not bytes). RoPE is applied
// to the query as it is read (rotary.wgsl); the cached keys have it already.
@group(0) @binding(1) var<storage, read> token_meta: array<vec2<u32>>;     // [M]: (cache row base, position)
@group(0) @binding(2) var<storage, read> q: array<f32>;              // [M, q_stride], before RoPE
@group(0) @binding(3) var<storage, read> k_cache: array<vec4<f32>>;  // [rows, kv_heads * D]
@group(0) @binding(4) var<storage, read> v_cache: array<vec4<f32>>;  // [rows, kv_heads * D]
@group(0) @binding(5) var<storage, read_write> out: array<f32>;      // [M, heads * D]
@group(0) @binding(6) var<storage, read> inv_freq: array<f32>;       // [D / 2] (rotary.wgsl)

override WORKGROUP: u32;  // query heads per workgroup (set by the Rust side)
// D / 16 rounded up (set by the Rust side): steps of 4 quads through a key or value row. lavapipe
// ends an invocation's loops after 65,535 passes in all (llvmpipe's loop limiter; a loop's exit
// test is a pass too), silently: the Rust side keeps a token's keys times the passes per key
// within that (AttentionDims::direct_takes), which steps of 4 quads make about 3 times fewer.
override STEPS: u32;
const MAX_QUADS: u32 = 64u;    // 4 STEPS at most, for D <= 256

// Values at .. at + 3 of the key (value) cache: one 16-byte load where D is a multiple of 4 (so
// is every row and head offset), else value by value. Where D is not a multiple of 16 the last
// step reaches past the head (into the next one, the next row, or past the buffer's end, where
// WebGPU's bounds checks return a value from within it): the query is zero there, and those
// output values are never written.
fn key_quad(at: u32) -> vec4<f32> {
    if shape.head_dim % 4u == 0u {
        return k_cache[at / 4u];
    }
    return vec4<f32>(k_cache[at / 4u][at % 4u], k_cache[(at + 1u) / 4u][(at + 1u) % 4u],
        k_cache[(at + 2u) / 4u][(at + 2u) % 4u], k_cache[(at + 3u) / 4u][(at + 3u) % 4u]);
}
fn value_quad(at: u32) -> vec4<f32> {
    if shape.head_dim % 4u == 0u {
        return v_cache[at / 4u];
    }
    return vec4<f32>(v_cache[at / 4u][at % 4u], v_cache[(at + 1u) / 4u][(at + 1u) % 4u],
        v_cache[(at + 2u) / 4u][(at + 2u) % 4u], v_cache[(at + 3u) / 4u][(at + 3u) % 4u]);
}

// Workgroup (a block of WORKGROUP heads, token); invocation: one head.
@compute @workgroup_size(WORKGROUP)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lane: u32) {
    let h = wg.x * WORKGROUP + lane;
    let t = wg.y;
    if h >= shape.heads {
        return;
    }
    let d = shape.head_dim;
    let kv_width = shape.kv_heads * d;
    let kv_off = (h / (shape.heads / shape.kv_heads)) * d;
    let base = token_meta[t].x;
    let pos = token_meta[t].y;
    let q0 = t * shape.q_stride + h * d;
    let scale = inverseSqrt(f32(d));
    var query: array<vec4<f32>, MAX_QUADS>;  // pre-scaled by 1 / sqrt(D); zero past D
    for (var i = 0u; i < 16u * STEPS; i++) {
        var v = 0.0;
        if i < d {
            v = rotary(q[q0 + i], q[q0 + rotary_partner(i, d)], i, d, pos) * scale;
        }
        query[i / 4u][i % 4u] = v;
    }
    var acc: array<vec4<f32>, MAX_QUADS>;
    var run_max = -3.4e38;
    var run_sum = 0.0;
    for (var j = 0u; j <= pos; j++) {
        let row = (base + j) * kv_width + kv_off;
        // Four quads a step: past D the query is zero, and those sums are never written.
        var s = 0.0;
        for (var u = 0u; u < STEPS; u++) {
            let c = 4u * u;
            s += dot(query[c], key_quad(row + 4u * c)) + dot(query[c + 1u], key_quad(row + 4u * c + 4u))
                + dot(query[c + 2u], key_quad(row + 4u * c + 8u)) + dot(query[c + 3u], key_quad(row + 4u * c + 12u));
        }
        let new_max = max(run_max, s);
        let rescale = exp(run_max - new_max);
        let p = exp(s - new_max);
        run_sum = run_sum * rescale + p;
        run_max = new_max;
        for (var u = 0u; u < STEPS; u++) {
            let c = 4u * u;
            acc[c] = acc[c] * rescale + p * value_quad(row + 4u * c);
            acc[c + 1u] = acc[c + 1u] * rescale + p * value_quad(row + 4u * c + 4u);
            acc[c + 2u] = acc[c + 2u] * rescale + p * value_quad(row + 4u * c + 8u);
            acc[c + 3u] = acc[c + 3u] * rescale + p * value_quad(row + 4u * c + 12u);
        }
    }
    let o = (t * shape.heads + h) * d;
    for (var i = 0u; i < d; i++) {
        out[o + i] = acc[i / 4u][i % 4u] / run_sum;
    }
}
