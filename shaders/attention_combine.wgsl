// Decode attention, second pass: merges the chunks written by attention_split.wgsl. With m_s,
// l_s and o_s the maximum score, sum of exp(score - m_s) and unnormalised output of chunk s,
// and m the largest m_s: out = sum_s exp(m_s - m) o_s / sum_s exp(m_s - m) l_s.
// The threads read the chunks' statistics side by side and reduce them (workgroup_reduce.wgsl),
// and each output dim reads four chunks at a time: on a GPU every read in a chain is a memory
// latency, and a decode step runs few workgroups to hide it.
@group(0) @binding(1) var<storage, read> token_meta: array<vec2<u32>>;  // [M]: (cache row base, position)
@group(0) @binding(2) var<storage, read> partial: array<f32>;        // [M, heads, splits, D + 2]
@group(0) @binding(3) var<storage, read_write> out: array<f32>;      // [M, heads * D]

override CHUNK: u32;  // keys per chunk of attention_split.wgsl (set by the Rust side)

// Workgroup (head, token).
@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) tid: u32) {
    let h = wg.x;
    let t = wg.y;
    let d = shape.head_dim;
    let stride = d + 2u;
    let chunks = (token_meta[t].y + 1u + CHUNK - 1u) / CHUNK;
    let first = (t * shape.heads + h) * shape.splits * stride;
    var local_max = -3.4e38;
    for (var s = tid; s < chunks; s += WG) {
        local_max = max(local_max, partial[first + s * stride + d]);
    }
    let m = reduce(local_max, tid, true);
    var local_total = 0.0;
    for (var s = tid; s < chunks; s += WG) {
        let at = first + s * stride;
        local_total += exp(partial[at + d] - m) * partial[at + d + 1u];
    }
    let scale = 1.0 / reduce(local_total, tid, false);
    for (var i = tid; i < d; i += WG) {
        var o = 0.0;
        var s = 0u;
        for (; s + 4u <= chunks; s += 4u) {
            let at = first + s * stride;
            let weights = exp(vec4<f32>(partial[at + d], partial[at + stride + d], partial[at + 2u * stride + d],
                partial[at + 3u * stride + d]) - m);
            let values = vec4<f32>(partial[at + i], partial[at + stride + i], partial[at + 2u * stride + i],
                partial[at + 3u * stride + i]);
            o += dot(weights, values);
        }
        for (; s < chunks; s++) {
            let at = first + s * stride;
            o = fma(exp(partial[at + d] - m), partial[at + i], o);
        }
        out[(t * shape.heads + h) * d + i] = o * scale;
    }
}
