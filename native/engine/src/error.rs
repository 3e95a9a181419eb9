//! The engine's one error type. Every failure keeps the driver's or compiler's own message.

/// Everything that can go wrong in the engine, as values (the engine never panics on bad input).
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// No Vulkan loader, no driver, or no device matching the request.
    #[error("no Vulkan device: {0}")]
    NoDevice(String),
    /// A device was requested by index or name and is not present. Never silently replaced.
    #[error("requested Vulkan device {requested:?} is not present; available: {available}")]
    DeviceNotFound { requested: String, available: String },
    /// The device lacks a feature the engine or this operation needs.
    #[error("device {device:?} cannot do this: {what}")]
    Unsupported { device: String, what: String },
    /// A call with arguments that do not fit (shape, dtype, size, axes...).
    #[error("{0}")]
    InvalidArgument(String),
    /// An allocation the device cannot satisfy (checked before asking the driver when possible).
    #[error("out of device memory: cannot allocate {bytes} bytes ({why})")]
    OutOfMemory { bytes: u64, why: String },
    /// GLSL that glslang rejected: a bug in a generated kernel, reported with its source name.
    #[error("shader compile failed for {name}: {message}")]
    ShaderCompile { name: String, message: String },
    /// Queued work failed on the device; reported at the next synchronisation point.
    #[error("queued work failed on the device (submission {submission}, kernels: {kernels}): {message}")]
    QueuedWork { submission: u64, kernels: String, message: String },
    /// Internal: work that needs an engine thread's deep stack was asked for on another thread
    /// (see `exec::run_shallow_first`, which retries it on an engine thread).
    #[error("internal: this call needs an engine thread")]
    NeedsEngineThread,
    /// A bounded queue is full (the LLM runtime's waiting requests): try again later.
    #[error("busy: {0}")]
    Busy(String),
    /// Any other Vulkan error, with the driver's message.
    #[error("Vulkan error: {0}")]
    Vulkan(String),
}

pub type Result<T> = std::result::Result<T, EngineError>;

impl EngineError {
    pub(crate) fn vk(context: &str, err: impl std::fmt::Display) -> Self {
        EngineError::Vulkan(format!("{context}: {err}"))
    }
}

/// Shorthand for an `InvalidArgument` error with a formatted message.
macro_rules! invalid {
    ($($arg:tt)*) => { $crate::error::EngineError::InvalidArgument(format!($($arg)*)) };
}
pub(crate) use invalid;
