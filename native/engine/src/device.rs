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
    pub cooperative_matrix: bool,
    pub subgroup_size: u32,
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
            subgroup_size: p.subgroup_size.unwrap_or(1),
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

    /// `vendor:device` in hex, as the pipeline cache header records it.
    pub fn pci_id(&self) -> String {
        format!("{:04x}:{:04x}", self.vendor_id, self.device_id)
    }

    pub fn uuid_hex(&self) -> String {
        self.device_uuid.iter().map(|b| format!("{b:02x}")).collect()
    }
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
