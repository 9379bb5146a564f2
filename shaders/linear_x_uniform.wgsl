// linear.wgsl's x through a uniform binding of 64 KiB (WebGPU's default most for one): a
// window of x, token rows from `window.first_row` on, the rest unread. lavapipe loads a
// storage value lane by lane, each load a bounds-checked scalar load of its own, but a uniform
// value at an offset the same for every invocation once for all: x is such a value in a
// decode step, where every invocation reads the same x against weight rows of its own, and in
// a prefill's block of token rows, taken from the workgroup's id (see linear_blocks.wgsl).
// The window is bound at a dynamic offset, one dispatch per window, `window` at the matching
// record of a table of them; the offset is the window's first value rounded down to the
// device's alignment (x_window_start, which the Rust side computes alike).
@group(0) @binding(2) var<uniform> x: array<vec4<f32>, 4096>;

// Columns per part where x is in parts (linear.wgsl's Y_PART: [P][M][X_PART]), else 0 (x is
// [M, K]). A row of K values too long for a window of token rows is read a part at a time,
// each part's dot products added to the output (the Rust side's dispatches).
override X_PART: u32 = 0u;

struct Window {
    first_row: u32,  // the first token row of the dispatch
    part: u32,       // the part of x it reads (0 where x is whole)
    align: u32,      // values per step of the dynamic offset
}
@group(0) @binding(7) var<uniform> window: Window;

fn x_first_row() -> u32 {
    return window.first_row;
}
fn x_cols() -> u32 {
    if X_PART > 0u {
        return X_PART;
    }
    return shape.k;
}
fn x_first_col() -> u32 {
    return window.part * X_PART;
}
// The value of x at which the binding starts.
fn x_window_start() -> u32 {
    return (window.part * tokens.m + window.first_row) * x_cols() / window.align * window.align;
}
fn x_row_at(row: u32) -> u32 {
    return (window.part * tokens.m + row) * x_cols() - x_window_start();
}
