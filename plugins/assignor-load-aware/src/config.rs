//! The plugin's config: its `[plugins.config.load-aware]` table.

use drover_abi::PluginError;

/// Imbalance accepted before partitions move, as a fraction of the fair share, when
/// the table sets none: 0.1 (10%).
///
/// Why 10%: produce rates are measured over a sliding window
/// (`coordinator.produce_rate_window_ms`) and wander by a few percent between two
/// rebalances even under a steady load; every move costs the group a stop/start of the
/// partition and a re-fetch from the committed offset. A band of 10% keeps those moves
/// for real drift while leaving no member more than a tenth of a fair share above
/// another (plus, when one partition is bigger than that, one partition).
pub const DEFAULT_TOLERANCE: f64 = 0.1;

/// Largest accepted `tolerance` (ten fair shares): beyond it nothing would ever move.
pub const MAX_TOLERANCE: f64 = 10.0;

/// The parsed config.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Config {
    /// Accepted imbalance, a fraction of the fair share (the group's total load divided
    /// by its total weight): a partition moves away from an owner that keeps it only when
    /// the owner's load per unit of weight exceeds another subscriber's by more than
    /// `tolerance` × the fair share. Also the band within which a member in the
    /// partition leader's rack is preferred over a less loaded one elsewhere.
    pub tolerance: f64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            tolerance: DEFAULT_TOLERANCE,
        }
    }
}

impl Config {
    /// Parses the TOML table `text` (empty: the defaults). Keys: `tolerance`, a number
    /// in `0.0..=10.0` (an integer is read as that number).
    ///
    /// Errors ([`drover_abi::ErrorKind::InvalidConfig`]): not TOML, an unknown key, a
    /// `tolerance` that is not a number or out of range.
    pub fn parse(text: &str) -> Result<Config, PluginError> {
        let invalid = |why: String| PluginError::invalid_config(format!("load-aware: {why}"));
        let table: toml::Table = text.parse().map_err(|e| invalid(format!("{e}")))?;
        let mut config = Config::default();
        for (key, value) in &table {
            match key.as_str() {
                "tolerance" => {
                    let t = match value {
                        toml::Value::Float(f) => *f,
                        toml::Value::Integer(i) => *i as f64,
                        other => {
                            return Err(invalid(format!(
                                "`tolerance` must be a number, got {}",
                                other.type_str()
                            )))
                        }
                    };
                    if !(0.0..=MAX_TOLERANCE).contains(&t) {
                        return Err(invalid(format!(
                            "`tolerance` must be in 0.0..={MAX_TOLERANCE}, got {t}"
                        )));
                    }
                    config.tolerance = t;
                }
                other => {
                    return Err(invalid(format!(
                        "unknown key `{other}` (the only key is `tolerance`)"
                    )))
                }
            }
        }
        Ok(config)
    }
}
