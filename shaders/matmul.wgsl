// Prefill linear layer (interface in linear.wgsl) for GPUs: x holds all tokens of all
// sequences; tiled 64 x 64 in workgroup memory, each thread computing a 4 x 4 block.
@group(0) @binding(2) var<storage, read> x: array<f32>;            // [M, K]

const TILE: u32 = 64u;
const BK: u32 = 16u;
var<workgroup> xs: array<f32, 1024>;  // [BK, TILE]: x tile, k-major
var<workgroup> ws: array<f32, 1024>;  // [BK, TILE]: w tile, k-major

@compute @workgroup_size(16, 16)
fn main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(local_invocation_id) lid: vec3<u32>,
    @builtin(local_invocation_index) tid: u32,
) {
    let m0 = wg.y * TILE;
    let n0 = wg.x * TILE;
    let k_pairs = shape.k / 2u;
    var acc: array<array<f32, 4>, 4>;
    for (var k0 = 0u; k0 < shape.k; k0 += BK) {
        // x tile: 64 rows x 16 k, 4 values per thread, 16 consecutive k per row.
        for (var i = 0u; i < 4u; i++) {
            let e = tid + i * 256u;
            let row = e / BK;
            let kk = e % BK;
            let m = m0 + row;
            let k = k0 + kk;
            var v = 0.0;
            if m < tokens.m && k < shape.k {
                v = x[m * shape.k + k];
            }
            xs[kk * TILE + row] = v;
        }
        // w tile: 64 rows x 8 pairs, 2 pairs per thread.
        for (var i = 0u; i < 2u; i++) {
            let e = tid + i * 256u;
            let row = e / 8u;
            let kp = e % 8u;
            let n = n0 + row;
            let p = k0 / 2u + kp;
            var v = vec2<f32>(0.0);
            if n < shape.n && p < k_pairs {
                v = weight_pair(n * k_pairs + p);
            }
            ws[(2u * kp) * TILE + row] = v.x;
            ws[(2u * kp + 1u) * TILE + row] = v.y;
        }
        workgroupBarrier();
        for (var kk = 0u; kk < BK; kk++) {
            var a: array<f32, 4>;
            var b: array<f32, 4>;
            for (var i = 0u; i < 4u; i++) {
                a[i] = xs[kk * TILE + lid.y + 16u * i];
                b[i] = ws[kk * TILE + lid.x + 16u * i];
            }
            for (var i = 0u; i < 4u; i++) {
                for (var j = 0u; j < 4u; j++) {
                    acc[i][j] = fma(a[i], b[j], acc[i][j]);
                }
            }
        }
        workgroupBarrier();
    }
    for (var i = 0u; i < 4u; i++) {
        for (var j = 0u; j < 4u; j++) {
            store(m0 + lid.y + 16u * i, n0 + lid.x + 16u * j, acc[i][j]);
        }
    }
}
