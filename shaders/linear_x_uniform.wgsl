// linear.wgsl's x through a uniform binding of 64 KiB (WebGPU's default most for one): a
// window of x, [rows, K] from row `window.first_row` on, the rest unread. lavapipe loads a
// storage value lane by lane, each load a bounds-checked scalar load of its own, but a uniform
// value at an offset the same for every invocation once for all: x is such a value in a
// decode step, where every invocation reads the same x against weight rows of its own, and in
// a prefill's block of token rows, taken from the workgroup's id (see linear_blocks.wgsl).
// The window is bound at a dynamic offset (whole multiples of the device's alignment), one
// dispatch per window: `window` at the matching record of a table of them.
@group(0) @binding(2) var<uniform> x: array<vec4<f32>, 4096>;

struct Window {
    first_row: u32,    // the first token row of the dispatch
    first_value: u32,  // the value of x (row-major [M, K]) at the window's start
}
@group(0) @binding(7) var<uniform> window: Window;

fn x_first_row() -> u32 {
    return window.first_row;
}
fn x_first_value() -> u32 {
    return window.first_value;
}
