//! Kernels: GLSL compiled to SPIR-V at run time by glslang 16 (the `glslang` crate, built from
//! source and linked statically; no SPIR-V optimizer), pipelines cached by identity, and the
//! on-disk Vulkan pipeline cache guarded by our own header.
//!
//! Every kernel shares one pipeline layout: no descriptor sets, one push-constant block
//! (`PushConstants`: the device address of a parameter block and an item count). Kernels reach
//! their buffers through addresses in the parameter block, so there is no descriptor pool to
//! exhaust and no per-binding size limit.

use crate::error::{EngineError, Result};
use crate::submit::PushConstants;
use ash::vk;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use vulkano::device::Device;
use vulkano::pipeline::cache::{PipelineCache, PipelineCacheCreateInfo};
use vulkano::pipeline::compute::ComputePipelineCreateInfo;
use vulkano::pipeline::layout::{PipelineLayoutCreateInfo, PushConstantRange};
use vulkano::pipeline::{ComputePipeline, PipelineLayout, PipelineShaderStageCreateInfo};
use vulkano::shader::{ShaderModule, ShaderModuleCreateInfo, ShaderStages};
use vulkano::VulkanObject;

/// `NX_VULKAN_TRACE_BUILDS` set: each kernel built (GLSL, SPIR-V and the driver's pipeline)
/// is reported on stderr with its time — where a slow test's time goes on lavapipe, which
/// compiles every pipeline anew in each process.
static TRACE_BUILDS: once_cell::sync::Lazy<bool> = once_cell::sync::Lazy::new(|| std::env::var_os("NX_VULKAN_TRACE_BUILDS").is_some());

/// A compiled compute pipeline and how it maps work items to workgroups.
pub struct Kernel {
    pipeline: Pipeline,
    name: String,
    local_size: u32,
    items_per_thread: u32,
}

impl Kernel {
    pub(crate) fn pipeline_handle(&self) -> vk::Pipeline {
        match &self.pipeline {
            Pipeline::Vulkano(p) => p.handle(),
            Pipeline::Raw(r) => r.pipeline,
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Work items one workgroup covers in one pass of the kernel's loop.
    pub fn items_per_group(&self) -> u32 {
        self.local_size * self.items_per_thread
    }
}

enum Pipeline {
    Vulkano(Arc<ComputePipeline>),
    /// Created with the function table: vulkano 0.35's SPIR-V parser does not know the
    /// bf16 (`BFloat16TypeKHR`) and coopmat2 capabilities, so it cannot wrap those modules.
    Raw(RawPipeline),
}

struct RawPipeline {
    device: Arc<Device>,
    module: vk::ShaderModule,
    pipeline: vk::Pipeline,
}

impl Drop for RawPipeline {
    fn drop(&mut self) {
        let fns = self.device.fns();
        // SAFETY: both objects were created from this device and a kernel is dropped only
        // when no submission that uses it is pending (the stream keeps kernels alive).
        unsafe {
            (fns.v1_0.destroy_pipeline)(self.device.handle(), self.pipeline, std::ptr::null());
            (fns.v1_0.destroy_shader_module)(self.device.handle(), self.module, std::ptr::null());
        }
    }
}

/// The header every generated shader starts with: extensions, buffer-reference types and the
/// shared push-constant block.
pub const SHADER_PRELUDE: &str = r#"#version 460
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_buffer_reference2 : require
#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require
#extension GL_EXT_shader_explicit_arithmetic_types_int32 : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
#extension GL_EXT_shader_8bit_storage : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_ARB_gpu_shader_int64 : require
#extension GL_EXT_control_flow_attributes : require
layout(buffer_reference, std430, buffer_reference_align = 1) buffer BufU8 { uint8_t v[]; };
layout(buffer_reference, std430, buffer_reference_align = 2) buffer BufU16 { uint16_t v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer BufU32 { uint v[]; };
layout(buffer_reference, std430, buffer_reference_align = 8) buffer BufU64 { uint64_t v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) readonly buffer ParamsI32 { int v[]; };
layout(buffer_reference, std430, buffer_reference_align = 8) readonly buffer ParamsU64 { uint64_t v[]; };
layout(push_constant) uniform PushConstants { uint64_t params; uint count; uint pad_; } pc;
"#;

/// Counters for what has been compiled (tests assert these stay flat under load).
#[derive(Default)]
pub(crate) struct KernelStats {
    pub compiled: std::sync::atomic::AtomicU64,
    pub lookups: std::sync::atomic::AtomicU64,
    /// SPIR-V read from the on-disk cache instead of compiled.
    pub spirv_hits: std::sync::atomic::AtomicU64,
    /// SPIR-V compiled (and written to the cache when it is on).
    pub spirv_misses: std::sync::atomic::AtomicU64,
    /// Cache files ignored because they were damaged, truncated or for other source.
    pub spirv_rejected: std::sync::atomic::AtomicU64,
    /// Pipelines the driver refused to build from valid SPIR-V (its compiler's bugs).
    pub refused: std::sync::atomic::AtomicU64,
}

pub struct KernelCache {
    device: Arc<Device>,
    layout: Arc<PipelineLayout>,
    /// glslang's compiler is process-wide; compiles are serialised through this lock.
    compiler: Mutex<&'static glslang::Compiler>,
    kernels: Mutex<HashMap<String, Arc<Kernel>>>,
    /// Keys whose pipeline the driver refused: asked again, they fail at once instead of
    /// compiling again (a caller that can split the work does: `Context::record_map_with`).
    refused: Mutex<std::collections::HashSet<String>>,
    /// For tests: keys containing this are refused as a driver would refuse them.
    inject_refusal: Mutex<Option<String>>,
    /// Serialises builds so two threads never compile the same key twice.
    building: Mutex<()>,
    pipeline_cache: Arc<PipelineCache>,
    cache_file: Option<PathBuf>,
    cache_header: CacheHeader,
    /// Where generated SPIR-V is kept across VMs (None: off).
    spirv_dir: Option<PathBuf>,
    pub(crate) stats: KernelStats,
}

impl KernelCache {
    pub(crate) fn new(device: Arc<Device>, caps: &crate::DeviceCaps) -> Result<KernelCache> {
        let layout = PipelineLayout::new(
            device.clone(),
            PipelineLayoutCreateInfo {
                push_constant_ranges: vec![PushConstantRange {
                    stages: ShaderStages::COMPUTE,
                    offset: 0,
                    size: std::mem::size_of::<PushConstants>() as u32,
                }],
                ..Default::default()
            },
        )
        .map_err(|e| EngineError::vk("pipeline layout", e))?;
        let compiler = glslang::Compiler::acquire()
            .ok_or_else(|| EngineError::ShaderCompile { name: "-".into(), message: "glslang did not initialise".into() })?;
        let cache_header = CacheHeader::for_device(caps);
        let cache_file = pipeline_cache_path(caps);
        let initial_data = cache_file
            .as_ref()
            .and_then(|p| std::fs::read(p).ok())
            .and_then(|bytes| cache_header.validate(&bytes).map(|d| d.to_vec()))
            .unwrap_or_default();
        // SAFETY: `initial_data` is either empty or a blob whose header we checked byte for
        // byte against this device (vendor, device, driver version, cache UUID, checksum).
        let pipeline_cache = unsafe {
            PipelineCache::new(device.clone(), PipelineCacheCreateInfo { initial_data, ..Default::default() })
        }
        .map_err(|e| EngineError::vk("pipeline cache", e))?;
        Ok(KernelCache {
            device,
            layout,
            compiler: Mutex::new(compiler),
            kernels: Mutex::new(HashMap::new()),
            refused: Mutex::new(Default::default()),
            inject_refusal: Mutex::new(None),
            building: Mutex::new(()),
            pipeline_cache,
            cache_file,
            cache_header,
            spirv_dir: spirv_cache_dir(),
            stats: KernelStats::default(),
        })
    }

    pub(crate) fn layout(&self) -> vk::PipelineLayout {
        self.layout.handle()
    }

    /// Number of distinct pipelines built so far.
    pub fn len(&self) -> usize {
        self.kernels.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// For tests: from now on, building a kernel whose key contains `needle` fails as if the
    /// driver had refused it (`None` stops this; keys refused so far stay refused).
    #[doc(hidden)]
    pub fn inject_refusal(&self, needle: Option<&str>) {
        *self.inject_refusal.lock() = needle.map(str::to_string);
    }

    /// Whether the driver refused to build the pipeline of `key` (glslang accepted its source).
    pub fn refused(&self, key: &str) -> bool {
        self.refused.lock().contains(key)
    }

    /// The kernel for `key` if it was built before.
    pub fn cached(&self, key: &str) -> Option<Arc<Kernel>> {
        let k = self.kernels.lock().get(key).cloned();
        if k.is_some() {
            self.stats.lookups.fetch_add(1, Relaxed);
        }
        k
    }

    /// The kernel for `key`, building it from `source()` the first time. `local_size` must
    /// match the shader's `local_size_x`; `items_per_thread` is how many items one invocation
    /// handles per loop step.
    pub fn get(
        &self,
        key: &str,
        local_size: u32,
        items_per_thread: u32,
        source: impl FnOnce() -> String,
    ) -> Result<Arc<Kernel>> {
        self.get_for(ShaderTarget::Vulkan12, key, local_size, items_per_thread, source)
    }

    /// `get` for a given SPIR-V target (cooperative-matrix kernels need Vulkan 1.3).
    pub(crate) fn get_for(
        &self,
        target: ShaderTarget,
        key: &str,
        local_size: u32,
        items_per_thread: u32,
        source: impl FnOnce() -> String,
    ) -> Result<Arc<Kernel>> {
        self.stats.lookups.fetch_add(1, Relaxed);
        if let Some(k) = self.kernels.lock().get(key) {
            return Ok(k.clone());
        }
        if self.refused(key) {
            return Err(EngineError::Vulkan(format!("compute pipeline {key}: the driver refused to build it (earlier in this process)")));
        }
        crate::exec::require_deep_stack()?;
        let _building = self.building.lock();
        if let Some(k) = self.kernels.lock().get(key) {
            return Ok(k.clone());
        }
        let started = std::time::Instant::now();
        let source = source();
        let spirv = self.spirv(key, &source, target)?;
        let injected = self.inject_refusal.lock().as_ref().is_some_and(|needle| key.contains(needle.as_str()));
        let built = match target {
            _ if injected => Err(EngineError::Vulkan(format!("compute pipeline {key}: refused (injected for a test)"))),
            ShaderTarget::Vulkan12 => self.vulkano_pipeline(key, &spirv).map(Pipeline::Vulkano),
            ShaderTarget::Vulkan13 => self.raw_pipeline(key, &spirv, vk::PipelineCreateFlags::empty()).map(Pipeline::Raw),
        };
        let pipeline = built.inspect_err(|_| {
            self.refused.lock().insert(key.to_string());
            self.stats.refused.fetch_add(1, Relaxed);
        })?;
        let kernel = Arc::new(Kernel { pipeline, name: key.to_string(), local_size, items_per_thread });
        self.kernels.lock().insert(key.to_string(), kernel.clone());
        self.stats.compiled.fetch_add(1, Relaxed);
        self.save_pipeline_cache();
        if *TRACE_BUILDS {
            eprintln!("nx_vulkan: built {key} in {:.1} ms", started.elapsed().as_secs_f64() * 1e3);
        }
        if self.device.enabled_extensions().khr_pipeline_executable_properties {
            match self.driver_statistics(key, &spirv) {
                Ok(line) => eprintln!("{line}"),
                Err(e) => eprintln!("nx_vulkan: no driver statistics for {key}: {e}"),
            }
        }
        Ok(kernel)
    }

    /// SPIR-V for `source`: from the on-disk cache when a file there holds exactly this
    /// source for this target and compiler, else compiled by glslang and written there.
    fn spirv(&self, key: &str, source: &str, target: ShaderTarget) -> Result<Vec<u32>> {
        let path = self.spirv_dir.as_ref().map(|d| d.join(format!("{:016x}{:016x}.spv", fnv1a64_seeded(source.as_bytes(), 0), fnv1a64_seeded(source.as_bytes(), 1))));
        let tag = format!("{SHADER_COMPILER} {target:?}");
        if let Some(p) = &path {
            match std::fs::read(p) {
                Ok(bytes) => match read_spirv_entry(&bytes, &tag, source) {
                    Some(words) => {
                        self.stats.spirv_hits.fetch_add(1, Relaxed);
                        return Ok(words);
                    }
                    None => {
                        self.stats.spirv_rejected.fetch_add(1, Relaxed);
                        eprintln!("nx_vulkan: ignoring damaged or foreign SPIR-V cache file {} (rebuilt)", p.display());
                    }
                },
                Err(_) => {}
            }
        }
        self.stats.spirv_misses.fetch_add(1, Relaxed);
        let words = compile_glsl(&self.compiler.lock(), key, source, target)?;
        if let Some(p) = &path {
            // Written to a temporary and renamed: a reader never sees half a file.
            let tmp = p.with_extension(format!("tmp{}", std::process::id()));
            let ok = p.parent().is_some_and(|d| std::fs::create_dir_all(d).is_ok())
                && std::fs::write(&tmp, spirv_entry(&tag, source, &words)).is_ok()
                && std::fs::rename(&tmp, p).is_ok();
            if !ok {
                let _ = std::fs::remove_file(&tmp);
            }
        }
        Ok(words)
    }

    fn vulkano_pipeline(&self, key: &str, spirv: &[u32]) -> Result<Arc<ComputePipeline>> {
        // SAFETY: the SPIR-V was produced by glslang from our own GLSL just now.
        let module = unsafe { ShaderModule::new(self.device.clone(), ShaderModuleCreateInfo::new(spirv)) }
            .map_err(|e| EngineError::vk(&format!("shader module {key}"), format!("{e:?}")))?;
        let entry = module
            .entry_point("main")
            .ok_or_else(|| EngineError::ShaderCompile { name: key.into(), message: "no main".into() })?;
        let stage = PipelineShaderStageCreateInfo::new(entry);
        ComputePipeline::new(
            self.device.clone(),
            Some(self.pipeline_cache.clone()),
            ComputePipelineCreateInfo::stage_layout(stage, self.layout.clone()),
        )
        .map_err(|e| EngineError::vk(&format!("compute pipeline {key}"), format!("{e:?}")))
    }

    /// What the driver reports about the kernel it built from `spirv` (registers, spills,
    /// shared memory, ... : VK_KHR_pipeline_executable_properties, enabled only with
    /// NX_VULKAN_KERNEL_STATS=1), as one JSON line: a second pipeline of the same code, built
    /// with CAPTURE_STATISTICS and dropped. A measurement aid: which resource holds a kernel's
    /// occupancy is otherwise only guessed from its source.
    fn driver_statistics(&self, key: &str, spirv: &[u32]) -> Result<String> {
        let raw = self.raw_pipeline(key, spirv, vk::PipelineCreateFlags::CAPTURE_STATISTICS_KHR)?;
        let fns = &self.device.fns().khr_pipeline_executable_properties;
        let dev = self.device.handle();
        let info = vk::PipelineInfoKHR::default().pipeline(raw.pipeline);
        // SAFETY: a pipeline of this device built with CAPTURE_STATISTICS; the extension and
        // its feature are enabled (checked by the caller); two-call enumeration.
        let executables = unsafe {
            crate::device::enumerate(vk::PipelineExecutablePropertiesKHR::default(), |n, a| (fns.get_pipeline_executable_properties_khr)(dev, &info, n, a))
        };
        let mut out = vec![];
        for (i, exe) in executables.iter().enumerate() {
            let einfo = vk::PipelineExecutableInfoKHR::default().pipeline(raw.pipeline).executable_index(i as u32);
            // SAFETY: as above, for an executable index the driver listed.
            let stats = unsafe {
                crate::device::enumerate(vk::PipelineExecutableStatisticKHR::default(), |n, a| (fns.get_pipeline_executable_statistics_khr)(dev, &einfo, n, a))
            };
            let mut fields = serde_json::Map::new();
            for st in &stats {
                let name = st.name_as_c_str().map(|c| c.to_string_lossy().into_owned()).unwrap_or_default();
                // SAFETY: the union member named by `format`.
                let value = unsafe {
                    match st.format {
                        vk::PipelineExecutableStatisticFormatKHR::BOOL32 => serde_json::json!(st.value.b32 != 0),
                        vk::PipelineExecutableStatisticFormatKHR::INT64 => serde_json::json!(st.value.i64),
                        vk::PipelineExecutableStatisticFormatKHR::UINT64 => serde_json::json!(st.value.u64),
                        _ => serde_json::json!(st.value.f64),
                    }
                };
                fields.insert(name, value);
            }
            let name = exe.name_as_c_str().map(|c| c.to_string_lossy().into_owned()).unwrap_or_default();
            out.push(serde_json::json!({"executable": name, "subgroup_size": exe.subgroup_size, "stats": fields}));
        }
        Ok(serde_json::json!({"kernel_stats": key, "executables": out}).to_string())
    }

    fn raw_pipeline(&self, key: &str, spirv: &[u32], flags: vk::PipelineCreateFlags) -> Result<RawPipeline> {
        let fns = self.device.fns();
        let dev = self.device.handle();
        let info = vk::ShaderModuleCreateInfo::default().code(spirv);
        let mut module = vk::ShaderModule::null();
        // SAFETY: valid SPIR-V words from glslang; the device outlives the module (RawPipeline
        // holds it).
        let r = unsafe { (fns.v1_0.create_shader_module)(dev, &info, std::ptr::null(), &mut module) };
        if r != vk::Result::SUCCESS {
            return Err(EngineError::vk(&format!("shader module {key}"), format!("{r:?}")));
        }
        let stage = vk::PipelineShaderStageCreateInfo::default().stage(vk::ShaderStageFlags::COMPUTE).module(module).name(c"main");
        let info = vk::ComputePipelineCreateInfo::default().flags(flags).stage(stage).layout(self.layout.handle());
        let mut pipeline = vk::Pipeline::null();
        // SAFETY: module, layout and cache belong to this device; one create info, one output.
        let r = unsafe { (fns.v1_0.create_compute_pipelines)(dev, self.pipeline_cache.handle(), 1, &info, std::ptr::null(), &mut pipeline) };
        if r != vk::Result::SUCCESS {
            // SAFETY: the module was created above and nothing uses it.
            unsafe { (fns.v1_0.destroy_shader_module)(dev, module, std::ptr::null()) };
            return Err(EngineError::vk(&format!("compute pipeline {key}"), format!("{r:?}")));
        }
        Ok(RawPipeline { device: self.device.clone(), module, pipeline })
    }

    /// Writes the driver's pipeline cache to disk with our header (atomically; errors ignored:
    /// the cache only saves time).
    pub fn save_pipeline_cache(&self) {
        let Some(path) = &self.cache_file else { return };
        let Ok(data) = self.pipeline_cache.get_data() else { return };
        let bytes = self.cache_header.wrap(&data);
        if let Some(dir) = path.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let tmp = path.with_extension(format!("tmp{}", std::process::id()));
        if std::fs::write(&tmp, bytes).is_ok() {
            let _ = std::fs::rename(&tmp, path);
        }
    }
}

/// The SPIR-V environment a kernel is compiled for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ShaderTarget {
    /// Vulkan 1.2 / SPIR-V 1.5: every portable kernel (what shaderc produced before).
    Vulkan12,
    /// Vulkan 1.3 / SPIR-V 1.6: cooperative-matrix and bf16 kernels (their extensions need it).
    Vulkan13,
}

/// The shader compiler's identity, part of the on-disk cache's name: SPIR-V from another
/// compiler version is a different pipeline, so its cache entries are never looked up again.
pub const SHADER_COMPILER: &str = "glslang-16.6.0";

/// GLSL → SPIR-V with glslang (no optimizer: glslang-sys is built with ENABLE_OPT off, so
/// exact float code is never rewritten). Errors carry glslang's log and the numbered source.
pub(crate) fn compile_glsl(compiler: &glslang::Compiler, name: &str, source: &str, target: ShaderTarget) -> Result<Vec<u32>> {
    use glslang::{CompilerOptions, ShaderInput, ShaderSource, ShaderStage, SpirvVersion, Target, VulkanVersion};
    let fail = |message: String| EngineError::ShaderCompile { name: name.into(), message: format!("{message}\n--- source ---\n{}", numbered(source)) };
    if source.contains('\0') {
        return Err(fail("source contains a NUL byte".into()));
    }
    let (version, spirv_version) = match target {
        ShaderTarget::Vulkan12 => (VulkanVersion::Vulkan1_2, SpirvVersion::SPIRV1_5),
        ShaderTarget::Vulkan13 => (VulkanVersion::Vulkan1_3, SpirvVersion::SPIRV1_6),
    };
    let options = CompilerOptions { target: Target::Vulkan { version, spirv_version }, ..Default::default() };
    let src = ShaderSource::from(source);
    let input = ShaderInput::new(&src, ShaderStage::Compute, &options, None::<&[(&str, Option<&str>)]>, None)
        .map_err(|e| fail(format!("{e}")))?;
    let shader = compiler.create_shader(input).map_err(|e| fail(glslang_message(&e)))?;
    shader.compile().map_err(|e| fail(glslang_message(&e)))
}

fn glslang_message(e: &glslang::error::GlslangError) -> String {
    use glslang::error::GlslangError::*;
    match e {
        PreprocessError(log) | ParseError(log) | MapIoError(log) | LinkError(log) => {
            log.log.trim_end().to_string()
        }
        other => format!("{other}"),
    }
}

/// The SPIR-V cache directory: `$NX_VULKAN_CACHE_DIR/spirv` (or the user cache dir), off with
/// `NX_VULKAN_SPIRV_CACHE=off`. Keyed by the compiler version in each file, not the device:
/// SPIR-V is device-independent.
fn spirv_cache_dir() -> Option<PathBuf> {
    if std::env::var("NX_VULKAN_SPIRV_CACHE").as_deref() == Ok("off") {
        return None;
    }
    let dir = match std::env::var_os("NX_VULKAN_CACHE_DIR") {
        Some(d) => PathBuf::from(d),
        None => dirs::cache_dir()?.join("nx_vulkan"),
    };
    Some(dir.join("spirv"))
}

const SPIRV_MAGIC: &[u8; 8] = b"NXVKSPV1";

/// One cache file: magic, tag (compiler and target), the full GLSL source (compared byte for
/// byte on read, so a hash collision can never hand back another shader's code), the SPIR-V
/// words and a checksum over everything before it.
pub fn spirv_entry(tag: &str, source: &str, words: &[u32]) -> Vec<u8> {
    let mut out = Vec::with_capacity(64 + tag.len() + source.len() + 4 * words.len());
    out.extend_from_slice(SPIRV_MAGIC);
    for part in [tag.as_bytes(), source.as_bytes()] {
        out.extend_from_slice(&(part.len() as u64).to_le_bytes());
        out.extend_from_slice(part);
    }
    out.extend_from_slice(&(words.len() as u64).to_le_bytes());
    for w in words {
        out.extend_from_slice(&w.to_le_bytes());
    }
    let sum = fnv1a64(&out);
    out.extend_from_slice(&sum.to_le_bytes());
    out
}

/// The SPIR-V in a cache file if it is whole and was made from `source` for `tag`.
pub fn read_spirv_entry(bytes: &[u8], tag: &str, source: &str) -> Option<Vec<u32>> {
    let body = bytes.get(..bytes.len().checked_sub(8)?)?;
    let sum = u64::from_le_bytes(bytes[body.len()..].try_into().ok()?);
    if fnv1a64(body) != sum || body.get(..8)? != SPIRV_MAGIC {
        return None;
    }
    let mut at = 8;
    let part = |at: &mut usize| -> Option<&[u8]> {
        let len = usize::try_from(u64::from_le_bytes(body.get(*at..*at + 8)?.try_into().ok()?)).ok()?;
        let p = body.get(*at + 8..(*at + 8).checked_add(len)?)?;
        *at += 8 + len;
        Some(p)
    };
    if part(&mut at)? != tag.as_bytes() || part(&mut at)? != source.as_bytes() {
        return None;
    }
    let n = usize::try_from(u64::from_le_bytes(body.get(at..at + 8)?.try_into().ok()?)).ok()?;
    let words = body.get(at + 8..)?;
    if words.len() != n.checked_mul(4)? || n == 0 {
        return None;
    }
    Some(words.chunks_exact(4).map(|c| u32::from_le_bytes(c.try_into().unwrap())).collect())
}

fn fnv1a64_seeded(data: &[u8], seed: u64) -> u64 {
    let mut h: u64 = 0xcbf29ce484222325 ^ seed.wrapping_mul(0x9e3779b97f4a7c15);
    for b in data {
        h ^= *b as u64;
        h = h.wrapping_mul(0x100000001b3);
    }
    h
}

fn numbered(source: &str) -> String {
    source.lines().enumerate().map(|(i, l)| format!("{:4} {l}\n", i + 1)).collect()
}

fn pipeline_cache_path(caps: &crate::DeviceCaps) -> Option<PathBuf> {
    if std::env::var("NX_VULKAN_PIPELINE_CACHE").as_deref() == Ok("off") {
        return None;
    }
    let dir = match std::env::var_os("NX_VULKAN_CACHE_DIR") {
        Some(d) => PathBuf::from(d),
        None => dirs::cache_dir()?.join("nx_vulkan"),
    };
    Some(dir.join(format!("pipelines-{}-{}-{SHADER_COMPILER}.bin", caps.pci_id().replace(':', "-"), caps.uuid_hex())))
}

/// Our header in front of the driver's pipeline-cache blob. A file whose header does not match
/// this device and driver exactly, or whose checksum fails, is ignored (and later replaced):
/// vulkano hands a blob to the driver unchecked, and drivers trust it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CacheHeader {
    vendor_id: u32,
    device_id: u32,
    driver_version: u32,
    pipeline_cache_uuid: [u8; 16],
}

const CACHE_MAGIC: &[u8; 8] = b"NXVKPC01";
const CACHE_HEADER_LEN: usize = 8 + 4 * 3 + 16 + 8 + 8;

impl CacheHeader {
    pub fn for_device(caps: &crate::DeviceCaps) -> CacheHeader {
        CacheHeader {
            vendor_id: caps.vendor_id,
            device_id: caps.device_id,
            driver_version: caps.driver_version,
            pipeline_cache_uuid: caps.pipeline_cache_uuid,
        }
    }

    pub fn wrap(&self, data: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(CACHE_HEADER_LEN + data.len());
        out.extend_from_slice(CACHE_MAGIC);
        out.extend_from_slice(&self.vendor_id.to_le_bytes());
        out.extend_from_slice(&self.device_id.to_le_bytes());
        out.extend_from_slice(&self.driver_version.to_le_bytes());
        out.extend_from_slice(&self.pipeline_cache_uuid);
        out.extend_from_slice(&(data.len() as u64).to_le_bytes());
        out.extend_from_slice(&fnv1a64(data).to_le_bytes());
        out.extend_from_slice(data);
        out
    }

    /// The driver blob inside `bytes` if everything matches, else `None`.
    pub fn validate<'b>(&self, bytes: &'b [u8]) -> Option<&'b [u8]> {
        if bytes.len() < CACHE_HEADER_LEN || &bytes[..8] != CACHE_MAGIC {
            return None;
        }
        let expected = self.wrap(&[]);
        // Vendor, device, driver version and UUID must be byte-identical.
        if bytes[8..8 + 28] != expected[8..8 + 28] {
            return None;
        }
        let len = u64::from_le_bytes(bytes[36..44].try_into().ok()?) as usize;
        let sum = u64::from_le_bytes(bytes[44..52].try_into().ok()?);
        let data = bytes.get(CACHE_HEADER_LEN..)?;
        if data.len() != len || fnv1a64(data) != sum {
            return None;
        }
        // The driver's own header (VkPipelineCacheHeaderVersionOne) must agree as well.
        if data.len() >= 32 {
            let vendor = u32::from_le_bytes(data[8..12].try_into().ok()?);
            let device = u32::from_le_bytes(data[12..16].try_into().ok()?);
            if vendor != self.vendor_id || device != self.device_id || data[16..32] != self.pipeline_cache_uuid {
                return None;
            }
        }
        Some(data)
    }
}

fn fnv1a64(data: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf29ce484222325;
    for b in data {
        h ^= *b as u64;
        h = h.wrapping_mul(0x100000001b3);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header() -> CacheHeader {
        CacheHeader { vendor_id: 0x10de, device_id: 0x2335, driver_version: 7, pipeline_cache_uuid: [3; 16] }
    }

    fn driver_blob(h: &CacheHeader) -> Vec<u8> {
        let mut d = vec![];
        d.extend_from_slice(&32u32.to_le_bytes());
        d.extend_from_slice(&1u32.to_le_bytes());
        d.extend_from_slice(&h.vendor_id.to_le_bytes());
        d.extend_from_slice(&h.device_id.to_le_bytes());
        d.extend_from_slice(&h.pipeline_cache_uuid);
        d.extend_from_slice(b"payload");
        d
    }

    /// glslang's errors come back as ShaderCompile with its message and the numbered source;
    /// a NUL byte is an error, not a panic.
    #[test]
    fn compile_errors_name_the_line() {
        let compiler = glslang::Compiler::acquire().expect("glslang");
        let bad = "#version 460\nlayout(local_size_x = 1) in;\nvoid main() {\n    undeclared_thing = 1;\n}\n";
        match compile_glsl(compiler, "broken kernel", bad, ShaderTarget::Vulkan12) {
            Err(EngineError::ShaderCompile { name, message }) => {
                assert_eq!(name, "broken kernel");
                assert!(message.contains("undeclared_thing") && message.contains("0:4"), "{message}");
                assert!(message.contains("   4     undeclared_thing = 1;"), "numbered source: {message}");
            }
            other => panic!("expected ShaderCompile, got {other:?}"),
        }
        assert!(matches!(compile_glsl(compiler, "nul", "#version 460\0", ShaderTarget::Vulkan13), Err(EngineError::ShaderCompile { .. })));
        let good = "#version 460\nlayout(local_size_x = 1) in;\nvoid main() {}\n";
        for target in [ShaderTarget::Vulkan12, ShaderTarget::Vulkan13] {
            let spirv = compile_glsl(compiler, "empty", good, target).expect("compiles");
            // SPIR-V version word: 1.5 for Vulkan 1.2, 1.6 for Vulkan 1.3
            let want = if target == ShaderTarget::Vulkan12 { 0x0001_0500 } else { 0x0001_0600 };
            assert_eq!((spirv[0], spirv[1]), (0x0723_0203, want));
        }
    }

    #[test]
    fn a_matching_file_round_trips() {
        let h = header();
        let blob = driver_blob(&h);
        assert_eq!(h.validate(&h.wrap(&blob)), Some(&blob[..]));
    }

    #[test]
    fn spirv_entries_round_trip_and_reject_damage() {
        let words = [0x0723_0203u32, 7, 8, 9];
        let e = spirv_entry("glslang-16 Vulkan12", "void main() {}", &words);
        assert_eq!(read_spirv_entry(&e, "glslang-16 Vulkan12", "void main() {}").as_deref(), Some(&words[..]));
        // other source, other tag (compiler version, target), truncation, a flipped bit, junk
        assert!(read_spirv_entry(&e, "glslang-16 Vulkan12", "void main() { }").is_none());
        assert!(read_spirv_entry(&e, "glslang-17 Vulkan12", "void main() {}").is_none());
        assert!(read_spirv_entry(&e, "glslang-16 Vulkan13", "void main() {}").is_none());
        for cut in [0, 1, 8, 20, e.len() - 9, e.len() - 1] {
            assert!(read_spirv_entry(&e[..cut], "glslang-16 Vulkan12", "void main() {}").is_none(), "cut {cut}");
        }
        for i in 0..e.len() {
            let mut d = e.clone();
            d[i] ^= 0x10;
            assert!(read_spirv_entry(&d, "glslang-16 Vulkan12", "void main() {}").is_none(), "flip {i}");
        }
        assert!(read_spirv_entry(&[0xffu8; 100], "t", "s").is_none());
    }

    #[test]
    fn damaged_or_foreign_files_are_rejected() {
        let h = header();
        let good = h.wrap(&driver_blob(&h));
        // any flipped byte in header or data
        for i in [0, 9, 13, 17, 25, 40, 47, 60, good.len() - 1] {
            let mut bad = good.clone();
            bad[i] ^= 0x55;
            assert_eq!(h.validate(&bad), None, "flipped byte {i}");
        }
        assert_eq!(h.validate(&good[..good.len() - 3]), None, "truncated");
        assert_eq!(h.validate(b"garbage"), None);
        assert_eq!(h.validate(&[]), None);
        let other = CacheHeader { driver_version: 8, ..header() };
        assert_eq!(other.validate(&good), None, "other driver version");
        // our header right, driver header from another device
        let mut foreign = driver_blob(&h);
        foreign[12] ^= 1;
        assert_eq!(h.validate(&h.wrap(&foreign)), None);
    }
}
