// Decode attention, second pass: merges the chunks written by attention_split.wgsl. With m_s,
// l_s and o_s the maximum score, sum of exp(score - m_s) and unnormalised output of chunk s,
// and m the largest m_s: out = sum_s exp(m_s - m) o_s / sum_s exp(m_s - m) l_s.
// The threads read the chunks' statistics side by side and reduce them (workgroup_reduce.wgsl),
// and each output dim reads four chunks at a time, with no serial tail: on a GPU every read in
// a chain is a memory latency, and a decode step runs few workgroups to hide it.
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
    // Four chunks at a time, all their loads in flight; past the last chunk a slot rereads it
    // at weight zero, so a context of a few chunks takes one round, not a serial tail.
    let last = vec4<u32>(chunks - 1u);
    let lane = vec4<u32>(0u, 1u, 2u, 3u);
    for (var i = tid; i < d; i += WG) {
        var o = 0.0;
        for (var s = 0u; s < chunks; s += 4u) {
            let chunk = vec4<u32>(s) + lane;
            let at = vec4<u32>(first) + min(chunk, last) * stride;
            let scores = vec4<f32>(partial[at.x + d], partial[at.y + d], partial[at.z + d], partial[at.w + d]);
            let weights = select(vec4<f32>(0.0), exp(scores - m), chunk < vec4<u32>(chunks));
            let values = vec4<f32>(partial[at.x + i], partial[at.y + i], partial[at.z + i], partial[at.w + i]);
            o += dot(weights, values);
        }
        out[(t * shape.heads + h) * d + i] = o * scale;
    }
}
