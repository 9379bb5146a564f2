//! Compute pipelines, built once per (kernel, override constants) and cached on the [`Gpu`].
//! Bind-group layouts are explicit (not "auto"), so one bind group serves every pipeline of a
//! kernel family: matmul and matvec share theirs.

use std::rc::Rc;

use crate::gpu::Gpu;

/// How a kernel binds one buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Binding {
    Uniform,
    /// A uniform bound at an offset given with each dispatch
    /// ([`Dispatcher::dispatch_at`](crate::gpu::Dispatcher::dispatch_at)).
    UniformAtOffset,
    Read,
    ReadWrite,
    /// A 2D texture of unsigned integer texels, read with `textureLoad` (lavapipe's weights: see
    /// linear_w_texture.wgsl).
    Texture,
}

/// A WGSL kernel: its file, the shared files prepended to it, and its bindings in order
/// (`@binding(0)`, `@binding(1)`, ...).
pub struct KernelSpec {
    pub name: &'static str,
    pub source: &'static str,
    /// Shared WGSL put before `source`: [`PACKED`] (widening packed weights), [`WEIGHT_PAIRS`]
    /// (reading a packed `w` two values at a time), [`LINEAR`], [`LINEAR_X`] and [`LINEAR_W`]
    /// (the linear-layer interface). WGSL has no include; concatenation is the whole mechanism.
    pub prelude: &'static [&'static str],
    pub bindings: &'static [Binding],
}

/// A built pipeline and the layout its bind groups use.
pub struct Kernel {
    /// The kernel's file name (without `.wgsl`), as profiles report it.
    pub name: &'static str,
    pub pipeline: wgpu::ComputePipeline,
    pub layout: wgpu::BindGroupLayout,
}

/// What makes a pipeline: its code (prelude and source, not its name: two kernels may share a
/// name in profiles, as rms_norm's two do) and its override constants (as bits).
pub(crate) type KernelKey = (&'static [&'static str], &'static str, Vec<(&'static str, u64)>);

pub const PACKED: &str = include_str!("../../../shaders/packed.wgsl");
pub const LINEAR: &str = include_str!("../../../shaders/linear.wgsl");
/// [`LINEAR`]'s x, bound as storage (every linear kernel) or as a uniform (a window of token rows:
/// lavapipe's linear_blocks.wgsl).
pub const LINEAR_X: &str = include_str!("../../../shaders/linear_x.wgsl");
pub const LINEAR_X_UNIFORM: &str = include_str!("../../../shaders/linear_x_uniform.wgsl");
/// [`LINEAR`]'s w, bound as storage (every linear kernel but lavapipe's) or as a texture
/// (lavapipe's linear_blocks.wgsl).
pub const LINEAR_W: &str = include_str!("../../../shaders/linear_w.wgsl");
pub const LINEAR_W_TEXTURE: &str = include_str!("../../../shaders/linear_w_texture.wgsl");
pub const WEIGHT_PAIRS: &str = include_str!("../../../shaders/weight_pairs.wgsl");
pub const BLOCK_QUANTS: &str = include_str!("../../../shaders/block_quants.wgsl");

impl Gpu {
    /// The pipeline of `spec` with these override constants, built on first use.
    pub fn kernel(&self, spec: &KernelSpec, constants: &[(&'static str, f64)]) -> Rc<Kernel> {
        let key = (spec.prelude, spec.source, constants.iter().map(|(k, v)| (*k, v.to_bits())).collect());
        if let Some(k) = self.kernels.borrow().get(&key) {
            return k.clone();
        }
        let source = [spec.prelude, &[spec.source]].concat().join("\n");
        let module = self.device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some(spec.name),
            source: wgpu::ShaderSource::Wgsl(source.into()),
        });
        let entries: Vec<wgpu::BindGroupLayoutEntry> = spec
            .bindings
            .iter()
            .enumerate()
            .map(|(i, b)| wgpu::BindGroupLayoutEntry {
                binding: i as u32,
                visibility: wgpu::ShaderStages::COMPUTE,
                ty: match b {
                    Binding::Uniform | Binding::UniformAtOffset => wgpu::BindingType::Buffer {
                        ty: wgpu::BufferBindingType::Uniform,
                        has_dynamic_offset: *b == Binding::UniformAtOffset,
                        min_binding_size: None,
                    },
                    Binding::Read | Binding::ReadWrite => wgpu::BindingType::Buffer {
                        ty: wgpu::BufferBindingType::Storage { read_only: *b == Binding::Read },
                        has_dynamic_offset: false,
                        min_binding_size: None,
                    },
                    Binding::Texture => wgpu::BindingType::Texture {
                        sample_type: wgpu::TextureSampleType::Uint,
                        view_dimension: wgpu::TextureViewDimension::D2,
                        multisampled: false,
                    },
                },
                count: None,
            })
            .collect();
        let layout = self
            .device
            .create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor { label: Some(spec.name), entries: &entries });
        let pipeline_layout = self.device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: Some(spec.name),
            bind_group_layouts: &[Some(&layout)],
            immediate_size: 0,
        });
        let pipeline = self.device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some(spec.name),
            layout: Some(&pipeline_layout),
            module: &module,
            entry_point: Some("main"),
            compilation_options: wgpu::PipelineCompilationOptions { constants, ..Default::default() },
            cache: None,
        });
        let kernel = Rc::new(Kernel { name: spec.name, pipeline, layout });
        self.kernels.borrow_mut().insert(key, kernel.clone());
        kernel
    }

    /// A bind group of whole buffers, in binding order.
    pub fn bind(&self, kernel: &Kernel, buffers: &[&wgpu::Buffer]) -> wgpu::BindGroup {
        let resources: Vec<_> = buffers.iter().map(|b| b.as_entire_binding()).collect();
        self.bind_resources(kernel, &resources)
    }

    /// [`Gpu::bind`] of buffer ranges (`@binding(i)` is `resources[i]`): a uniform binding of
    /// part of a larger buffer.
    pub fn bind_resources(&self, kernel: &Kernel, resources: &[wgpu::BindingResource]) -> wgpu::BindGroup {
        let entries: Vec<wgpu::BindGroupEntry> = resources
            .iter()
            .enumerate()
            .map(|(i, r)| wgpu::BindGroupEntry { binding: i as u32, resource: r.clone() })
            .collect();
        self.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: None,
            layout: &kernel.layout,
            entries: &entries,
        })
    }
}
