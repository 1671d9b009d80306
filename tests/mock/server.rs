//! Mock upstream server binary (to be written).
fn main() {}
