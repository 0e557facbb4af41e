//! KIP-554's rules for DescribeUserScramCredentials (API 50) and
//! AlterUserScramCredentials (API 51), as pure functions over a [`CredentialTable`].
//! They follow Kafka 4.1's KRaft implementation, which is the only one Kafka 4 has:
//!
//! - **Describe** (`ScramImage.describe`): no users named (null or empty) lists every
//!   user with a credential; a user named twice is `DUPLICATE_RESOURCE` ("Cannot
//!   describe SCRAM credentials for the same user twice in a single request"), once
//!   with no credential `RESOURCE_NOT_FOUND` ("Attempt to describe a user credential
//!   that does not exist"). Each credential is shown as its mechanism and iterations.
//! - **Alter** (`ScramControlManager.alterCredentials`): deletions, then upsertions, in
//!   request order; **one alteration per user per request**, whatever the mechanism —
//!   a second one is `DUPLICATE_RESOURCE` ("A user credential cannot be altered twice
//!   in the same request") and cancels the first; an empty name is
//!   `UNACCEPTABLE_CREDENTIAL`, a mechanism other than 1 or 2
//!   `UNSUPPORTED_SASL_MECHANISM`, iterations outside 4096–16384
//!   `UNACCEPTABLE_CREDENTIAL` ("Too few iterations" / "Too many iterations"), the
//!   deletion of a credential that does not exist `RESOURCE_NOT_FOUND`. The accepted
//!   alterations are applied together.
//!
//! This broker adds bounds Kafka does not have, each `UNACCEPTABLE_CREDENTIAL` unless
//! said: a name of at most 512 bytes without control characters, a salt of 1–256
//! bytes, a salted password of the mechanism's hash length (32 or 64 bytes: anything
//! else could never authenticate), and at most `sasl.max_scram_users` users
//! (`POLICY_VIOLATION` for an upsertion that would add one more).
//!
//! Results are listed accepted deletions first, then accepted upsertions, then
//! refusals, each in request order (Kafka lists them in hash-map order).

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::{
    error::ResponseError,
    messages::{
        alter_user_scram_credentials_request::{ScramCredentialDeletion, ScramCredentialUpsertion},
        alter_user_scram_credentials_response::AlterUserScramCredentialsResult,
        describe_user_scram_credentials_response::{
            CredentialInfo, DescribeUserScramCredentialsResult,
        },
        AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse,
        DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse,
    },
    protocol::StrBytes,
};

use super::{
    credentials::{user_name_problem, CredentialTable, ScramCredential, MAX_SALT_BYTES},
    mechanism::{ScramMechanism, MAX_ITERATIONS, MIN_ITERATIONS},
};

const DUPLICATE_ALTERATION: &str = "A user credential cannot be altered twice in the same request";
const DUPLICATE_DESCRIBE: &str =
    "Cannot describe SCRAM credentials for the same user twice in a single request";
const NOT_FOUND_DESCRIBE: &str = "Attempt to describe a user credential that does not exist";
const NOT_FOUND_DELETE: &str = "Attempt to delete a user credential that does not exist";

/// DescribeUserScramCredentials' answer from `table`.
pub fn describe(
    table: &CredentialTable,
    request: &DescribeUserScramCredentialsRequest,
) -> DescribeUserScramCredentialsResponse {
    let named: Vec<&str> = request
        .users
        .iter()
        .flatten()
        .map(|u| u.name.as_str())
        .collect();
    // Name → named more than once.
    let mut users: Vec<(String, bool)> = Vec::new();
    if named.is_empty() {
        users.extend(table.users().map(|(name, _)| (name.clone(), false)));
    } else {
        let mut index: BTreeMap<&str, usize> = BTreeMap::new();
        for name in named {
            match index.get(name) {
                Some(&i) => users[i].1 = true,
                None => {
                    index.insert(name, users.len());
                    users.push((name.to_owned(), false));
                }
            }
        }
    }
    let results = users
        .into_iter()
        .map(|(name, duplicate)| {
            let mut result = DescribeUserScramCredentialsResult::default();
            result.user = StrBytes::from_string(name.clone());
            if duplicate {
                result.error_code = ResponseError::DuplicateResource.code();
                result.error_message = Some(StrBytes::from_string(format!(
                    "{DUPLICATE_DESCRIBE}: {name}"
                )));
                return result;
            }
            match table.user(&name) {
                Some(credentials) => {
                    result.credential_infos = credentials
                        .iter()
                        .map(|(m, c)| {
                            let mut info = CredentialInfo::default();
                            info.mechanism = m.type_id();
                            info.iterations = c.iterations;
                            info
                        })
                        .collect();
                }
                None => {
                    result.error_code = ResponseError::ResourceNotFound.code();
                    result.error_message = Some(StrBytes::from_static_str(NOT_FOUND_DESCRIBE));
                }
            }
            result
        })
        .collect();
    let mut response = DescribeUserScramCredentialsResponse::default();
    response.results = results;
    response
}

/// The outcome of an AlterUserScramCredentials request against a table.
#[derive(Debug)]
pub struct Altered {
    /// The table with the accepted alterations applied; `None` when nothing was
    /// accepted (nothing to write).
    pub table: Option<CredentialTable>,
    /// The answer.
    pub response: AlterUserScramCredentialsResponse,
}

/// Applies an AlterUserScramCredentials request to `table` (see the module docs),
/// allowing at most `max_users` users. Pure: the caller writes the new table and
/// answers only once it is durable.
pub fn alter(
    table: &CredentialTable,
    request: &AlterUserScramCredentialsRequest,
    max_users: usize,
) -> Altered {
    // User → its one accepted alteration, or its refusal; first-seen order kept.
    let mut order: Vec<String> = Vec::new();
    let mut deletions: BTreeMap<String, ScramMechanism> = BTreeMap::new();
    let mut upsertions: BTreeMap<String, (ScramMechanism, &ScramCredentialUpsertion)> =
        BTreeMap::new();
    let mut errors: BTreeMap<String, (ResponseError, String)> = BTreeMap::new();
    let seen = |order: &mut Vec<String>, name: &str| {
        if !order.iter().any(|n| n == name) {
            order.push(name.to_owned());
        }
    };
    for deletion in &request.deletions {
        let name = deletion.name.as_str();
        seen(&mut order, name);
        if errors.contains_key(name) {
            continue;
        }
        if deletions.remove(name).is_some() {
            errors.insert(name.to_owned(), duplicate());
            continue;
        }
        match validate_deletion(table, deletion) {
            Ok(m) => {
                deletions.insert(name.to_owned(), m);
            }
            Err(e) => {
                errors.insert(name.to_owned(), e);
            }
        }
    }
    for upsertion in &request.upsertions {
        let name = upsertion.name.as_str();
        seen(&mut order, name);
        if errors.contains_key(name) {
            continue;
        }
        if deletions.remove(name).is_some() || upsertions.remove(name).is_some() {
            errors.insert(name.to_owned(), duplicate());
            continue;
        }
        match validate_upsertion(upsertion) {
            Ok(m) => {
                upsertions.insert(name.to_owned(), (m, upsertion));
            }
            Err(e) => {
                errors.insert(name.to_owned(), e);
            }
        }
    }
    let mut next = table.clone();
    for (name, m) in &deletions {
        next.remove(name, *m);
    }
    // Upsertions of new users within the bound, in request order.
    let mut accepted_upsertions = BTreeSet::new();
    for name in &order {
        let Some((m, upsertion)) = upsertions.get(name) else {
            continue;
        };
        if next.user(name).is_none() && next.user_count() >= max_users {
            errors.insert(
                name.clone(),
                (
                    ResponseError::PolicyViolation,
                    format!("The credential store holds its maximum of {max_users} users (sasl.max_scram_users)"),
                ),
            );
            continue;
        }
        next.insert(
            name,
            *m,
            ScramCredential::from_salted_password(
                *m,
                &upsertion.salt,
                &upsertion.salted_password,
                upsertion.iterations,
            ),
        );
        accepted_upsertions.insert(name.clone());
    }
    let result = |name: &str, error: Option<&(ResponseError, String)>| {
        let mut r = AlterUserScramCredentialsResult::default();
        r.user = StrBytes::from_string(name.to_owned());
        if let Some((code, message)) = error {
            r.error_code = code.code();
            r.error_message = Some(StrBytes::from_string(message.clone()));
        }
        r
    };
    let mut results = Vec::new();
    results.extend(
        order
            .iter()
            .filter(|n| deletions.contains_key(*n))
            .map(|n| result(n, None)),
    );
    results.extend(
        order
            .iter()
            .filter(|n| accepted_upsertions.contains(*n))
            .map(|n| result(n, None)),
    );
    results.extend(
        order
            .iter()
            .filter_map(|n| errors.get(n).map(|e| result(n, Some(e)))),
    );
    let mut response = AlterUserScramCredentialsResponse::default();
    response.results = results;
    let changed = !deletions.is_empty() || !accepted_upsertions.is_empty();
    Altered {
        table: changed.then_some(next),
        response,
    }
}

fn duplicate() -> (ResponseError, String) {
    (
        ResponseError::DuplicateResource,
        DUPLICATE_ALTERATION.into(),
    )
}

/// Kafka's `validateScramUsernameAndMechanism`, with this broker's name bounds.
fn validate_name_and_mechanism(
    name: &str,
    mechanism: i8,
) -> Result<ScramMechanism, (ResponseError, String)> {
    if name.is_empty() {
        return Err((
            ResponseError::UnacceptableCredential,
            "Username must not be empty".into(),
        ));
    }
    if let Some(why) = user_name_problem(name) {
        return Err((
            ResponseError::UnacceptableCredential,
            format!("Username {why}"),
        ));
    }
    ScramMechanism::from_type_id(mechanism).ok_or_else(|| {
        (
            ResponseError::UnsupportedSaslMechanism,
            "Unknown SCRAM mechanism".into(),
        )
    })
}

fn validate_deletion(
    table: &CredentialTable,
    deletion: &ScramCredentialDeletion,
) -> Result<ScramMechanism, (ResponseError, String)> {
    let m = validate_name_and_mechanism(&deletion.name, deletion.mechanism)?;
    if table.get(&deletion.name, m).is_none() {
        return Err((ResponseError::ResourceNotFound, NOT_FOUND_DELETE.into()));
    }
    Ok(m)
}

fn validate_upsertion(
    upsertion: &ScramCredentialUpsertion,
) -> Result<ScramMechanism, (ResponseError, String)> {
    let m = validate_name_and_mechanism(&upsertion.name, upsertion.mechanism)?;
    let unacceptable = |message: String| Err((ResponseError::UnacceptableCredential, message));
    if upsertion.iterations < MIN_ITERATIONS {
        return unacceptable("Too few iterations".into());
    }
    if upsertion.iterations > MAX_ITERATIONS {
        return unacceptable("Too many iterations".into());
    }
    if upsertion.salt.is_empty() || upsertion.salt.len() > MAX_SALT_BYTES {
        return unacceptable(format!("The salt must be 1 to {MAX_SALT_BYTES} bytes"));
    }
    if upsertion.salted_password.len() != m.hash_len() {
        // The length is not the password's: a salted password is a hash output.
        return unacceptable(format!(
            "The salted password of a {m} credential must be {} bytes",
            m.hash_len()
        ));
    }
    Ok(m)
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use kafka_protocol::messages::describe_user_scram_credentials_request::UserName;

    use super::*;

    fn upsert(name: &str, mechanism: i8, iterations: i32) -> ScramCredentialUpsertion {
        let mut u = ScramCredentialUpsertion::default();
        u.name = StrBytes::from_string(name.into());
        u.mechanism = mechanism;
        u.iterations = iterations;
        u.salt = Bytes::from_static(b"NaCl");
        let len = ScramMechanism::from_type_id(mechanism).map_or(32, |m| m.hash_len());
        u.salted_password = Bytes::from(vec![3u8; len]);
        u
    }

    fn delete(name: &str, mechanism: i8) -> ScramCredentialDeletion {
        let mut d = ScramCredentialDeletion::default();
        d.name = StrBytes::from_string(name.into());
        d.mechanism = mechanism;
        d
    }

    fn request(
        deletions: Vec<ScramCredentialDeletion>,
        upsertions: Vec<ScramCredentialUpsertion>,
    ) -> AlterUserScramCredentialsRequest {
        let mut r = AlterUserScramCredentialsRequest::default();
        r.deletions = deletions;
        r.upsertions = upsertions;
        r
    }

    fn codes(response: &AlterUserScramCredentialsResponse) -> Vec<(String, i16)> {
        response
            .results
            .iter()
            .map(|r| (r.user.to_string(), r.error_code))
            .collect()
    }

    /// A described user: name, error code, (mechanism, iterations) per credential.
    type Described = (String, i16, Vec<(i8, i32)>);

    fn describe_names(table: &CredentialTable, names: Option<&[&str]>) -> Vec<Described> {
        let mut request = DescribeUserScramCredentialsRequest::default();
        request.users = names.map(|names| {
            names
                .iter()
                .map(|n| {
                    let mut u = UserName::default();
                    u.name = StrBytes::from_string((*n).into());
                    u
                })
                .collect()
        });
        describe(table, &request)
            .results
            .into_iter()
            .map(|r| {
                (
                    r.user.to_string(),
                    r.error_code,
                    r.credential_infos
                        .iter()
                        .map(|i| (i.mechanism, i.iterations))
                        .collect(),
                )
            })
            .collect()
    }

    #[test]
    fn upsert_describe_delete() {
        let empty = CredentialTable::with_secret([0; 32]);
        let altered = alter(&empty, &request(vec![], vec![upsert("alice", 2, 8192)]), 10);
        assert_eq!(codes(&altered.response), vec![("alice".into(), 0)]);
        let table = altered.table.unwrap();
        let stored = table.get("alice", ScramMechanism::Sha512).unwrap();
        assert_eq!(stored.iterations, 8192);
        // The keys are derived from the salted password, which is not kept.
        assert_eq!(
            stored.stored_key,
            super::super::keys::stored_and_server_key(ScramMechanism::Sha512, &[3u8; 64]).0
        );
        assert_eq!(
            describe_names(&table, None),
            vec![("alice".into(), 0, vec![(2, 8192)])]
        );
        assert_eq!(
            describe_names(&table, Some(&[])),
            vec![("alice".into(), 0, vec![(2, 8192)])]
        );
        assert_eq!(
            describe_names(&table, Some(&["alice", "bob", "carol", "bob"])),
            vec![
                ("alice".into(), 0, vec![(2, 8192)]),
                (
                    "bob".into(),
                    ResponseError::DuplicateResource.code(),
                    vec![]
                ),
                (
                    "carol".into(),
                    ResponseError::ResourceNotFound.code(),
                    vec![]
                ),
            ]
        );
        // A second mechanism in its own request; then delete one.
        let table = alter(&table, &request(vec![], vec![upsert("alice", 1, 4096)]), 10)
            .table
            .unwrap();
        assert_eq!(
            describe_names(&table, Some(&["alice"])),
            vec![("alice".into(), 0, vec![(1, 4096), (2, 8192)])]
        );
        let altered = alter(&table, &request(vec![delete("alice", 2)], vec![]), 10);
        assert_eq!(codes(&altered.response), vec![("alice".into(), 0)]);
        let table = altered.table.unwrap();
        assert_eq!(
            describe_names(&table, None),
            vec![("alice".into(), 0, vec![(1, 4096)])]
        );
        let table = alter(&table, &request(vec![delete("alice", 1)], vec![]), 10)
            .table
            .unwrap();
        assert_eq!(table.user_count(), 0);
    }

    #[test]
    fn refusals_carry_kafkas_codes_and_change_nothing() {
        let mut table = CredentialTable::with_secret([0; 32]);
        table.insert(
            "dave",
            ScramMechanism::Sha256,
            ScramCredential::from_salted_password(ScramMechanism::Sha256, b"s", &[1; 32], 4096),
        );
        let mut short = upsert("short", 1, 4096);
        short.salted_password = Bytes::from_static(b"password");
        let mut no_salt = upsert("nosalt", 1, 4096);
        no_salt.salt = Bytes::new();
        let altered = alter(
            &table,
            &request(
                vec![delete("ghost", 1), delete("", 1), delete("dave", 2)],
                vec![
                    upsert("few", 1, 4095),
                    upsert("many", 2, 16385),
                    upsert("odd", 3, 4096),
                    upsert("twice", 1, 4096),
                    upsert("twice", 2, 4096),
                    upsert("thrice", 1, 4096),
                    upsert("thrice", 1, 4096),
                    upsert("thrice", 1, 4096),
                    short,
                    no_salt,
                    upsert("ctl\u{7}", 1, 4096),
                ],
            ),
            10,
        );
        assert!(altered.table.is_none());
        use ResponseError::*;
        assert_eq!(
            codes(&altered.response),
            vec![
                ("ghost".into(), ResourceNotFound.code()),
                ("".into(), UnacceptableCredential.code()),
                ("dave".into(), ResourceNotFound.code()),
                ("few".into(), UnacceptableCredential.code()),
                ("many".into(), UnacceptableCredential.code()),
                ("odd".into(), UnsupportedSaslMechanism.code()),
                ("twice".into(), DuplicateResource.code()),
                ("thrice".into(), DuplicateResource.code()),
                ("short".into(), UnacceptableCredential.code()),
                ("nosalt".into(), UnacceptableCredential.code()),
                ("ctl\u{7}".into(), UnacceptableCredential.code()),
            ]
        );
        let messages: Vec<String> = altered
            .response
            .results
            .iter()
            .map(|r| {
                r.error_message
                    .as_ref()
                    .map(|m| m.to_string())
                    .unwrap_or_default()
            })
            .collect();
        assert_eq!(messages[3], "Too few iterations");
        assert_eq!(messages[4], "Too many iterations");
        assert_eq!(messages[6], DUPLICATE_ALTERATION);
        // A deletion and an upsertion of one user: a duplicate, neither applied.
        let altered = alter(
            &table,
            &request(
                vec![delete("dave", 1)],
                vec![upsert("dave", 2, 4096), upsert("erin", 1, 4096)],
            ),
            10,
        );
        assert_eq!(
            codes(&altered.response),
            vec![
                ("erin".into(), 0),
                ("dave".into(), DuplicateResource.code())
            ]
        );
        let next = altered.table.unwrap();
        assert!(next.get("dave", ScramMechanism::Sha256).is_some());
        assert!(next.get("erin", ScramMechanism::Sha256).is_some());
    }

    #[test]
    fn the_user_bound_refuses_new_users_only() {
        let table = alter(
            &CredentialTable::with_secret([0; 32]),
            &request(
                vec![],
                vec![
                    upsert("a", 1, 4096),
                    upsert("b", 1, 4096),
                    upsert("c", 1, 4096),
                ],
            ),
            2,
        );
        assert_eq!(
            codes(&table.response),
            vec![
                ("a".into(), 0),
                ("b".into(), 0),
                ("c".into(), ResponseError::PolicyViolation.code())
            ]
        );
        let table = table.table.unwrap();
        // Changing a user already there is fine at the bound.
        let again = alter(&table, &request(vec![], vec![upsert("a", 2, 4096)]), 2);
        assert_eq!(codes(&again.response), vec![("a".into(), 0)]);
    }
}
