// Greedy pick per row: best[r] = (argmax_v logits[r, v], its logit bits); ties go to the
// smaller id, as a CPU scan does.
struct Shape {
    cols: u32,       // vocabulary
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}
@group(0) @binding(0) var<uniform> shape: Shape;
@group(0) @binding(1) var<storage, read> logits: array<f32>;             // [R, vocab]
@group(0) @binding(2) var<storage, read_write> best: array<vec2<u32>>;   // [R]: (id, bitcast logit)

const WG: u32 = 256u;
var<workgroup> vals: array<f32, WG>;
var<workgroup> idxs: array<u32, WG>;

// One workgroup per row.
@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) tid: u32) {
    let r = wg.x;
    var v = -3.4e38;
    var id = 0xffffffffu;
    for (var c = tid; c < shape.cols; c += WG) {
        let l = logits[r * shape.cols + c];
        if l > v {
            v = l;
            id = c;
        }
    }
    vals[tid] = v;
    idxs[tid] = id;
    workgroupBarrier();
    for (var stride = WG / 2u; stride > 0u; stride /= 2u) {
        if tid < stride {
            let ov = vals[tid + stride];
            let oi = idxs[tid + stride];
            if ov > vals[tid] || (ov == vals[tid] && oi < idxs[tid]) {
                vals[tid] = ov;
                idxs[tid] = oi;
            }
        }
        workgroupBarrier();
    }
    if tid == 0u {
        best[r] = vec2<u32>(idxs[0], bitcast<u32>(vals[0]));
    }
}
