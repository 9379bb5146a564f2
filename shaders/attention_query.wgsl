// A query read as RoPE applies to it (rotary.wgsl), a vec4 at a time: prepended to the GPU
// attention kernels (attention, attention_split, attention_grouped), which declare q ([M,
// q_stride], before RoPE).

// Values 4c .. 4c + 3 of the query head whose values start at `at` in q, rotated for position
// pos; zero past D.
fn query_quad(at: u32, c: u32, pos: u32) -> vec4<f32> {
    return vec4<f32>(query_value(at, 4u * c, pos), query_value(at, 4u * c + 1u, pos),
        query_value(at, 4u * c + 2u, pos), query_value(at, 4u * c + 3u, pos));
}

fn query_value(at: u32, i: u32, pos: u32) -> f32 {
    let d = shape.head_dim;
    if i >= d {
        return 0.0;
    }
    return rotary(q[at + i], q[at + rotary_partner(i, d)], i, d, pos);
}
