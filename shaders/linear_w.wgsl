// linear.wgsl's w as a storage buffer: [N, K] packed, a vec4 of words per element.
@group(0) @binding(3) var<storage, read> w: array<vec4<u32>>;

// Words 4i .. 4i + 3 of w.
fn weight_load(i: u32) -> vec4<u32> {
    return w[i];
}
