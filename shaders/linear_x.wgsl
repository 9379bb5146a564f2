// linear.wgsl's x as a storage buffer: [M, K] row-major, a vec4 of values per element.
@group(0) @binding(2) var<storage, read> x: array<vec4<f32>>;

// What a dispatch reads of x (the functions linear_x_uniform.wgsl defines for its windows): all
// of it, from token row 0; token row `row` starts at x_row_at(row) in the binding, and holds
// x_cols() values, columns x_first_col() on of the weights.
fn x_first_row() -> u32 {
    return 0u;
}
fn x_row_at(row: u32) -> u32 {
    return row * shape.k;
}
fn x_cols() -> u32 {
    return shape.k;
}
fn x_first_col() -> u32 {
    return 0u;
}
