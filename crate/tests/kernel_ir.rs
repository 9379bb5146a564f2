//! What the kernels a GPU runs must not hold, read off their IR (naga, wgpu's own WGSL front
//! end; no device needed): an array in function or private memory indexed by a value known only
//! at run time. A GPU's compiler keeps such an array in slow local memory rather than in
//! registers; the tiled matmul's 4 x 4 accumulator indexed by its loop counters ran 18 times
//! slower on a real GPU than as four named vec4s, and was fine on lavapipe, which unrolls the
//! loops. Four kernels that only CPU-like devices run hold such arrays by design (lavapipe
//! makes them registers) and are exempt, by name; every shader file is checked, exempt, or a
//! prelude.

use naga::{AddressSpace, Expression, Handle, Module, TypeInner};
use onetoken::gpu::{BLOCK_QUANTS, KernelSpec, LINEAR, LINEAR_W, LINEAR_W_TEXTURE, PACKED, WEIGHT_PAIRS};
use onetoken::ops;

/// The kernels checked: all a GPU runs (the tiled family, attention, the head, the
/// microbenchmarks), and the CPU-like devices' other than the exempt ones.
const CHECKED_KERNELS: [KernelSpec; 21] = [
    ops::EMBEDDING,
    ops::RMS_NORM,
    ops::RMS_NORM_ROWS,
    ops::MATMUL,
    ops::MATVEC,
    ops::SPLIT_SUM,
    ops::KV_WRITE,
    ops::ATTENTION,
    ops::ATTENTION_SPLIT,
    ops::ATTENTION_GROUPED,
    ops::ATTENTION_COMBINE,
    ops::SILU_MUL,
    ops::GATHER_ROWS,
    ops::TOP_K,
    ops::LM_HEAD_ROWS,
    ops::KV_COPY,
    ops::SYNTHETIC,
    standalone("bench_copy", include_str!("../../shaders/bench_copy.wgsl")),
    standalone("bench_fma", include_str!("../../shaders/bench_fma.wgsl")),
    KernelSpec { name: "bench_read", source: BENCH_READ, prelude: &[LINEAR_W], bindings: &[] },
    KernelSpec { name: "bench_read", source: BENCH_READ, prelude: &[LINEAR_W_TEXTURE], bindings: &[] },
];

/// The exempt: the direct linear family and direct attention, for CPU-like devices only.
const EXEMPT_KERNELS: [KernelSpec; 4] =
    [ops::LINEAR_DIRECT, ops::LINEAR_BLOCKS, ops::LINEAR_BLOCKS_UNIFORM_X, ops::ATTENTION_DIRECT];

const fn standalone(name: &'static str, source: &'static str) -> KernelSpec {
    KernelSpec { name, source, prelude: &[], bindings: &[] }
}

/// The read probe, without its w (linear_w.wgsl or linear_w_texture.wgsl).
const BENCH_READ: &str = include_str!("../../shaders/bench_read.wgsl");

/// The kernel's source as the device gets it (its prelude, then its own).
fn source(spec: &KernelSpec) -> String {
    [spec.prelude, &[spec.source]].concat().join("\n")
}

/// Every run-time index into a function or private array (or an array value, which the
/// compiler must first put in function memory): "function: array" for each.
fn arrays_indexed_at_run_time(name: &str, source: &str) -> Vec<String> {
    let module =
        naga::front::wgsl::parse_str(source).unwrap_or_else(|e| panic!("{name}: {}", e.emit_to_string(source)));
    let info = naga::valid::Validator::new(naga::valid::ValidationFlags::all(), naga::valid::Capabilities::all())
        .validate(&module)
        .unwrap_or_else(|e| panic!("{name}: {e:?}"));
    let functions = module.functions.iter().map(|(h, f)| (f, &info[h]));
    let entry_points = module.entry_points.iter().enumerate().map(|(i, e)| (&e.function, info.get_entry_point(i)));
    let mut found = Vec::new();
    for (function, types) in functions.chain(entry_points) {
        for (_, expression) in function.expressions.iter() {
            // A constant index is `AccessIndex`; `Access` takes a run-time value.
            let Expression::Access { base, .. } = *expression else { continue };
            let in_registers_only = match types[base].ty.inner_with(&module.types) {
                TypeInner::Pointer { base, space: AddressSpace::Function | AddressSpace::Private } => {
                    !matches!(module.types[*base].inner, TypeInner::Array { .. })
                }
                TypeInner::Array { .. } => false,
                _ => true,
            };
            if !in_registers_only {
                let array = array_name(&module, function, base);
                found.push(format!("{}: {array}", function.name.as_deref().unwrap_or("?")));
            }
        }
    }
    found.sort();
    found.dedup();
    found
}

/// The variable (or `let`) an indexed expression starts from.
fn array_name(module: &Module, function: &naga::Function, mut at: Handle<Expression>) -> String {
    loop {
        match function.expressions[at] {
            Expression::Access { base, .. } | Expression::AccessIndex { base, .. } => at = base,
            Expression::LocalVariable(v) => return function.local_variables[v].name.clone().unwrap_or_default(),
            Expression::GlobalVariable(v) => return module.global_variables[v].name.clone().unwrap_or_default(),
            Expression::FunctionArgument(i) => {
                return function.arguments[i as usize].name.clone().unwrap_or_default();
            }
            _ => return function.named_expressions.get(&at).cloned().unwrap_or_else(|| "a value".into()),
        }
    }
}

#[test]
fn no_gpu_kernel_indexes_a_local_array_at_run_time() {
    for spec in &CHECKED_KERNELS {
        let found = arrays_indexed_at_run_time(spec.name, &source(spec));
        assert!(found.is_empty(), "{}: arrays indexed at run time (name the values instead): {found:?}", spec.name);
    }
}

/// The check sees what it looks for: the accumulator that was 18 times slower is found, in
/// function memory, in private memory and as a value; named vectors and constant indices are not.
#[test]
fn the_check_finds_the_pattern_that_was_slow_and_nothing_else() {
    let slow = "
        var<private> shared_acc: array<f32, 4>;
        @compute @workgroup_size(1) fn main(@builtin(local_invocation_id) id: vec3<u32>) {
            var acc: array<array<f32, 4>, 4>;
            for (var i = 0u; i < 4u; i++) { for (var j = 0u; j < 4u; j++) { acc[i][j] += 1.0; } }
            shared_acc[id.x] = acc[1][2];
            let values = array(1.0, 2.0);
            shared_acc[0] = values[id.x];
        }";
    assert_eq!(arrays_indexed_at_run_time("slow", slow), ["main: acc", "main: shared_acc", "main: values"]);
    let fast = "
        @group(0) @binding(0) var<storage, read_write> y: array<vec4<f32>>;
        @compute @workgroup_size(1) fn main(@builtin(local_invocation_id) id: vec3<u32>) {
            var acc0 = vec4<f32>(0.0);
            var acc1 = vec4<f32>(0.0);
            for (var i = 0u; i < 4u; i++) { acc0[i] += 1.0; acc1 += vec4<f32>(f32(i)); }
            let pair = array(acc0, acc1);
            y[id.x] = pair[0] + pair[1];
        }";
    assert_eq!(arrays_indexed_at_run_time("fast", fast), Vec::<String>::new());
    // The exempt kernels hold such arrays by design (lavapipe unrolls their loops).
    for spec in &EXEMPT_KERNELS {
        assert!(!arrays_indexed_at_run_time(spec.name, &source(spec)).is_empty(), "{}", spec.name);
    }
}

#[test]
fn every_shader_file_is_a_checked_kernel_an_exempt_one_or_a_prelude() {
    let kernels = CHECKED_KERNELS.iter().chain(&EXEMPT_KERNELS);
    let mut known: Vec<&str> = kernels.flat_map(|k| k.prelude.iter().copied().chain([k.source])).collect();
    known.extend([PACKED, LINEAR, WEIGHT_PAIRS, BLOCK_QUANTS]);
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shaders");
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            known.contains(&text.as_str()),
            "{}: a kernel this test does not know; add it to CHECKED_KERNELS",
            path.display()
        );
    }
}
