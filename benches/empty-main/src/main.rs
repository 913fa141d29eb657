//! Does nothing: what starting a Rust program costs, for comparison.
fn main() {}
