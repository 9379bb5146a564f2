// Decode linear layer (interface in linear.wgsl) for GPUs, B = M <= 8 rows.
// Decode is bandwidth-bound: each weight word is read once for all B rows, 64 threads walk a
// weight row along K (coalesced), and the partial sums meet in workgroup memory (no subgroups:
// wgpu on the web does not expose them).
@group(0) @binding(2) var<storage, read> x: array<vec2<f32>>;      // [B, K / 2]

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
    if lane < b_count {
        store(lane, n, partial[lid.y * LANES * MAX_B + lane]);
    }
}
