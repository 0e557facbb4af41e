//! The assignor suite against a policy that depends on the order members are listed
//! in, in-process: only `member_order_independent` fails.

use drover_abi::{
    sdk::{
        assignor::{run, GroupView},
        in_process, AssignorPlugin, PluginContext, PluginInfo,
    },
    AssignInput, Assignment, PluginError,
};
use drover_plugin_testkit::assignor::{self, Options};

/// Gives each topic to the first *listed* member subscribing to it.
struct FirstListed;

impl PluginInfo for FirstListed {
    const NAME: &'static str = "first-listed";
    const VERSION: &'static str = "0.0.0";
    const DESCRIPTION: &'static str = "test: depends on member order";
}

impl AssignorPlugin for FirstListed {
    fn new(_: &PluginContext) -> Result<Self, PluginError> {
        Ok(FirstListed)
    }

    fn assign(&self, input: &AssignInput) -> Result<Assignment, PluginError> {
        run(Self::NAME, input, |view: &GroupView<'_>| {
            let mut owners = Vec::new();
            for topic in view.topics() {
                let first = topic
                    .subscribers
                    .iter()
                    .copied()
                    .min_by_key(|&m| {
                        let id = view.members()[m as usize].id;
                        input
                            .members
                            .iter()
                            .position(|x| x.member_id.as_str() == id)
                    })
                    .unwrap_or(0);
                owners.extend(std::iter::repeat_n(first, topic.partitions as usize));
            }
            owners
        })
    }
}

#[test]
fn an_order_dependent_assignor_fails_member_order_independent() {
    let instance = in_process::assignor::<FirstListed>("").unwrap();
    let report = assignor::run(&instance, &Options::default());
    let failed: Vec<&str> = report.failures().map(|o| o.property).collect();
    assert_eq!(failed, ["member_order_independent"], "{report}");
    assert!(
        report.to_string().contains(
            "FAIL member_order_independent: shuffled members gave a different output: partition"
        ),
        "{report}"
    );
}
