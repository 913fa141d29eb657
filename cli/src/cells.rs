//! How a value reads in a table cell, the same in every table: "-" for a
//! value not known (as sacct prints an empty field), energy in kJ,
//! percentages without decimals, memory in GiB.

/// A value, or "-" for none (as sacct prints an empty field).
pub fn or_dash<T: ToString>(v: Option<T>) -> String {
    v.map_or("-".into(), |x| x.to_string())
}

/// Millijoules (NVML's energy unit) as kilojoules with one decimal.
pub fn kilojoules(mj: Option<i64>) -> String {
    mj.map_or("-".into(), |m| format!("{:.1}", m as f64 / 1e6))
}

/// A percentage with no decimals ("-" when not known).
pub fn percent(p: Option<f64>) -> String {
    p.map_or("-".into(), |p| format!("{p:.0}"))
}

/// Bytes as GiB with one decimal ("-" when not known).
pub fn gibibytes(b: Option<u64>) -> String {
    b.map_or("-".into(), |b| {
        format!("{:.1}", b as f64 / (1u64 << 30) as f64)
    })
}
