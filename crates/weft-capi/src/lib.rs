//! libweft C API (placeholder).
