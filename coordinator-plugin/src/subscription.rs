//! Subscriptions: static topic lists and whitelist/blacklist patterns, resolved against
//! the coordinator's topic metadata (docs/protocol.md §5.1, §6.1).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use regex::Regex;

use crate::types::TopicName;

/// Compiled-size limit of a subscription pattern, in bytes of regex program.
pub const REGEX_SIZE_LIMIT: usize = 1 << 20;

/// What a consumer subscribes to.
#[derive(Debug, Clone)]
pub enum SubscriptionSpec {
    /// These topics, with their stream counts.
    Static(Vec<(TopicName, i32)>),
    /// Every topic whose whole name matches (`blacklist` false) or does not match
    /// (`blacklist` true) the pattern.
    Wildcard {
        /// The pattern as the consumer sent it.
        pattern: String,
        /// It compiled, anchored as `^(?:pattern)$`.
        regex: Regex,
        /// Whitelist (false) or blacklist (true).
        blacklist: bool,
        /// Streams per matched topic.
        streams: i32,
    },
}

impl PartialEq for SubscriptionSpec {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (SubscriptionSpec::Static(a), SubscriptionSpec::Static(b)) => a == b,
            (
                SubscriptionSpec::Wildcard {
                    pattern: p1,
                    blacklist: b1,
                    streams: s1,
                    ..
                },
                SubscriptionSpec::Wildcard {
                    pattern: p2,
                    blacklist: b2,
                    streams: s2,
                    ..
                },
            ) => p1 == p2 && b1 == b2 && s1 == s2,
            _ => false,
        }
    }
}

/// Compiles a subscription pattern with whole-name, case-sensitive matching. The error
/// is the regex crate's message (for INVALID_REGULAR_EXPRESSION).
pub fn compile_pattern(pattern: &str) -> Result<Regex, String> {
    regex::RegexBuilder::new(&format!("^(?:{pattern})$"))
        .size_limit(REGEX_SIZE_LIMIT)
        .build()
        .map_err(|e| e.to_string())
}

/// Whether `name` is an internal topic (skipped by wildcards when configured).
pub fn is_internal_topic(name: &str) -> bool {
    name.starts_with("__")
}

impl SubscriptionSpec {
    /// Whether this is a pattern subscription.
    pub fn is_wildcard(&self) -> bool {
        matches!(self, SubscriptionSpec::Wildcard { .. })
    }

    /// The topics subscribed to given the current topics. A static subscription lists
    /// its topics whether they exist or not; a wildcard only existing matching topics.
    pub fn resolve(
        &self,
        topics: &BTreeMap<TopicName, u32>,
        exclude_internal: bool,
    ) -> BTreeSet<TopicName> {
        match self {
            SubscriptionSpec::Static(list) => list.iter().map(|(t, _)| t.clone()).collect(),
            SubscriptionSpec::Wildcard {
                regex, blacklist, ..
            } => topics
                .keys()
                .filter(|t| !(exclude_internal && is_internal_topic(t.as_str())))
                .filter(|t| regex.is_match(t.as_str()) != *blacklist)
                .cloned()
                .collect(),
        }
    }

    /// A key identifying the resolution (for sharing resolved sets between members
    /// with the same subscription).
    pub(crate) fn resolution_key(&self) -> Option<(bool, &str)> {
        match self {
            SubscriptionSpec::Static(_) => None,
            SubscriptionSpec::Wildcard {
                pattern, blacklist, ..
            } => Some((*blacklist, pattern.as_str())),
        }
    }
}

/// Resolves many subscriptions against one topic list, sharing the work between equal
/// patterns.
pub(crate) struct Resolver<'a> {
    topics: &'a BTreeMap<TopicName, u32>,
    exclude_internal: bool,
    cache: BTreeMap<(bool, String), Arc<BTreeSet<TopicName>>>,
}

impl<'a> Resolver<'a> {
    pub(crate) fn new(topics: &'a BTreeMap<TopicName, u32>, exclude_internal: bool) -> Self {
        Resolver {
            topics,
            exclude_internal,
            cache: BTreeMap::new(),
        }
    }

    pub(crate) fn resolve(&mut self, spec: &SubscriptionSpec) -> Arc<BTreeSet<TopicName>> {
        match spec.resolution_key() {
            None => Arc::new(spec.resolve(self.topics, self.exclude_internal)),
            Some((blacklist, pattern)) => {
                let key = (blacklist, pattern.to_owned());
                if let Some(hit) = self.cache.get(&key) {
                    return hit.clone();
                }
                let set = Arc::new(spec.resolve(self.topics, self.exclude_internal));
                self.cache.insert(key, set.clone());
                set
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topics(names: &[&str]) -> BTreeMap<TopicName, u32> {
        names.iter().map(|n| (TopicName::new(n), 1)).collect()
    }

    fn wildcard(pattern: &str, blacklist: bool) -> SubscriptionSpec {
        SubscriptionSpec::Wildcard {
            pattern: pattern.into(),
            regex: compile_pattern(pattern).unwrap(),
            blacklist,
            streams: 1,
        }
    }

    fn names(set: BTreeSet<TopicName>) -> Vec<String> {
        set.into_iter().map(|t| t.to_string()).collect()
    }

    #[test]
    fn whole_name_matching() {
        let all = topics(&["orders", "orders-eu", "xorders", "__consumer_offsets"]);
        assert_eq!(
            names(wildcard("orders", false).resolve(&all, true)),
            ["orders"]
        );
        assert_eq!(
            names(wildcard("orders.*", false).resolve(&all, true)),
            ["orders", "orders-eu"]
        );
        assert_eq!(
            names(wildcard("a|orders", false).resolve(&all, true)),
            ["orders"]
        );
        assert_eq!(
            names(wildcard("orders.*", true).resolve(&all, true)),
            ["xorders"]
        );
        assert_eq!(
            names(wildcard("orders.*", true).resolve(&all, false)),
            ["__consumer_offsets", "xorders"]
        );
        assert_eq!(
            names(wildcard("ORDERS", false).resolve(&all, true)),
            Vec::<String>::new()
        );
    }

    #[test]
    fn bad_patterns_are_refused() {
        assert!(compile_pattern("(").is_err());
        assert!(compile_pattern("a(?=b)").is_err());
        assert!(compile_pattern("(a)\\1").is_err());
        assert!(compile_pattern("\\w{1000}{1000}").is_err());
        assert!(compile_pattern("a.*").is_ok());
    }

    #[test]
    fn static_lists_missing_topics_too() {
        let s = SubscriptionSpec::Static(vec![(TopicName::new("nope"), 1)]);
        assert_eq!(names(s.resolve(&topics(&["a"]), true)), ["nope"]);
    }
}
