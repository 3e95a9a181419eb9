//! `model.safetensors`, memory-mapped, every tensor's dtype, shape and byte range checked
//! against the config before anything is uploaded.
