//! Config hot-reload latency benchmark (written below).
fn main() {}
