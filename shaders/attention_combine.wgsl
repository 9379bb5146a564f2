// Decode attention, second pass: merges the chunks written by attention_split.wgsl. With m_s,
// l_s and o_s the maximum score, sum of exp(score - m_s) and unnormalised output of chunk s,
// and m the largest m_s: out = sum_s exp(m_s - m) o_s / sum_s exp(m_s - m) l_s.
@group(0) @binding(1) var<storage, read> token_meta: array<vec2<u32>>;  // [M]: (cache row base, position)
@group(0) @binding(2) var<storage, read> partial: array<f32>;        // [M, heads, splits, D + 2]
@group(0) @binding(3) var<storage, read_write> out: array<f32>;      // [M, heads * D]

override CHUNK: u32;  // keys per chunk of attention_split.wgsl (set by the Rust side)

// Workgroup (head, token); every thread reads the statistics, then writes its dimensions.
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) tid: u32) {
    let h = wg.x;
    let t = wg.y;
    let d = shape.head_dim;
    let chunks = (token_meta[t].y + 1u + CHUNK - 1u) / CHUNK;
    let first = (t * shape.heads + h) * shape.splits * (d + 2u);
    var m = -3.4e38;
    for (var s = 0u; s < chunks; s++) {
        m = max(m, partial[first + s * (d + 2u) + d]);
    }
    var total = 0.0;
    for (var s = 0u; s < chunks; s++) {
        let at = first + s * (d + 2u);
        total += exp(partial[at + d] - m) * partial[at + d + 1u];
    }
    for (var i = tid; i < d; i += 64u) {
        var o = 0.0;
        for (var s = 0u; s < chunks; s++) {
            let at = first + s * (d + 2u);
            o = fma(exp(partial[at + d] - m), partial[at + i], o);
        }
        out[(t * shape.heads + h) * d + i] = o / total;
    }
}
