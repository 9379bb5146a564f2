// Decode linear layer for B <= 8 rows: y[b, n_offset + n] (+)= x[b, :] . w[n, :] + bias.
// Decode is bandwidth-bound: each weight word is read once for all B rows, 64 threads walk a
// weight row along K (coalesced), and the partial sums meet in workgroup memory (no subgroups:
// wgpu on the web does not expose them).
struct Shape {
    k: u32,          // K, even
    n: u32,          // rows of w in this chunk
    n_offset: u32,   // first output column written by this chunk
    out_cols: u32,   // row stride of y
}
struct Tokens {
    m: u32,          // B: rows of x, at most 8
}
override HAS_BIAS: bool = false;
override ACCUMULATE: bool = false;

@group(0) @binding(0) var<uniform> tokens: Tokens;
@group(0) @binding(1) var<uniform> shape: Shape;
@group(0) @binding(2) var<storage, read> x: array<vec2<f32>>;      // [B, K / 2]
@group(0) @binding(3) var<storage, read> w: array<u32>;            // [N, K] packed
@group(0) @binding(4) var<storage, read> bias: array<f32>;         // [out_cols]
@group(0) @binding(5) var<storage, read_write> y: array<f32>;      // [B, out_cols]

const MAX_B: u32 = 8u;
const LANES: u32 = 64u;     // threads per weight row
const ROWS: u32 = 4u;       // weight rows per workgroup
var<workgroup> partial: array<f32, 2048>;  // [ROWS, LANES, MAX_B]

@compute @workgroup_size(64, 4)
fn main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
    @builtin(local_invocation_id) lid: vec3<u32>,
) {
    let lane = lid.x;
    let n = (wg.x + wg.y * groups.x) * ROWS + lid.y;
    let k_pairs = shape.k / 2u;
    let b_count = min(tokens.m, MAX_B);
    var acc: array<f32, MAX_B>;
    if n < shape.n {
        for (var p = lane; p < k_pairs; p += LANES) {
            let wv = weight_pair(n * k_pairs + p);
            for (var b = 0u; b < b_count; b++) {
                acc[b] += dot(wv, x[b * k_pairs + p]);
            }
        }
    }
    let base = (lid.y * LANES + lane) * MAX_B;
    for (var b = 0u; b < MAX_B; b++) {
        partial[base + b] = acc[b];
    }
    workgroupBarrier();
    for (var stride = LANES / 2u; stride > 0u; stride /= 2u) {
        if lane < stride {
            for (var b = 0u; b < MAX_B; b++) {
                partial[base + b] += partial[base + stride * MAX_B + b];
            }
        }
        workgroupBarrier();
    }
    if n < shape.n && lane < b_count {
        let col = shape.n_offset + n;
        var v = partial[lid.y * LANES * MAX_B + lane];
        if HAS_BIAS {
            v += bias[col];
        }
        let at = lane * shape.out_cols + col;
        if ACCUMULATE {
            v += y[at];
        }
        y[at] = v;
    }
}
