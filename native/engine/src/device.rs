//! Device discovery and selection, and the capabilities read once per device.
//!
//! A device is chosen explicitly: by index or by (part of its) name, through the API or the
//! `NX_VULKAN_DEVICE` environment variable. A request that matches nothing is an error; the
//! engine never switches to another device on its own.

use crate::error::{EngineError, Result};
use std::sync::Arc;
use vulkano::device::physical::{PhysicalDevice, PhysicalDeviceType};
use vulkano::instance::{Instance, InstanceCreateFlags, InstanceCreateInfo};
use vulkano::VulkanLibrary;

/// What a device can do, read once when it is opened. Kernels are chosen from this.
#[derive(Clone, Debug)]
pub struct DeviceCaps {
    pub index: usize,
    pub name: String,
    pub device_type: String,
    pub vendor_id: u32,
    pub device_id: u32,
    pub driver_name: String,
    pub driver_info: String,
    pub driver_version: u32,
    pub api_version: String,
    pub device_uuid: [u8; 16],
    pub pipeline_cache_uuid: [u8; 16],
    pub float64: bool,
    pub float16: bool,
    pub int8: bool,
    pub int16: bool,
    pub int64: bool,
    pub storage_8bit: bool,
    pub storage_16bit: bool,
    pub buffer_device_address: bool,
    /// VK_KHR_cooperative_matrix with its `cooperativeMatrix` feature (enabled at creation).
    pub cooperative_matrix: bool,
    /// The driver's cooperative-matrix property list: every M×N×K shape and type combination
    /// it supports (tile shapes are chosen from this, never assumed).
    pub coopmat_shapes: Vec<CoopMatShape>,
    /// VK_KHR_shader_bfloat16: `shaderBFloat16Type`, `shaderBFloat16CooperativeMatrix`,
    /// `shaderBFloat16DotProduct` (read through hand-chained structs: ash 0.38 predates them).
    pub bfloat16: bool,
    pub bfloat16_coopmat: bool,
    pub bfloat16_dot: bool,
    /// VK_NV_cooperative_matrix2 with its tensor-addressing, workgroup-scope and
    /// flexible-dimension features (all three enabled at creation).
    pub coopmat2: bool,
    /// VK_NV_cooperative_matrix2's flexible-dimension list: the workgroup-scope type
    /// combinations and the granularities their M, N, K must be multiples of.
    pub coopmat2_shapes: Vec<CoopMatFlexShape>,
    /// `cooperativeMatrixWorkgroupScopeMaxWorkgroupSize` and
    /// `cooperativeMatrixFlexibleDimensionsMaxDimension` (0 without coopmat2).
    pub coopmat2_max_workgroup: u32,
    pub coopmat2_max_dimension: u32,
    /// `shaderIntegerDotProduct`, and whether packed 4×8-bit signed dot products are accelerated.
    pub integer_dot_product: bool,
    pub int8_dot_accelerated: bool,
    /// `vulkanMemoryModel` (cooperative-matrix shaders need it).
    pub vulkan_memory_model: bool,
    pub subgroup_size: u32,
    /// Compute shaders may use subgroup shuffle-relative operations (`subgroupShuffleDown`):
    /// the reduction family's last tree levels then run in registers (`reduce.rs`).
    pub subgroup_shuffle_relative: bool,
    pub max_workgroup_invocations: u32,
    pub max_workgroup_count: [u32; 3],
    pub max_shared_memory: u32,
    pub max_push_constants: u32,
    pub max_storage_buffer_range: u32,
    pub max_allocation_size: u64,
    pub device_local_bytes: u64,
    /// Nanoseconds per timestamp tick (for the profiler).
    pub timestamp_period_ns: f32,
}

impl DeviceCaps {
    pub(crate) fn read(index: usize, physical: &PhysicalDevice) -> DeviceCaps {
        let p = physical.properties();
        let f = physical.supported_features();
        let ext = physical.supported_extensions();
        let mem = physical.memory_properties();
        let extra = ExtraFeatures::read(physical);
        let device_local_bytes = mem
            .memory_heaps
            .iter()
            .filter(|h| h.flags.intersects(vulkano::memory::MemoryHeapFlags::DEVICE_LOCAL))
            .map(|h| h.size)
            .max()
            .unwrap_or(0);
        DeviceCaps {
            timestamp_period_ns: p.timestamp_period,
            index,
            name: p.device_name.clone(),
            device_type: match p.device_type {
                PhysicalDeviceType::DiscreteGpu => "discrete-gpu",
                PhysicalDeviceType::IntegratedGpu => "integrated-gpu",
                PhysicalDeviceType::VirtualGpu => "virtual-gpu",
                PhysicalDeviceType::Cpu => "cpu",
                _ => "other",
            }
            .to_string(),
            vendor_id: p.vendor_id,
            device_id: p.device_id,
            driver_name: p.driver_name.clone().unwrap_or_default(),
            driver_info: p.driver_info.clone().unwrap_or_default(),
            driver_version: p.driver_version,
            api_version: p.api_version.to_string(),
            device_uuid: p.device_uuid.unwrap_or_default(),
            pipeline_cache_uuid: p.pipeline_cache_uuid,
            float64: f.shader_float64,
            float16: f.shader_float16,
            int8: f.shader_int8,
            int16: f.shader_int16,
            int64: f.shader_int64,
            storage_8bit: f.storage_buffer8_bit_access,
            storage_16bit: f.storage_buffer16_bit_access,
            buffer_device_address: f.buffer_device_address,
            cooperative_matrix: ext.khr_cooperative_matrix && f.cooperative_matrix,
            coopmat_shapes: if ext.khr_cooperative_matrix && f.cooperative_matrix { coopmat_properties(physical) } else { vec![] },
            bfloat16: extra.bfloat16_type,
            bfloat16_coopmat: extra.bfloat16_coopmat,
            bfloat16_dot: extra.bfloat16_dot,
            coopmat2: extra.coopmat2,
            coopmat2_shapes: if extra.coopmat2 { coopmat2_flexible_dimensions(physical) } else { vec![] },
            coopmat2_max_workgroup: extra.coopmat2_max_workgroup,
            coopmat2_max_dimension: extra.coopmat2_max_dimension,
            integer_dot_product: f.shader_integer_dot_product,
            int8_dot_accelerated: p.integer_dot_product4x8_bit_packed_signed_accelerated.unwrap_or(false),
            vulkan_memory_model: f.vulkan_memory_model,
            subgroup_size: p.subgroup_size.unwrap_or(1),
            subgroup_shuffle_relative: p
                .subgroup_supported_stages
                .is_some_and(|st| st.intersects(vulkano::shader::ShaderStages::COMPUTE))
                && p
                    .subgroup_supported_operations
                    .is_some_and(|op| op.intersects(vulkano::device::physical::SubgroupFeatures::SHUFFLE_RELATIVE)),
            max_workgroup_invocations: p.max_compute_work_group_invocations,
            max_workgroup_count: p.max_compute_work_group_count,
            max_shared_memory: p.max_compute_shared_memory_size,
            max_push_constants: p.max_push_constants_size,
            max_storage_buffer_range: p.max_storage_buffer_range,
            max_allocation_size: p.max_memory_allocation_size.unwrap_or(1 << 30),
            device_local_bytes,
        }
    }

    /// Features the engine needs and this device lacks (empty: the device is usable).
    ///
    /// Every kernel addresses memory through buffer device addresses (no descriptor sets, no
    /// per-binding size limit), loads and stores 8/16-bit elements directly, and evaluates float
    /// math in f64 and integer math in 64 bits — the exact contract of Nx.BinaryBackend.
    pub fn missing_requirements(&self) -> Vec<&'static str> {
        let mut missing = vec![];
        let checks = [
            (self.buffer_device_address, "bufferDeviceAddress"),
            (self.int64, "shaderInt64"),
            (self.float64, "shaderFloat64 (f32/f16/bf16 math is evaluated in f64)"),
            (self.int8, "shaderInt8"),
            (self.int16, "shaderInt16"),
            (self.storage_8bit, "storageBuffer8BitAccess"),
            (self.storage_16bit, "storageBuffer16BitAccess"),
        ];
        for (ok, what) in checks {
            if !ok {
                missing.push(what);
            }
        }
        missing
    }

    /// The best subgroup-scope cooperative-matrix shape for `input`×`input` products
    /// accumulated in f32 — int32 for int8 — (largest M·N·K; ties: larger K), if the device has one and can
    /// compile for it (bf16 needs `shaderBFloat16CooperativeMatrix`, f16 `shaderFloat16`).
    pub fn coopmat_shape(&self, input: CoopMatType) -> Option<CoopMatShape> {
        if !self.cooperative_matrix || !self.vulkan_memory_model || !self.float16 {
            return None;
        }
        if input == CoopMatType::BF16 && !(self.bfloat16 && self.bfloat16_coopmat) {
            return None;
        }
        let acc = input.accumulator();
        self.coopmat_shapes
            .iter()
            .filter(|s| s.a == input && s.b == input && s.c == acc && s.result == acc && s.scope == "subgroup")
            // shapes the kernel's 2×4 / 2×2 subgroup grid can tile (at most 64×64 per subgroup)
            .filter(|s| (8..=32).contains(&s.m) && (8..=32).contains(&s.n) && (8..=32).contains(&s.k))
            .max_by_key(|s| (s.m * s.n * s.k, s.k))
            .cloned()
    }

    /// `vendor:device` in hex, as the pipeline cache header records it.
    pub fn pci_id(&self) -> String {
        format!("{:04x}:{:04x}", self.vendor_id, self.device_id)
    }

    pub fn uuid_hex(&self) -> String {
        self.device_uuid.iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// A component type in VK_KHR_cooperative_matrix's property list.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CoopMatType {
    F16,
    F32,
    F64,
    BF16,
    I8,
    I16,
    I32,
    I64,
    U8,
    U16,
    U32,
    U64,
    /// A type this build does not name (fp8 and later additions): its raw enum value.
    Other(i32),
}

impl CoopMatType {
    /// The accumulator (and result) type the engine's products of this input type use: int32
    /// for int8, f32 for the float types.
    pub fn accumulator(self) -> CoopMatType {
        if self == CoopMatType::I8 {
            CoopMatType::I32
        } else {
            CoopMatType::F32
        }
    }

    fn from_raw(v: i32) -> CoopMatType {
        use CoopMatType::*;
        match v {
            0 => F16,
            1 => F32,
            2 => F64,
            3 => I8,
            4 => I16,
            5 => I32,
            6 => I64,
            7 => U8,
            8 => U16,
            9 => U32,
            10 => U64,
            1000141000 => BF16,
            other => Other(other),
        }
    }

    pub fn name(self) -> String {
        use CoopMatType::*;
        match self {
            F16 => "f16".into(),
            F32 => "f32".into(),
            F64 => "f64".into(),
            BF16 => "bf16".into(),
            I8 => "s8".into(),
            I16 => "s16".into(),
            I32 => "s32".into(),
            I64 => "s64".into(),
            U8 => "u8".into(),
            U16 => "u16".into(),
            U32 => "u32".into(),
            U64 => "u64".into(),
            Other(v) => format!("type{v}"),
        }
    }
}

/// One entry of the cooperative-matrix property list: `result = A(m×k) · B(k×n) + C(m×n)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CoopMatShape {
    pub m: u32,
    pub n: u32,
    pub k: u32,
    pub a: CoopMatType,
    pub b: CoopMatType,
    pub c: CoopMatType,
    pub result: CoopMatType,
    pub saturating: bool,
    /// "subgroup", "workgroup", "device", "queue-family" or the raw value.
    pub scope: String,
}

impl std::fmt::Display for CoopMatShape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}x{}x{} {}*{}+{}->{}{} ({})",
            self.m,
            self.n,
            self.k,
            self.a.name(),
            self.b.name(),
            self.c.name(),
            self.result.name(),
            if self.saturating { " sat" } else { "" },
            self.scope
        )
    }
}

/// One entry of VK_NV_cooperative_matrix2's flexible-dimension list: matrices of this type
/// combination and scope may have any M, N, K that are multiples of the granularities (up to
/// `coopmat2_max_dimension`), in workgroups of `workgroup_invocations`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CoopMatFlexShape {
    pub m_granularity: u32,
    pub n_granularity: u32,
    pub k_granularity: u32,
    pub a: CoopMatType,
    pub b: CoopMatType,
    pub c: CoopMatType,
    pub result: CoopMatType,
    pub saturating: bool,
    pub scope: String,
    pub workgroup_invocations: u32,
}

impl std::fmt::Display for CoopMatFlexShape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}x{}x{}* {}*{}+{}->{}{} ({}, {} invocations)",
            self.m_granularity,
            self.n_granularity,
            self.k_granularity,
            self.a.name(),
            self.b.name(),
            self.c.name(),
            self.result.name(),
            if self.saturating { " sat" } else { "" },
            self.scope,
            self.workgroup_invocations
        )
    }
}

fn scope_name(raw: i32) -> String {
    match raw {
        1 => "device".into(),
        2 => "workgroup".into(),
        3 => "subgroup".into(),
        5 => "queue-family".into(),
        v => format!("scope{v}"),
    }
}

/// VkCooperativeMatrixFlexibleDimensionsPropertiesNV (not in ash 0.38).
#[repr(C)]
#[derive(Clone, Copy)]
struct FlexDimsRaw {
    s_type: i32,
    p_next: *mut std::ffi::c_void,
    m_granularity: u32,
    n_granularity: u32,
    k_granularity: u32,
    a_type: i32,
    b_type: i32,
    c_type: i32,
    result_type: i32,
    saturating_accumulation: u32,
    scope: i32,
    workgroup_invocations: u32,
}
const STYPE_COOPMAT2_FLEX_DIMS: i32 = 1000593001;
const STYPE_COOPMAT2_PROPERTIES: i32 = 1000593002;

/// VkPhysicalDeviceCooperativeMatrix2PropertiesNV (not in ash 0.38).
#[repr(C)]
#[derive(Clone, Copy)]
struct CoopMat2PropertiesRaw {
    s_type: i32,
    p_next: *mut std::ffi::c_void,
    workgroup_scope_max_workgroup_size: u32,
    flexible_dimensions_max_dimension: u32,
    workgroup_scope_reserved_shared_memory: u32,
}

/// Vulkan's two-call enumeration: `get(count, null)` for the count, then `get(count, array)`
/// into `count` copies of `blank` (its sType set where the type has one). Empty when either
/// call fails.
///
/// # Safety
/// `get` must be a Vulkan enumeration command (with its other arguments valid) that writes
/// at most `*count` entries of `T` to a non-null array.
pub(crate) unsafe fn enumerate<T: Clone>(blank: T, get: impl Fn(*mut u32, *mut T) -> ash::vk::Result) -> Vec<T> {
    let mut count = 0u32;
    if get(&mut count, std::ptr::null_mut()) != ash::vk::Result::SUCCESS {
        return vec![];
    }
    let mut items = vec![blank; count as usize];
    let r = get(&mut count, items.as_mut_ptr());
    if r != ash::vk::Result::SUCCESS && r != ash::vk::Result::INCOMPLETE {
        return vec![];
    }
    items.truncate(count as usize);
    items
}

/// vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV, looked up by name
/// (only called when the device lists VK_NV_cooperative_matrix2).
fn coopmat2_flexible_dimensions(physical: &PhysicalDevice) -> Vec<CoopMatFlexShape> {
    use vulkano::VulkanObject;
    type Get = unsafe extern "system" fn(ash::vk::PhysicalDevice, *mut u32, *mut FlexDimsRaw) -> ash::vk::Result;
    let instance = physical.instance();
    let name = c"vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV";
    // SAFETY: a live instance handle and a NUL-terminated name.
    let Some(raw) = (unsafe { instance.library().get_instance_proc_addr(instance.handle(), name.as_ptr()) }) else { return vec![] };
    // SAFETY: the loader returned this entry point for this name, whose signature is `Get`.
    let get: Get = unsafe { std::mem::transmute::<unsafe extern "system" fn(), Get>(raw) };
    let blank = FlexDimsRaw {
        s_type: STYPE_COOPMAT2_FLEX_DIMS,
        p_next: std::ptr::null_mut(),
        m_granularity: 0,
        n_granularity: 0,
        k_granularity: 0,
        a_type: 0,
        b_type: 0,
        c_type: 0,
        result_type: 0,
        saturating_accumulation: 0,
        scope: 0,
        workgroup_invocations: 0,
    };
    // SAFETY: the command for a valid physical device, with structs of its sType.
    let props = unsafe { enumerate(blank, |count, array| get(physical.handle(), count, array)) };
    props
        .iter()
        .map(|p| CoopMatFlexShape {
            m_granularity: p.m_granularity,
            n_granularity: p.n_granularity,
            k_granularity: p.k_granularity,
            a: CoopMatType::from_raw(p.a_type),
            b: CoopMatType::from_raw(p.b_type),
            c: CoopMatType::from_raw(p.c_type),
            result: CoopMatType::from_raw(p.result_type),
            saturating: p.saturating_accumulation != 0,
            scope: scope_name(p.scope),
            workgroup_invocations: p.workgroup_invocations,
        })
        .collect()
}

/// vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR (only called when the device lists the
/// extension: the loader's entry point exists then).
fn coopmat_properties(physical: &PhysicalDevice) -> Vec<CoopMatShape> {
    use vulkano::VulkanObject;
    let fns = physical.instance().fns();
    let get = fns.khr_cooperative_matrix.get_physical_device_cooperative_matrix_properties_khr;
    // SAFETY: the command for a valid physical device; default structs carry their sType.
    let props = unsafe { enumerate(ash::vk::CooperativeMatrixPropertiesKHR::default(), |count, array| get(physical.handle(), count, array)) };
    props
        .iter()
        .map(|p| CoopMatShape {
            m: p.m_size,
            n: p.n_size,
            k: p.k_size,
            a: CoopMatType::from_raw(p.a_type.as_raw()),
            b: CoopMatType::from_raw(p.b_type.as_raw()),
            c: CoopMatType::from_raw(p.c_type.as_raw()),
            result: CoopMatType::from_raw(p.result_type.as_raw()),
            saturating: p.saturating_accumulation != 0,
            scope: scope_name(p.scope.as_raw()),
        })
        .collect()
}

/// VkPhysicalDeviceShaderBfloat16FeaturesKHR (VK_KHR_shader_bfloat16; not in ash 0.38).
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct Bfloat16Features {
    pub s_type: i32,
    pub p_next: *mut std::ffi::c_void,
    pub shader_bfloat16_type: u32,
    pub shader_bfloat16_dot_product: u32,
    pub shader_bfloat16_cooperative_matrix: u32,
}
pub(crate) const STYPE_BFLOAT16_FEATURES: i32 = 1000141000;

/// VkPhysicalDeviceCooperativeMatrix2FeaturesNV (VK_NV_cooperative_matrix2; not in ash 0.38).
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct CoopMat2Features {
    pub s_type: i32,
    pub p_next: *mut std::ffi::c_void,
    pub workgroup_scope: u32,
    pub flexible_dimensions: u32,
    pub reductions: u32,
    pub conversions: u32,
    pub per_element_operations: u32,
    pub tensor_addressing: u32,
    pub block_loads: u32,
}
pub(crate) const STYPE_COOPMAT2_FEATURES: i32 = 1000593000;
pub(crate) const EXT_BFLOAT16: &str = "VK_KHR_shader_bfloat16";
pub(crate) const EXT_COOPMAT2: &str = "VK_NV_cooperative_matrix2";

/// Features vulkano 0.35 does not know, read with vkGetPhysicalDeviceFeatures2 and
/// hand-chained structs (only for extensions the device lists).
#[derive(Default, Clone, Copy)]
pub(crate) struct ExtraFeatures {
    pub has_bfloat16_ext: bool,
    pub has_coopmat2_ext: bool,
    pub bfloat16_type: bool,
    pub bfloat16_coopmat: bool,
    pub bfloat16_dot: bool,
    pub coopmat2: bool,
    pub coopmat2_max_workgroup: u32,
    pub coopmat2_max_dimension: u32,
}

impl ExtraFeatures {
    pub(crate) fn read(physical: &PhysicalDevice) -> ExtraFeatures {
        use vulkano::VulkanObject;
        let names = raw_extension_names(physical);
        let mut x = ExtraFeatures {
            has_bfloat16_ext: names.iter().any(|n| n == EXT_BFLOAT16),
            has_coopmat2_ext: names.iter().any(|n| n == EXT_COOPMAT2),
            ..Default::default()
        };
        // Below Vulkan 1.3 `create_device` does not chain these structs, so they are not
        // reported as usable either.
        if !(x.has_bfloat16_ext || x.has_coopmat2_ext) || physical.api_version() < vulkano::Version::V1_3 {
            return x;
        }
        let mut bf = Bfloat16Features {
            s_type: STYPE_BFLOAT16_FEATURES,
            p_next: std::ptr::null_mut(),
            shader_bfloat16_type: 0,
            shader_bfloat16_dot_product: 0,
            shader_bfloat16_cooperative_matrix: 0,
        };
        let mut cm2 = CoopMat2Features {
            s_type: STYPE_COOPMAT2_FEATURES,
            p_next: std::ptr::null_mut(),
            workgroup_scope: 0,
            flexible_dimensions: 0,
            reductions: 0,
            conversions: 0,
            per_element_operations: 0,
            tensor_addressing: 0,
            block_loads: 0,
        };
        let mut head: *mut std::ffi::c_void = std::ptr::null_mut();
        if x.has_bfloat16_ext {
            bf.p_next = head;
            head = &mut bf as *mut _ as *mut _;
        }
        if x.has_coopmat2_ext {
            cm2.p_next = head;
            head = &mut cm2 as *mut _ as *mut _;
        }
        let mut f2 = ash::vk::PhysicalDeviceFeatures2 { p_next: head, ..Default::default() };
        let fns = physical.instance().fns();
        // SAFETY: every struct in the chain is #[repr(C)] with its registry sType, lives until
        // the call returns, and belongs to an extension the device lists.
        unsafe { (fns.v1_1.get_physical_device_features2)(physical.handle(), &mut f2) };
        x.bfloat16_type = x.has_bfloat16_ext && bf.shader_bfloat16_type != 0;
        x.bfloat16_coopmat = x.has_bfloat16_ext && bf.shader_bfloat16_cooperative_matrix != 0;
        x.bfloat16_dot = x.has_bfloat16_ext && bf.shader_bfloat16_dot_product != 0;
        x.coopmat2 = x.has_coopmat2_ext && cm2.tensor_addressing != 0 && cm2.workgroup_scope != 0 && cm2.flexible_dimensions != 0;
        if x.coopmat2 {
            let mut props = CoopMat2PropertiesRaw {
                s_type: STYPE_COOPMAT2_PROPERTIES,
                p_next: std::ptr::null_mut(),
                workgroup_scope_max_workgroup_size: 0,
                flexible_dimensions_max_dimension: 0,
                workgroup_scope_reserved_shared_memory: 0,
            };
            let mut p2 = ash::vk::PhysicalDeviceProperties2 { p_next: &mut props as *mut _ as *mut _, ..Default::default() };
            // SAFETY: one #[repr(C)] struct with its registry sType, live until the call
            // returns, for an extension the device lists.
            unsafe { (fns.v1_1.get_physical_device_properties2)(physical.handle(), &mut p2) };
            x.coopmat2_max_workgroup = props.workgroup_scope_max_workgroup_size;
            x.coopmat2_max_dimension = props.flexible_dimensions_max_dimension;
        }
        x
    }
}

/// Every device extension name the driver lists (vulkano's list omits ones it does not know).
fn raw_extension_names(physical: &PhysicalDevice) -> Vec<String> {
    use vulkano::VulkanObject;
    let fns = physical.instance().fns();
    let get = fns.v1_0.enumerate_device_extension_properties;
    // SAFETY: the command for a valid physical device and no layer (a null name).
    let props = unsafe { enumerate(ash::vk::ExtensionProperties::default(), |count, array| get(physical.handle(), std::ptr::null(), count, array)) };
    props.iter().filter_map(|p| p.extension_name_as_c_str().ok().map(|c| c.to_string_lossy().into_owned())).collect()
}

/// Creates the logical device with what the engine needs, plus cooperative-matrix, bf16,
/// coopmat2, integer-dot-product and memory-model features where the device has them.
/// Devices without VK_KHR_shader_bfloat16 and VK_NV_cooperative_matrix2 (lavapipe) go through
/// vulkano as before; the others need structs vulkano does not know, so the device is created
/// with ash (the same features plus the hand-chained ones) and handed to vulkano.
pub(crate) fn create_device(
    physical: Arc<PhysicalDevice>,
    family: u32,
    caps: &DeviceCaps,
) -> Result<(Arc<vulkano::device::Device>, Arc<vulkano::device::Queue>)> {
    use vulkano::device::{Device, DeviceCreateInfo, DeviceExtensions, DeviceFeatures, QueueCreateInfo};
    use vulkano::VulkanObject;
    let supported = physical.supported_features();
    let features = DeviceFeatures {
        buffer_device_address: true,
        shader_int64: true,
        shader_float64: true,
        shader_int8: true,
        shader_int16: true,
        storage_buffer8_bit_access: true,
        storage_buffer16_bit_access: true,
        shader_float16: caps.float16,
        vulkan_memory_model: supported.vulkan_memory_model,
        vulkan_memory_model_device_scope: supported.vulkan_memory_model_device_scope,
        cooperative_matrix: caps.cooperative_matrix,
        shader_integer_dot_product: supported.shader_integer_dot_product,
        ..DeviceFeatures::empty()
    };
    // NX_VULKAN_KERNEL_STATS=1 (a measurement aid): the driver's statistics of every kernel
    // built (registers, shared memory, ...; kernel.rs), where the device offers them.
    let kernel_stats = std::env::var("NX_VULKAN_KERNEL_STATS").is_ok_and(|v| v == "1")
        && physical.supported_extensions().khr_pipeline_executable_properties
        && supported.pipeline_executable_info;
    let features = DeviceFeatures { pipeline_executable_info: kernel_stats, ..features };
    let extensions = DeviceExtensions {
        khr_cooperative_matrix: caps.cooperative_matrix,
        khr_pipeline_executable_properties: kernel_stats,
        ..DeviceExtensions::empty()
    };
    let create_info = || DeviceCreateInfo {
        queue_create_infos: vec![QueueCreateInfo { queue_family_index: family, ..Default::default() }],
        enabled_extensions: extensions,
        enabled_features: features,
        ..Default::default()
    };
    let extra = ExtraFeatures::read(&physical);
    let hand_chained = extra.bfloat16_type || extra.coopmat2;
    if !hand_chained || physical.api_version() < vulkano::Version::V1_3 {
        let (device, mut queues) = Device::new(physical, create_info()).map_err(|e| EngineError::vk("creating the device", e))?;
        let queue = queues.next().ok_or_else(|| EngineError::Vulkan("no queue".into()))?;
        return Ok((device, queue));
    }
    let vk = ash::vk::TRUE;
    let b = |x: bool| if x { vk } else { ash::vk::FALSE };
    let mut bf = Bfloat16Features {
        s_type: STYPE_BFLOAT16_FEATURES,
        p_next: std::ptr::null_mut(),
        shader_bfloat16_type: b(extra.bfloat16_type),
        shader_bfloat16_dot_product: b(extra.bfloat16_dot),
        shader_bfloat16_cooperative_matrix: b(extra.bfloat16_coopmat),
    };
    let mut cm2 = CoopMat2Features {
        s_type: STYPE_COOPMAT2_FEATURES,
        p_next: std::ptr::null_mut(),
        workgroup_scope: b(extra.coopmat2),
        flexible_dimensions: b(extra.coopmat2),
        reductions: 0,
        conversions: 0,
        per_element_operations: 0,
        tensor_addressing: b(extra.coopmat2),
        block_loads: 0,
    };
    let mut coop = ash::vk::PhysicalDeviceCooperativeMatrixFeaturesKHR::default().cooperative_matrix(caps.cooperative_matrix);
    let mut v13 = ash::vk::PhysicalDeviceVulkan13Features::default().shader_integer_dot_product(features.shader_integer_dot_product);
    let mut v12 = ash::vk::PhysicalDeviceVulkan12Features::default()
        .buffer_device_address(true)
        .shader_int8(true)
        .shader_float16(features.shader_float16)
        .storage_buffer8_bit_access(true)
        .vulkan_memory_model(features.vulkan_memory_model)
        .vulkan_memory_model_device_scope(features.vulkan_memory_model_device_scope);
    let mut v11 = ash::vk::PhysicalDeviceVulkan11Features::default().storage_buffer16_bit_access(true);
    let core = ash::vk::PhysicalDeviceFeatures::default().shader_int64(true).shader_float64(true).shader_int16(true);
    let mut f2 = ash::vk::PhysicalDeviceFeatures2::default().features(core);
    // Chain: f2 → v11 → v12 → v13 → coop → [bf16] → [coopmat2]
    let mut tail: *mut std::ffi::c_void = std::ptr::null_mut();
    let mut ext_names: Vec<std::ffi::CString> = vec![];
    if extra.coopmat2 {
        cm2.p_next = tail;
        tail = &mut cm2 as *mut _ as *mut _;
        ext_names.push(std::ffi::CString::new(EXT_COOPMAT2).unwrap_or_default());
    }
    if extra.bfloat16_type {
        bf.p_next = tail;
        tail = &mut bf as *mut _ as *mut _;
        ext_names.push(std::ffi::CString::new(EXT_BFLOAT16).unwrap_or_default());
    }
    let mut stats = ash::vk::PhysicalDevicePipelineExecutablePropertiesFeaturesKHR::default().pipeline_executable_info(true);
    if kernel_stats {
        stats.p_next = tail;
        tail = &mut stats as *mut _ as *mut _;
        ext_names.push(std::ffi::CString::new("VK_KHR_pipeline_executable_properties").unwrap_or_default());
    }
    if caps.cooperative_matrix {
        coop.p_next = tail;
        tail = &mut coop as *mut _ as *mut _;
        ext_names.push(std::ffi::CString::new("VK_KHR_cooperative_matrix").unwrap_or_default());
    }
    v13.p_next = tail;
    v12.p_next = &mut v13 as *mut _ as *mut _;
    v11.p_next = &mut v12 as *mut _ as *mut _;
    f2.p_next = &mut v11 as *mut _ as *mut _;
    let ext_ptrs: Vec<*const std::ffi::c_char> = ext_names.iter().map(|c| c.as_ptr()).collect();
    let priorities = [1.0f32];
    let queue_info = [ash::vk::DeviceQueueCreateInfo::default().queue_family_index(family).queue_priorities(&priorities)];
    let mut info = ash::vk::DeviceCreateInfo::default().queue_create_infos(&queue_info).enabled_extension_names(&ext_ptrs);
    info.p_next = &f2 as *const _ as *const _;
    let fns = physical.instance().fns();
    let mut handle = ash::vk::Device::null();
    // SAFETY: every chained struct is live until the call returns, each feature is one the
    // device reports, and each extension is one it lists.
    let r = unsafe { (fns.v1_0.create_device)(physical.handle(), &info, std::ptr::null(), &mut handle) };
    if r != ash::vk::Result::SUCCESS {
        return Err(EngineError::vk("creating the device (with cooperative-matrix features)", format!("{r:?}")));
    }
    // SAFETY: `handle` was created from `physical` with exactly `create_info()`'s queues,
    // features and vulkano-known extensions (plus the hand-chained ones vulkano ignores).
    let (device, mut queues) = unsafe { Device::from_handle(physical, handle, create_info()) };
    let queue = queues.next().ok_or_else(|| EngineError::Vulkan("no queue".into()))?;
    Ok((device, queue))
}

pub(crate) fn instance() -> Result<Arc<Instance>> {
    static INSTANCE: once_cell::sync::OnceCell<Arc<Instance>> = once_cell::sync::OnceCell::new();
    INSTANCE
        .get_or_try_init(|| {
            let library = VulkanLibrary::new()
                .map_err(|e| EngineError::NoDevice(format!("cannot load the Vulkan loader: {e}")))?;
            Instance::new(
                library,
                InstanceCreateInfo {
                    flags: InstanceCreateFlags::ENUMERATE_PORTABILITY,
                    application_name: Some("nx_vulkan".into()),
                    ..Default::default()
                },
            )
            .map_err(|e| EngineError::NoDevice(format!("cannot create a Vulkan instance: {e}")))
        })
        .cloned()
}

pub(crate) fn physical_devices() -> Result<Vec<Arc<PhysicalDevice>>> {
    let devices: Vec<_> = instance()?
        .enumerate_physical_devices()
        .map_err(|e| EngineError::NoDevice(format!("cannot enumerate devices: {e}")))?
        .collect();
    Ok(devices)
}

/// Every Vulkan device the loader reports, in the loader's order (the index used to select one).
pub fn list_devices() -> Result<Vec<DeviceCaps>> {
    Ok(physical_devices()?
        .iter()
        .enumerate()
        .map(|(i, p)| DeviceCaps::read(i, p))
        .collect())
}

/// How a device is requested.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeviceSelector {
    /// `NX_VULKAN_DEVICE` if set, else the first discrete GPU, else the first device.
    Default,
    Index(usize),
    /// A case-insensitive substring of the device name.
    Name(String),
}

impl DeviceSelector {
    /// Reads `NX_VULKAN_DEVICE` (an index or a name); `Default` when unset or empty.
    pub fn from_env() -> DeviceSelector {
        match std::env::var("NX_VULKAN_DEVICE") {
            Ok(v) if !v.trim().is_empty() => DeviceSelector::parse(v.trim()),
            _ => DeviceSelector::Default,
        }
    }

    pub fn parse(s: &str) -> DeviceSelector {
        match s.parse::<usize>() {
            Ok(i) => DeviceSelector::Index(i),
            Err(_) => DeviceSelector::Name(s.to_string()),
        }
    }
}

pub(crate) fn select(selector: &DeviceSelector) -> Result<(usize, Arc<PhysicalDevice>)> {
    let devices = physical_devices()?;
    if devices.is_empty() {
        return Err(EngineError::NoDevice(
            "the Vulkan loader reports no devices (install a driver, e.g. mesa-vulkan-drivers for lavapipe)".into(),
        ));
    }
    let describe = || {
        devices
            .iter()
            .enumerate()
            .map(|(i, d)| format!("{i}: {}", d.properties().device_name))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let found = match selector {
        DeviceSelector::Default => {
            let discrete = devices
                .iter()
                .position(|d| d.properties().device_type == PhysicalDeviceType::DiscreteGpu);
            Some(discrete.unwrap_or(0))
        }
        DeviceSelector::Index(i) => (*i < devices.len()).then_some(*i),
        DeviceSelector::Name(name) => {
            let needle = name.to_lowercase();
            devices
                .iter()
                .position(|d| d.properties().device_name.to_lowercase().contains(&needle))
        }
    };
    match found {
        Some(i) => Ok((i, devices[i].clone())),
        None => Err(EngineError::DeviceNotFound {
            requested: match selector {
                DeviceSelector::Index(i) => i.to_string(),
                DeviceSelector::Name(n) => n.clone(),
                DeviceSelector::Default => "default".into(),
            },
            available: describe(),
        }),
    }
}

/// The text `nx-vulkan info` and `mix nx_vulkan.info` print: every device and what it can do.
pub fn info_report() -> Result<String> {
    use std::fmt::Write;
    let devices = list_devices()?;
    let selected = select(&DeviceSelector::from_env()).map(|(i, _)| i);
    let mut s = String::new();
    writeln!(s, "nx_vulkan {} — {} Vulkan device(s)", env!("CARGO_PKG_VERSION"), devices.len()).unwrap();
    for c in &devices {
        let mark = if selected.as_ref().ok() == Some(&c.index) { "*" } else { " " };
        writeln!(s, "{mark} [{}] {} ({}, {})", c.index, c.name, c.device_type, c.pci_id()).unwrap();
        writeln!(s, "      driver: {} {} (version {:#x}), Vulkan {}", c.driver_name, c.driver_info, c.driver_version, c.api_version).unwrap();
        writeln!(
            s,
            "      types: f64={} f16={} int8={} int16={} int64={} storage8={} storage16={} bda={} coopmat={}",
            c.float64, c.float16, c.int8, c.int16, c.int64, c.storage_8bit, c.storage_16bit, c.buffer_device_address, c.cooperative_matrix
        )
        .unwrap();
        writeln!(
            s,
            "      limits: subgroup={} workgroup={} shared={} B push={} B binding={} MiB alloc={} MiB memory={} MiB",
            c.subgroup_size,
            c.max_workgroup_invocations,
            c.max_shared_memory,
            c.max_push_constants,
            c.max_storage_buffer_range >> 20,
            c.max_allocation_size >> 20,
            c.device_local_bytes >> 20
        )
        .unwrap();
        writeln!(
            s,
            "      tensor cores: coopmat={} bf16={} bf16-coopmat={} bf16-dot={} coopmat2={} int-dot={} int8-dot-accelerated={} memory-model={}",
            c.cooperative_matrix, c.bfloat16, c.bfloat16_coopmat, c.bfloat16_dot, c.coopmat2, c.integer_dot_product, c.int8_dot_accelerated, c.vulkan_memory_model
        )
        .unwrap();
        if !c.coopmat_shapes.is_empty() {
            let shapes: Vec<String> = c.coopmat_shapes.iter().map(|x| x.to_string()).collect();
            writeln!(s, "      coopmat shapes: {}", shapes.join(", ")).unwrap();
        }
        if !c.coopmat2_shapes.is_empty() {
            let shapes: Vec<String> = c.coopmat2_shapes.iter().map(|x| x.to_string()).collect();
            writeln!(s, "      coopmat2 (max workgroup {}, max dimension {}): {}", c.coopmat2_max_workgroup, c.coopmat2_max_dimension, shapes.join(", ")).unwrap();
        }
        for t in [CoopMatType::F16, CoopMatType::BF16] {
            if let Some(shape) = c.coopmat_shape(t) {
                writeln!(s, "      gemm tile for {}: {}x{}x{}", t.name(), shape.m, shape.n, shape.k).unwrap();
            }
        }
        let missing = c.missing_requirements();
        if missing.is_empty() {
            writeln!(s, "      usable: yes").unwrap();
        } else {
            writeln!(s, "      usable: no (missing {})", missing.join(", ")).unwrap();
        }
    }
    match selected {
        Ok(i) => writeln!(s, "selected: [{i}] (NX_VULKAN_DEVICE={})", std::env::var("NX_VULKAN_DEVICE").unwrap_or_default()).unwrap(),
        Err(e) => writeln!(s, "selected: none — {e}").unwrap(),
    }
    Ok(s)
}
