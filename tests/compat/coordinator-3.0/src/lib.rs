//! Compatibility fixture: `compat-echo`, a coordinator built against the frozen
//! drover-abi 3.0 (coordinator ABI 3.0). It follows the 3.0 contract of
//! `drover_abi::coordinator` in the smallest way that shows each rule:
//! - every request frame on an ordinary connection is answered (`Answer`), in order,
//!   with a response frame that carries the request's correlation id and no body;
//! - a request whose API key is 20000 (the native RegisterConsumer) makes the connection
//!   a channel: `ChannelOpened`, then its `Answer`;
//! - every 100 ms it pushes a 4-byte frame (`Push`, a running counter) on each channel;
//!   frames read on a channel are the client's answers and are not answered;
//! - an input of a variant added after 3.0 is reported as a metric
//!   `unknown_inputs` (+1) instead of being silently dropped.

use std::collections::BTreeSet;

use drover_abi::{
    coordinator::{CoordinatorInput, CoordinatorInputNE, CoordinatorOutput, CoordinatorStartup},
    sdk::{CoordinatorPlugin, PluginContext, PluginInfo},
    std_types::RVec,
    PluginError,
};

/// The native RegisterConsumer API key (docs/protocol.md).
const REGISTER: i16 = 20_000;
/// Push period on channels, ms.
const PUSH_EVERY_MS: u64 = 100;

/// The plugin.
pub struct CompatEcho {
    channels: BTreeSet<u64>,
    next_push_ms: Option<u64>,
    pushed: u32,
}

impl PluginInfo for CompatEcho {
    const NAME: &'static str = "compat-echo";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const DESCRIPTION: &'static str =
        "compatibility fixture: echo coordinator, built on coordinator ABI 3.0";
}

impl CoordinatorPlugin for CompatEcho {
    fn startup(_: &PluginContext, _: CoordinatorStartup) -> Result<Self, PluginError> {
        Ok(CompatEcho {
            channels: BTreeSet::new(),
            next_push_ms: None,
            pushed: 0,
        })
    }

    fn handle(
        &mut self,
        now_ms: u64,
        input: CoordinatorInput,
    ) -> Result<Vec<CoordinatorOutput>, PluginError> {
        let mut out = Vec::new();
        match input {
            CoordinatorInput::Frame { conn, bytes } if !self.channels.contains(&conn) => {
                // Request header: api_key i16, api_version i16, correlation_id i32.
                let Some(header) = bytes.get(..8) else {
                    out.push(CoordinatorOutput::CloseConnection { conn });
                    return Ok(out);
                };
                let api_key = i16::from_be_bytes([header[0], header[1]]);
                if api_key == REGISTER {
                    self.channels.insert(conn);
                    self.next_push_ms.get_or_insert(now_ms + PUSH_EVERY_MS);
                    out.push(CoordinatorOutput::ChannelOpened { conn });
                }
                out.push(CoordinatorOutput::Answer {
                    conn,
                    bytes: RVec::from(header[4..8].to_vec()),
                });
            }
            CoordinatorInput::ConnectionClosed { conn } => {
                self.channels.remove(&conn);
            }
            CoordinatorInput::TimerFired if self.next_push_ms.is_some_and(|t| t <= now_ms) => {
                for &conn in &self.channels {
                    self.pushed += 1;
                    out.push(CoordinatorOutput::Push {
                        conn,
                        bytes: RVec::from(self.pushed.to_be_bytes().to_vec()),
                    });
                }
                self.next_push_ms = (!self.channels.is_empty()).then_some(now_ms + PUSH_EVERY_MS);
            }
            _ => {}
        }
        Ok(out)
    }

    fn unknown_input(
        &mut self,
        _: u64,
        _: &CoordinatorInputNE,
    ) -> Result<Vec<CoordinatorOutput>, PluginError> {
        Ok(vec![CoordinatorOutput::Metric {
            name: "unknown_inputs".into(),
            value: 1,
        }])
    }

    fn poll_timeout(&self) -> Option<u64> {
        self.next_push_ms
    }

    fn slot_gained(
        &mut self,
        _: u64,
        _: u32,
        _: u64,
    ) -> Result<Vec<CoordinatorOutput>, PluginError> {
        Ok(Vec::new())
    }

    fn slot_lost(&mut self, _: u64, _: u32) -> Result<Vec<CoordinatorOutput>, PluginError> {
        Ok(Vec::new())
    }

    fn shutdown(&mut self, _: u64) -> Result<Vec<CoordinatorOutput>, PluginError> {
        Ok(Vec::new())
    }
}

drover_abi::export_coordinator!(CompatEcho);
