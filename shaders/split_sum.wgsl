// Split-K's second pass (interface in linear.wgsl): adds up the shape.splits partial dot products
// that matmul's SPLIT pass wrote for each (token, weight row), then stores the sum as a linear
// layer does (bias, and with ACCUMULATE added to y). x is bound to the partials,
// [splits, M, N] row-major.

// Threads per workgroup, set by the Rust side (whose grid arithmetic reads the same constant).
override WORKGROUP: u32;

// One thread per (token, weight row): neighbouring threads read neighbouring partials.
@compute @workgroup_size(WORKGROUP)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let n = gid.x;
    let m = gid.y;
    if n >= shape.n || m >= tokens.m {
        return;
    }
    var sum = 0.0;
    for (var s = 0u; s < shape.splits; s++) {
        sum += x_value((s * tokens.m + m) * shape.n + n);
    }
    store(m, n, sum);
}
