//! Process figures the benchmarks report, read from `/proc`.

/// CPU seconds (user + system) process `pid` has used so far, from `/proc/<pid>/stat`;
/// `None` once the process is gone (or off Linux).
pub fn process_cpu(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces) start after the last ')'.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the line; `rest` starts at field 3.
    let field = |i: usize| fields.get(i).and_then(|t| t.parse::<f64>().ok());
    let ticks = field(11)? + field(12)?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    Some(ticks / hz)
}

#[cfg(test)]
mod tests {
    #[test]
    fn this_process_has_used_some_cpu() {
        let cpu = super::process_cpu(std::process::id()).expect("our own stat");
        assert!(cpu >= 0.0);
        assert_eq!(super::process_cpu(u32::MAX), None);
    }
}
