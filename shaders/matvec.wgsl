// Linear layer (interface in linear.wgsl) for GPUs at small M: decode, and short prefills where
// matmul's tiles would leave most of a GPU idle. K must be a multiple of 8 (every Qwen2.5 size
// is; other K go to matmul). Token rows are taken 8 at a time (B <= 8 per block).
// Decode is bandwidth-bound, so the weights are streamed once, 16 bytes per load: LANES
// threads walk a weight row along K, neighbours reading neighbouring 16-byte words
// (coalesced), each dotting them with all B token rows; the partial sums of a row meet in
// workgroup memory (no subgroups: wgpu on the web does not expose them). Results stay in two
// named vec4s: an indexed local array would be left in slow memory by some compilers.
@group(0) @binding(2) var<storage, read> x: array<vec4<f32>>;      // [M, K / 4]
@group(0) @binding(3) var<storage, read> w: array<vec4<u32>>;      // [N, K] packed, 16 bytes a load

const LANES: u32 = 32u;     // threads per weight row
const ROWS: u32 = 8u;       // weight rows per workgroup
var<workgroup> partial_lo: array<vec4<f32>, 256>;  // [ROWS, LANES]: token rows 0..3
var<workgroup> partial_hi: array<vec4<f32>, 256>;  // [ROWS, LANES]: token rows 4..7

// Token row b times one 16-byte load of weights, which hold 8 values (16-bit) or 4 (f32).
fn row_dot(b: u32, quad: u32, wv: vec4<u32>) -> f32 {
    let k4 = shape.k / 4u;
    if DTYPE == 2u {
        return dot(bitcast<vec4<f32>>(wv), x[b * k4 + quad]);
    }
    let lo = vec4<f32>(unpack_word(wv.x), unpack_word(wv.y));
    let hi = vec4<f32>(unpack_word(wv.z), unpack_word(wv.w));
    return dot(lo, x[b * k4 + 2u * quad]) + dot(hi, x[b * k4 + 2u * quad + 1u]);
}

@compute @workgroup_size(32, 8)
fn main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
    @builtin(local_invocation_id) lid: vec3<u32>,
) {
    let lane = lid.x;
    let n = (wg.x + wg.y * groups.x) * ROWS + lid.y;
    let per_load = select(8u, 4u, DTYPE == 2u);
    let loads = shape.k / per_load;  // 16-byte loads per weight row
    // Each block of 8 token rows reads the workgroup's weight rows again, from cache.
    for (var b0 = 0u; b0 < tokens.m; b0 += 8u) {
        block(b0, min(tokens.m - b0, 8u), n, lane, lid.y, loads);
    }
}

// Token rows b0 .. b0 + b_count (b_count <= 8) times weight row n, stored.
fn block(b0: u32, b_count: u32, n: u32, lane: u32, row: u32, loads: u32) {
    var lo = vec4<f32>(0.0);
    var hi = vec4<f32>(0.0);
    if n < shape.n {
        for (var i = lane; i < loads; i += LANES) {
            let wv = w[n * loads + i];
            lo.x += row_dot(b0, i, wv);
            if b_count > 1u { lo.y += row_dot(b0 + 1u, i, wv); }
            if b_count > 2u { lo.z += row_dot(b0 + 2u, i, wv); }
            if b_count > 3u { lo.w += row_dot(b0 + 3u, i, wv); }
            if b_count > 4u {
                hi.x += row_dot(b0 + 4u, i, wv);
                if b_count > 5u { hi.y += row_dot(b0 + 5u, i, wv); }
                if b_count > 6u { hi.z += row_dot(b0 + 6u, i, wv); }
                if b_count > 7u { hi.w += row_dot(b0 + 7u, i, wv); }
            }
        }
    }
    let at = row * LANES + lane;
    partial_lo[at] = lo;
    partial_hi[at] = hi;
    workgroupBarrier();
    for (var stride = LANES / 2u; stride > 0u; stride /= 2u) {
        if lane < stride {
            partial_lo[at] += partial_lo[at + stride];
            partial_hi[at] += partial_hi[at + stride];
        }
        workgroupBarrier();
    }
    if lane < b_count {
        let first = row * LANES;
        let sums = select(partial_lo[first], partial_hi[first], lane >= 4u);
        store(b0 + lane, n, sums[lane % 4u]);
    }
    workgroupBarrier();  // the next block reuses partial_lo and partial_hi
}
