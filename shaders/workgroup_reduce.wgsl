// A maximum or a sum over the WG threads of a workgroup, through workgroup memory (no subgroups:
// wgpu on the web does not expose them). Prepended to the attention kernels. Every thread must
// call it (it has barriers); every thread gets the result.
override WG: u32;  // threads per workgroup, set by the Rust side (a power of two)
var<workgroup> red: array<f32, WG>;

fn reduce(value: f32, tid: u32, is_max: bool) -> f32 {
    red[tid] = value;
    workgroupBarrier();
    for (var stride = WG / 2u; stride > 0u; stride /= 2u) {
        if tid < stride {
            if is_max {
                red[tid] = max(red[tid], red[tid + stride]);
            } else {
                red[tid] += red[tid + stride];
            }
        }
        workgroupBarrier();
    }
    let r = red[0];
    workgroupBarrier();
    return r;
}
