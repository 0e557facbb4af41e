//! What a request turns into: a handler's [`Reply`] (ready now or [`Handled::Deferred`]),
//! and the [`Outcome`] for the connection — respond, stay silent, close — with the
//! bytes of the connection's response budget it holds ([`Charged`]). The coordinator
//! driver answers through the same types, so they sit below both the dispatcher and
//! the driver.

use bytes::Bytes;
use kafka_protocol::messages::ResponseKind;

use super::budget::Charge;

/// What to do with one frame.
#[derive(Debug)]
pub enum Outcome {
    /// Send this response frame body (header and message, without the size prefix).
    Respond(Bytes),
    /// Send nothing (Produce with acks = 0).
    Silent,
    /// Close the connection, for this reason (logged and counted).
    Close(&'static str, String),
}

/// What a handler returns: the response (or none, for acks = 0) and the error code that
/// stands for the whole response in metrics (0 when everything succeeded).
pub struct Reply {
    /// The response message.
    pub response: Option<ResponseKind>,
    /// Summary error code for `drover_requests_total`.
    pub error: i16,
    /// Bytes of the connection's response budget the response holds already (a
    /// Fetch's records); `None` for responses charged once encoded.
    pub charge: Option<Charge>,
}

/// A handler's result: ready now, or after waiting (a produce waiting for its fsync, a
/// fetch long-polling). A handler's side effects happen before it returns, in request
/// order; only the waiting is deferred, so later requests on the connection proceed
/// while it waits and responses still go out in request order.
pub enum Handled {
    /// The reply is ready (boxed: responses are large, the enum stays small).
    Ready(Box<Reply>),
    /// The reply comes when this future completes.
    Deferred(std::pin::Pin<Box<dyn std::future::Future<Output = Reply> + Send>>),
}

impl From<Reply> for Handled {
    fn from(reply: Reply) -> Self {
        Handled::Ready(Box::new(reply))
    }
}

impl Reply {
    /// A response with summary error `error`.
    pub fn new(response: impl Into<ResponseKind>, error: i16) -> Reply {
        Reply {
            response: Some(response.into()),
            error,
            charge: None,
        }
    }

    /// No response (Produce with acks = 0), with summary error `error`.
    pub fn silent(error: i16) -> Reply {
        Reply {
            response: None,
            error,
            charge: None,
        }
    }
}

/// An outcome and the bytes of the connection's response budget it holds until it has
/// been written (server/budget.rs).
pub struct Charged {
    /// What to do.
    pub outcome: Outcome,
    /// The response's charge; `None` for outcomes that hold no bytes.
    pub charge: Option<Charge>,
}

impl Charged {
    /// An outcome that holds no bytes of the budget.
    pub fn free(outcome: Outcome) -> Charged {
        Charged {
            outcome,
            charge: None,
        }
    }
}
