//! The ACL management calls (DescribeAcls, CreateAcls, DeleteAcls, `drover admin
//! acls`): they may write to disk or ZooKeeper, so they run on the blocking pool, each
//! within `authorizer.acl_call_timeout_ms`. A call past its budget is answered as
//! failed (and counted, `reason="timeout"`); the plugin's call may still finish, and
//! what it did stays done, as with a Kafka client's timeout.

use drover_abi::ErrorKind;

use super::{Authorizer, Authz};
use crate::plugins::CallError;

/// Why an ACL management call has no answer.
#[derive(Debug, thiserror::Error)]
pub enum AclCallError {
    /// No authorizer is configured, or it keeps no ACLs (Kafka: SECURITY_DISABLED).
    #[error("{0}")]
    SecurityDisabled(String),
    /// The call did not finish within its budget.
    #[error("the authorizer's ACL call did not finish within {0} ms")]
    Timeout(u128),
    /// The plugin failed.
    #[error(transparent)]
    Failed(CallError),
}

impl AclCallError {
    /// Kafka's error code for it: SECURITY_DISABLED (54); REQUEST_TIMED_OUT (7) past
    /// the budget or when the plugin's store cannot be reached (retriable); else
    /// UNKNOWN_SERVER_ERROR (-1).
    pub fn code(&self) -> i16 {
        use kafka_protocol::error::ResponseError;
        match self {
            AclCallError::SecurityDisabled(_) => ResponseError::SecurityDisabled.code(),
            AclCallError::Timeout(_) => ResponseError::RequestTimedOut.code(),
            AclCallError::Failed(e) if e.is_retriable() => ResponseError::RequestTimedOut.code(),
            AclCallError::Failed(_) => ResponseError::UnknownServerError.code(),
        }
    }
}

impl Authz {
    /// Runs `call` on the configured authorizer on the blocking pool, within the ACL
    /// call budget.
    pub async fn acl_call<T: Send + 'static>(
        &self,
        call: impl FnOnce(&dyn Authorizer) -> Result<T, CallError> + Send + 'static,
    ) -> Result<T, AclCallError> {
        let Some(instance) = self.instance() else {
            return Err(AclCallError::SecurityDisabled(
                "no authorizer is configured ([authorizer] plugin)".into(),
            ));
        };
        let budget = self.acl_call_timeout();
        let task = tokio::task::spawn_blocking(move || call(instance.as_ref()));
        match tokio::time::timeout(budget, task).await {
            Err(_) => {
                self.metrics().authorizer_error("timeout");
                crate::warn_limited!(
                    "authz.acl_call_timeout",
                    "an ACL management call of the authorizer took longer than {} ms \
                     (authorizer.acl_call_timeout_ms); answered as timed out",
                    budget.as_millis()
                );
                Err(AclCallError::Timeout(budget.as_millis()))
            }
            Ok(Err(join)) => Err(AclCallError::Failed(CallError::Plugin {
                plugin: self.name().unwrap_or_default().to_owned(),
                error: drover_abi::PluginError::new(ErrorKind::Internal, join.to_string()),
            })),
            Ok(Ok(Err(CallError::Plugin { error, .. })))
                if error.kind == ErrorKind::Unsupported =>
            {
                Err(AclCallError::SecurityDisabled(format!(
                    "the authorizer `{}` keeps no ACLs: {}",
                    self.name().unwrap_or_default(),
                    error.message
                )))
            }
            Ok(Ok(Err(e))) => {
                self.metrics().authorizer_error(super::failure_reason(&e));
                crate::warn_limited!("authz.acl_call_failed", "ACL management call failed: {e}");
                Err(AclCallError::Failed(e))
            }
            Ok(Ok(Ok(value))) => Ok(value),
        }
    }
}
