// linear.wgsl's w as a texture of rgba32uint texels, 16 bytes each: the packed words in order,
// TEXTURE_WIDTH texels a row (a power of two, set by the Rust side; the last row's tail unused).
// lavapipe reads a storage buffer lane by lane, a bounds-checked scalar load per lane and word
// put into the vector through memory; texel fetches it makes for all lanes at once, several
// times as fast (measured there: 64 MiB summed at 7-10 GB/s from a texture, 0.8-1.1 GB/s from
// a storage buffer; SwiftShader gained nothing, 1.6 GB/s against 1.1-1.8, so it keeps storage).
@group(0) @binding(3) var w: texture_2d<u32>;
override TEXTURE_WIDTH: u32;

// Words 4i .. 4i + 3 of w.
fn weight_load(i: u32) -> vec4<u32> {
    return textureLoad(w, vec2<u32>(i % TEXTURE_WIDTH, i / TEXTURE_WIDTH), 0);
}
