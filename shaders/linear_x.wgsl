// linear.wgsl's x as a storage buffer: [M, K] row-major, a vec4 of values per element.
@group(0) @binding(2) var<storage, read> x: array<vec4<f32>>;

// The first token row a dispatch computes, and the value of x at which the binding starts:
// the whole of x, from row 0.
fn x_first_row() -> u32 {
    return 0u;
}
fn x_first_value() -> u32 {
    return 0u;
}
