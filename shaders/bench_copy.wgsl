// Memory-bandwidth probe: dst = src, 16 bytes per thread per iteration. The bytes moved
// (read + written) over the time taken is the device's practical copy bandwidth, the ceiling
// of a bandwidth-bound decode step.
@group(0) @binding(0) var<storage, read> src: array<vec4<f32>>;        // [N]
@group(0) @binding(1) var<storage, read_write> dst: array<vec4<f32>>;  // [N]

override WORKGROUP: u32;  // threads per workgroup (set by the Rust side)

@compute @workgroup_size(WORKGROUP)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let stride = groups.x * WORKGROUP;
    for (var i = gid.x; i < arrayLength(&src); i += stride) {
        dst[i] = src[i];
    }
}
