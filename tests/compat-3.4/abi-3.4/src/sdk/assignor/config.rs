//! Config handling of plugins that take no options.

use crate::PluginError;

/// Accepts an empty (or whitespace-only) config string; rejects anything else with
/// [`crate::ErrorKind::InvalidConfig`], naming `plugin`.
pub fn expect_no_config(plugin: &str, config: &str) -> Result<(), PluginError> {
    if config.trim().is_empty() {
        Ok(())
    } else {
        Err(PluginError::invalid_config(format!(
            "assignor `{plugin}` takes no options, got config {config:?}"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    #[test]
    fn empty_config_is_accepted() {
        assert!(expect_no_config("x", "").is_ok());
        assert!(expect_no_config("x", " \n").is_ok());
    }

    #[test]
    fn any_option_is_rejected() {
        let err = expect_no_config("x", "a = 1").unwrap_err();
        assert_eq!(err.kind, ErrorKind::InvalidConfig);
        assert!(err.message.contains("`x`"));
    }
}
