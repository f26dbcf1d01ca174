//! weft-dataloop (placeholder).
