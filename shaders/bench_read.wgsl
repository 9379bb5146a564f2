// Read-bandwidth probe: the threads fold every texel of w (16 bytes) into one word per
// workgroup, reading w as the linear kernels read their weights (weight_load: linear_w.wgsl's
// storage buffer, or linear_w_texture.wgsl's texture), and write almost nothing. The bytes read
// over the time taken is the device's read bandwidth, the ceiling of a decode step, which reads
// its weights once and writes little. A copy writes as much as it reads, and where stores are
// slow (lavapipe's go lane by lane) it says less than a decode step reaches.
struct Shape {
    texels: u32,  // of w to read
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}
@group(0) @binding(0) var<uniform> shape: Shape;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;  // [workgroups]: keeps the reads alive
// Binding 2 is unused: w is binding 3 in both of weight_load's files.

override WORKGROUP: u32;  // threads per workgroup (set by the Rust side)

var<workgroup> folded: atomic<u32>;  // zero at the start of every workgroup

@compute @workgroup_size(WORKGROUP)
fn main(
    @builtin(global_invocation_id) gid: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
) {
    // Neighbouring threads read neighbouring texels: coalesced, as a matvec reads a row.
    let stride = groups.x * WORKGROUP;
    var acc = vec4<u32>(0u);
    for (var i = gid.x; i < shape.texels; i += stride) {
        acc ^= weight_load(i);
    }
    atomicXor(&folded, acc.x ^ acc.y ^ acc.z ^ acc.w);
    workgroupBarrier();
    if lid == 0u {
        out[wid.x] = atomicLoad(&folded);
    }
}
