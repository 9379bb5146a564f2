// Reads a packed matrix `w: array<u32>` (declared by the kernel) two values at a time; see
// packed.wgsl, which must come first.

// Values 2p and 2p+1 of `w`, counting along rows (row-major [rows, cols], cols even).
fn weight_pair(p: u32) -> vec2<f32> {
    if DTYPE == 2u {
        return vec2<f32>(bitcast<f32>(w[2u * p]), bitcast<f32>(w[2u * p + 1u]));
    }
    return unpack_word(w[p]);
}
