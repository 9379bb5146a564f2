// SwiGLU activation, in place: gate[i] = silu(gate[i]) * up[i].
struct Shape {
    cols: u32,       // intermediate
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}
@group(0) @binding(0) var<uniform> shape: Shape;
@group(0) @binding(1) var<storage, read_write> gate: array<f32>;  // [M, intermediate]
@group(0) @binding(2) var<storage, read> up: array<f32>;          // [M, intermediate]

// One thread per (token, column); the grid's y is exactly M.
// Threads per workgroup, set by the Rust side (whose grid arithmetic reads the same constant).
override WORKGROUP: u32;
@compute @workgroup_size(WORKGROUP)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    if gid.x >= shape.cols {
        return;
    }
    let i = gid.y * shape.cols + gid.x;
    let g = gate[i];
    // exp's argument capped: past about 88 it is infinite, which a GPU's float controls may
    // assume away (silu there is 0 either way).
    gate[i] = g / (1.0 + exp(min(-g, 80.0))) * up[i];
}
