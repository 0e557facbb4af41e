//! Who a connection is: the principal, after Kafka's `KafkaPrincipal` (`User:<name>`).
//!
//! On a TLS listener with a client certificate (mTLS), the name comes from the
//! certificate's subject as Kafka builds it (`DefaultKafkaPrincipalBuilder` with
//! `ssl.principal.mapping.rules`, KIP-371): the subject printed in RFC 2253 form the way
//! Java's `X500Principal.getName()` prints it ([`subject_rfc2253`]: last RDN first, no
//! spaces, only the RFC 2253 keywords, other attributes as `OID=#hex`), then the first
//! mapping rule that applies ([`PrincipalMapper`]). Without a certificate (PLAINTEXT, or
//! TLS without client authentication) the principal is `User:ANONYMOUS`, as in Kafka.
//!
//! The principal is kept on the connection for the authorizer (issue 23); SASL (issue 29
//! item 3) will set it from the authenticated user.

use std::fmt;

use regex::Regex;

/// A connection's principal: Kafka's `KafkaPrincipal` of type `User`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Principal {
    name: String,
}

impl Principal {
    /// Kafka's principal type for users.
    pub const USER_TYPE: &'static str = "User";

    /// Kafka's name of the unauthenticated principal.
    pub const ANONYMOUS_NAME: &'static str = "ANONYMOUS";

    /// `User:ANONYMOUS`: no client certificate, no SASL.
    pub fn anonymous() -> Principal {
        Principal {
            name: Self::ANONYMOUS_NAME.to_owned(),
        }
    }

    /// `User:<name>`.
    pub fn user(name: impl Into<String>) -> Principal {
        Principal { name: name.into() }
    }

    /// The name, without the type.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether this is `User:ANONYMOUS`.
    pub fn is_anonymous(&self) -> bool {
        self.name == Self::ANONYMOUS_NAME
    }
}

impl fmt::Display for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", Self::USER_TYPE, self.name)
    }
}

/// A mapping rule list that does not parse (Kafka's `ssl.principal.mapping.rules`
/// syntax). Names the rule; checked when the configuration is read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RuleError {
    /// No rule at all (an empty value): no certificate could ever be mapped.
    #[error("no rule: use DEFAULT to keep the whole subject")]
    Empty,
    /// An entry is neither `DEFAULT` nor `RULE:pattern/replacement/[LU]`.
    #[error("`{0}` is neither DEFAULT nor RULE:pattern/replacement/[LU]")]
    Invalid(String),
    /// A rule's pattern is not a regular expression this broker reads (Rust's `regex`
    /// syntax: Java's without backreferences and look-around).
    #[error("RULE pattern `{pattern}`: {why}")]
    Pattern {
        /// The pattern.
        pattern: String,
        /// The regex error, on one line.
        why: String,
    },
    /// A rule's replacement is malformed (Java's `Matcher.appendReplacement` syntax).
    #[error("RULE replacement `{replacement}`: {why}")]
    Replacement {
        /// The replacement.
        replacement: String,
        /// What is wrong.
        why: String,
    },
}

/// One piece of a replacement: literal text or a capture group.
#[derive(Debug, Clone, PartialEq)]
enum Piece {
    Text(String),
    Group(usize),
    Named(String),
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Case {
    Keep,
    Lower,
    Upper,
}

#[derive(Debug, Clone)]
enum Rule {
    Default,
    Map {
        /// The pattern as written.
        source: String,
        /// The pattern anchored at both ends (Java's `Matcher.matches`).
        whole: Regex,
        /// The pattern (Java's `String.replaceAll`).
        find: Regex,
        pieces: Vec<Piece>,
        case: Case,
    },
}

/// Kafka's `SslPrincipalMapper`: an ordered list of rules; the first that applies to a
/// subject gives the principal's name.
#[derive(Debug, Clone)]
pub struct PrincipalMapper {
    rules: Vec<Rule>,
}

impl PrincipalMapper {
    /// Parses a rule list as Kafka does: comma-separated entries, each `DEFAULT` (the
    /// subject as it is) or `RULE:pattern/replacement/` optionally followed by `L` or
    /// `U` (lower or upper case the result); `\` escapes the next character in pattern
    /// and replacement (so `\/` is a `/`, and `\,` is kept as the regex escape); empty
    /// entries are ignored. A rule applies when its pattern matches the whole subject,
    /// and the result is the subject with every match replaced (`$1` and `${name}`
    /// refer to groups; a reference beyond the pattern's groups is literal text, as
    /// Kafka's `escapeLiteralBackReferences` makes it).
    pub fn parse(text: &str) -> Result<PrincipalMapper, RuleError> {
        let mut rules = Vec::new();
        let mut rest = text.trim();
        loop {
            rest = rest.trim_start();
            if rest.is_empty() {
                break;
            }
            if let Some(after) = rest.strip_prefix(',') {
                rest = after;
                continue;
            }
            let invalid = || RuleError::Invalid(rest.split(',').next().unwrap_or("").to_owned());
            if let Some(after) = rest.strip_prefix("DEFAULT") {
                rules.push(Rule::Default);
                rest = after;
            } else if let Some(after) = rest.strip_prefix("RULE:") {
                let (pattern, after) = take_part(after).ok_or_else(invalid)?;
                let (replacement, after) = take_part(after).ok_or_else(invalid)?;
                let (case, after) = match after.as_bytes().first() {
                    Some(b'L') => (Case::Lower, &after[1..]),
                    Some(b'U') => (Case::Upper, &after[1..]),
                    _ => (Case::Keep, after),
                };
                rules.push(Rule::compile(pattern, replacement, case)?);
                rest = after;
            } else {
                return Err(invalid());
            }
            rest = rest.trim_start();
            if rest.is_empty() {
                break;
            }
            match rest.strip_prefix(',') {
                Some(after) => rest = after,
                None => return Err(invalid()),
            }
        }
        if rules.is_empty() {
            return Err(RuleError::Empty);
        }
        Ok(PrincipalMapper { rules })
    }

    /// The principal's name for `subject` (RFC 2253 form): the first rule that applies,
    /// or `None` when none does (Kafka's `NoMatchingRule`: the client is refused).
    pub fn name(&self, subject: &str) -> Option<String> {
        self.rules.iter().find_map(|r| r.apply(subject))
    }
}

/// Up to the first `/` not escaped by `\` (the escape is kept), and what follows it.
fn take_part(text: &str) -> Option<(&str, &str)> {
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'/' => return Some((&text[..i], &text[i + 1..])),
            _ => i += 1,
        }
    }
    None
}

impl Rule {
    fn compile(pattern: &str, replacement: &str, case: Case) -> Result<Rule, RuleError> {
        let bad_pattern = |e: regex::Error| RuleError::Pattern {
            pattern: pattern.to_owned(),
            why: e.to_string().lines().last().unwrap_or("").trim().to_owned(),
        };
        // `\/` is how a rule writes `/`; the regex has no need of the escape.
        let regex_text = pattern.replace("\\/", "/");
        let find = Regex::new(&regex_text).map_err(bad_pattern)?;
        let whole = Regex::new(&format!(r"\A(?:{regex_text})\z")).map_err(bad_pattern)?;
        let pieces = parse_replacement(replacement, &find)?;
        Ok(Rule::Map {
            source: pattern.to_owned(),
            whole,
            find,
            pieces,
            case,
        })
    }

    fn apply(&self, subject: &str) -> Option<String> {
        let Rule::Map {
            whole,
            find,
            pieces,
            case,
            ..
        } = self
        else {
            return Some(subject.to_owned());
        };
        if !whole.is_match(subject) {
            return None;
        }
        // Java's `replaceAll`: after a match, the next search starts where it ended (an
        // empty match may follow a non-empty one there); after an empty match, one
        // character further.
        let mut out = String::with_capacity(subject.len());
        let (mut last, mut at) = (0, 0);
        while at <= subject.len() {
            let Some(caps) = find.captures_at(subject, at) else {
                break;
            };
            let m = caps.get(0)?;
            out.push_str(&subject[last..m.start()]);
            for piece in pieces {
                match piece {
                    Piece::Text(t) => out.push_str(t),
                    Piece::Group(i) => out.push_str(caps.get(*i).map_or("", |g| g.as_str())),
                    Piece::Named(n) => out.push_str(caps.name(n).map_or("", |g| g.as_str())),
                }
            }
            last = m.end();
            at = if m.is_empty() {
                match subject[m.end()..].chars().next() {
                    Some(c) => m.end() + c.len_utf8(),
                    None => break,
                }
            } else {
                m.end()
            };
        }
        out.push_str(&subject[last..]);
        Some(match case {
            Case::Keep => out,
            Case::Lower => out.to_lowercase(),
            Case::Upper => out.to_uppercase(),
        })
    }
}

impl fmt::Display for PrincipalMapper {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, rule) in self.rules.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            match rule {
                Rule::Default => f.write_str("DEFAULT")?,
                Rule::Map { source, case, .. } => {
                    write!(f, "RULE:{source}/…/")?;
                    match case {
                        Case::Keep => {}
                        Case::Lower => f.write_str("L")?,
                        Case::Upper => f.write_str("U")?,
                    }
                }
            }
        }
        Ok(())
    }
}

/// Java's replacement syntax (`Matcher.appendReplacement`): `\x` is `x`, `$n` group
/// `n` (digits taken while they name a group), `${name}` a named group; with Kafka's
/// rule that `$n` beyond the pattern's groups is literal text.
fn parse_replacement(replacement: &str, regex: &Regex) -> Result<Vec<Piece>, RuleError> {
    let bad = |why: String| RuleError::Replacement {
        replacement: replacement.to_owned(),
        why,
    };
    let groups = regex.captures_len() - 1;
    let mut pieces = Vec::new();
    let mut text = String::new();
    let mut chars = replacement.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some((_, escaped)) => text.push(escaped),
                None => return Err(bad("ends with a lone `\\`".into())),
            },
            '$' => match chars.peek().copied() {
                Some((_, '{')) => {
                    chars.next();
                    let mut name = String::new();
                    loop {
                        match chars.next() {
                            Some((_, '}')) => break,
                            Some((_, ch)) if ch.is_ascii_alphanumeric() || ch == '_' => {
                                name.push(ch)
                            }
                            _ => return Err(bad("`${` without a group name and `}`".into())),
                        }
                    }
                    if !regex.capture_names().flatten().any(|n| n == name) {
                        return Err(bad(format!("the pattern has no group named `{name}`")));
                    }
                    pieces.push(Piece::Text(std::mem::take(&mut text)));
                    pieces.push(Piece::Named(name));
                }
                Some((_, d)) if d.is_ascii_digit() => {
                    let digits: String = replacement[i + 1..]
                        .chars()
                        .take_while(char::is_ascii_digit)
                        .collect();
                    if groups == 0 {
                        return Err(bad(format!(
                            "refers to group ${digits}, and the pattern has no groups"
                        )));
                    }
                    // Kafka's escapeLiteralBackReferences: the number cut down to the
                    // groups there are, digit by digit; beyond them, literal text.
                    let mut index: usize = digits.parse().unwrap_or(usize::MAX);
                    while index > groups && index >= 10 {
                        index /= 10;
                    }
                    if index > groups && !digits.starts_with('0') {
                        text.push('$');
                        continue;
                    }
                    // Java: the first digit, then more while they still name a group.
                    let mut number = 0usize;
                    let mut taken = 0;
                    for ch in digits.chars() {
                        let next = number * 10 + ch.to_digit(10).unwrap_or(0) as usize;
                        if taken > 0 && next > groups {
                            break;
                        }
                        number = next;
                        taken += 1;
                    }
                    for _ in 0..taken {
                        chars.next();
                    }
                    pieces.push(Piece::Text(std::mem::take(&mut text)));
                    pieces.push(Piece::Group(number));
                }
                _ => return Err(bad(
                    "`$` must be followed by a group number or `{name}` (write `\\$` for a `$`)"
                        .into(),
                )),
            },
            _ => text.push(c),
        }
    }
    pieces.push(Piece::Text(text));
    pieces.retain(|p| !matches!(p, Piece::Text(t) if t.is_empty()));
    Ok(pieces)
}

/// A client certificate whose subject cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the client certificate cannot be parsed: {0}")]
pub struct CertificateParseError(String);

/// The subject of the DER certificate `der` as Java's `X500Principal.getName()`
/// (RFC 2253) prints it, which is what Kafka's mapping rules are written against: RDNs
/// from the last to the first, `,` between them and `+` inside a multi-valued one, the
/// keywords CN, C, L, ST, O, OU, STREET, DC and UID, any other attribute as its
/// dotted OID with `#` and the value's DER in lowercase hex, and `,=+<>#;"\` escaped
/// with `\` (leading and trailing spaces too).
pub fn subject_rfc2253(der: &[u8]) -> Result<String, CertificateParseError> {
    use x509_parser::prelude::{FromDer, X509Certificate};
    let (_, cert) =
        X509Certificate::from_der(der).map_err(|e| CertificateParseError(e.to_string()))?;
    let mut rdns: Vec<String> = cert
        .subject()
        .iter()
        .map(|rdn| {
            rdn.iter()
                .map(|ava| {
                    let oid = ava.attr_type().to_id_string();
                    let value = ava.attr_value();
                    match (keyword(&oid), directory_string(value)) {
                        (Some(k), Some(v)) => format!("{k}={}", escape_rfc2253(&v)),
                        _ => format!("{oid}=#{}", hex::encode(der_of(value))),
                    }
                })
                .collect::<Vec<_>>()
                .join("+")
        })
        .collect();
    rdns.reverse();
    Ok(rdns.join(","))
}

/// RFC 2253's keywords (section 2.3), the only ones Java prints in that form.
fn keyword(oid: &str) -> Option<&'static str> {
    Some(match oid {
        "2.5.4.3" => "CN",
        "2.5.4.6" => "C",
        "2.5.4.7" => "L",
        "2.5.4.8" => "ST",
        "2.5.4.10" => "O",
        "2.5.4.11" => "OU",
        "2.5.4.9" => "STREET",
        "0.9.2342.19200300.100.1.25" => "DC",
        "0.9.2342.19200300.100.1.1" => "UID",
        _ => return None,
    })
}

/// The value as text, for the ASN.1 string types.
fn directory_string(value: &x509_parser::der_parser::asn1_rs::Any<'_>) -> Option<String> {
    use x509_parser::der_parser::asn1_rs::Tag;
    let data = value.data;
    match value.tag() {
        Tag::Utf8String
        | Tag::PrintableString
        | Tag::Ia5String
        | Tag::NumericString
        | Tag::VisibleString => std::str::from_utf8(data).ok().map(str::to_owned),
        // TeletexString: read as Latin-1, as Java does for the usual subset.
        Tag::T61String => Some(data.iter().map(|b| char::from(*b)).collect()),
        Tag::BmpString => {
            if data.len() % 2 != 0 {
                return None;
            }
            let units: Vec<u16> = data
                .chunks_exact(2)
                .map(|c| u16::from_be_bytes([c[0], c[1]]))
                .collect();
            String::from_utf16(&units).ok()
        }
        Tag::UniversalString => {
            if data.len() % 4 != 0 {
                return None;
            }
            data.chunks_exact(4)
                .map(|c| char::from_u32(u32::from_be_bytes([c[0], c[1], c[2], c[3]])))
                .collect()
        }
        _ => None,
    }
}

/// The DER encoding of `value` (identifier, length, contents).
fn der_of(value: &x509_parser::der_parser::asn1_rs::Any<'_>) -> Vec<u8> {
    use x509_parser::der_parser::asn1_rs::Class;
    let class: u8 = match value.class() {
        Class::Universal => 0x00,
        Class::Application => 0x40,
        Class::ContextSpecific => 0x80,
        Class::Private => 0xc0,
    };
    let constructed = if value.header.is_constructed() {
        0x20
    } else {
        0
    };
    let tag = value.tag().0;
    let mut out = Vec::with_capacity(value.data.len() + 8);
    if tag < 31 {
        out.push(class | constructed | tag as u8);
    } else {
        out.push(class | constructed | 0x1f);
        let mut groups = Vec::new();
        let mut t = tag;
        loop {
            groups.push((t & 0x7f) as u8);
            t >>= 7;
            if t == 0 {
                break;
            }
        }
        for (i, g) in groups.iter().rev().enumerate() {
            out.push(if i + 1 < groups.len() { g | 0x80 } else { *g });
        }
    }
    let len = value.data.len();
    if len < 0x80 {
        out.push(len as u8);
    } else {
        let bytes: Vec<u8> = len
            .to_be_bytes()
            .into_iter()
            .skip_while(|b| *b == 0)
            .collect();
        out.push(0x80 | bytes.len() as u8);
        out.extend_from_slice(&bytes);
    }
    out.extend_from_slice(value.data);
    out
}

/// Java's RFC 2253 escaping (`sun.security.x509.AVA.toRFC2253String`).
fn escape_rfc2253(value: &str) -> String {
    const ESCAPED: &str = ",=+<>#;\"\\";
    let chars: Vec<char> = value.chars().collect();
    let lead = chars
        .iter()
        .position(|c| *c != ' ' && *c != '\r')
        .unwrap_or(chars.len());
    let trail = chars
        .iter()
        .rposition(|c| *c != ' ' && *c != '\r')
        .map_or(0, |i| i + 1);
    let mut out = String::with_capacity(value.len() + 4);
    for (i, c) in chars.iter().enumerate() {
        if *c == '\0' {
            out.push_str("\\00");
            continue;
        }
        if ESCAPED.contains(*c) || i < lead || i >= trail {
            out.push('\\');
        }
        out.push(*c);
    }
    out
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn map(rules: &str, subject: &str) -> Option<String> {
        PrincipalMapper::parse(rules).unwrap().name(subject)
    }

    /// The cases of Kafka's `SslPrincipalMapperTest`.
    #[test]
    fn kafka_s_rules_and_results() {
        for rules in [
            "DEFAULT",
            "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/",
            "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT",
            "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/",
            "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L",
            "RULE:^cn=(.?),ou=(.?),dc=(.?),dc=(.?)$/$1@$2/U",
            "RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/",
            "RULE:^CN=([^,DEFAULT,]+)(,.*|$)/$1/",
        ] {
            PrincipalMapper::parse(rules).unwrap_or_else(|e| panic!("{rules}: {e}"));
        }
        for rules in [
            "default",
            "DEFAUL",
            "DEFAULT/L",
            "DEFAULT/U",
            "RULE:CN=(.*?),OU=ServiceUsers.*/$1",
            "RULE:CN=(.*?),OU=ServiceUsers.*/$1/L/U",
            "RULE:CN=(.*?),OU=ServiceUsers.*/L",
            "RULE:CN=(.*?),OU=ServiceUsers.*/U",
            "RULE:CN=(.*?),OU=ServiceUsers.*/LU",
        ] {
            assert!(PrincipalMapper::parse(rules).is_err(), "{rules} parsed");
        }
        let rules = "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,\
                     RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,\
                     RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U,\
                     DEFAULT";
        for (subject, name) in [
            ("CN=Duke,OU=ServiceUsers,O=Org,C=US", "Duke"),
            ("CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US", "duke@sme"),
            ("cn=duke,OU=JavaSoft,O=Sun Microsystems", "DUKE"),
            (
                "OU=JavaSoft,O=Sun Microsystems,C=US",
                "OU=JavaSoft,O=Sun Microsystems,C=US",
            ),
        ] {
            assert_eq!(map(rules, subject).as_deref(), Some(name), "{subject}");
        }
        assert_eq!(
            map("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/", "CN=x,OU=Other"),
            None
        );
        // A comma inside a rule's pattern does not split the list.
        assert_eq!(
            map(
                "RULE:^CN=((\\\\, *|\\w)+)(,.*|$)/$1/,DEFAULT",
                "CN=Tkac\\, Adam,OU=ITZ,DC=geodis,DC=cz"
            )
            .as_deref(),
            Some("Tkac\\, Adam")
        );
        assert_eq!(
            map("RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/", "CN=Sophie").as_deref(),
            Some("Sophie")
        );
    }

    #[test]
    fn back_references_beyond_the_groups_are_literal() {
        // Kafka's testCommaWithWhitespace family and escapeLiteralBackReferences.
        assert_eq!(
            map("RULE:^CN=(.*),OU=(.*)$/$1@$3/", "CN=a,OU=b").as_deref(),
            Some("a@$3")
        );
        assert_eq!(map("RULE:^CN=(.*)$/$12/", "CN=a").as_deref(), Some("a2"));
        assert_eq!(map("RULE:^CN=(.*)$/$0x/", "CN=a").as_deref(), Some("CN=ax"));
        assert_eq!(
            map("RULE:^CN=(?P<user>.*)$/u-${user}/", "CN=a").as_deref(),
            Some("u-a")
        );
        assert_eq!(
            map("RULE:^CN=(.*)$/\\$1 is $1/", "CN=a").as_deref(),
            Some("$1 is a")
        );
        assert_eq!(map("RULE:^CN=(.*)$/a\\/b/", "CN=a").as_deref(), Some("a/b"));
        assert_eq!(map("RULE:^CN=a\\/b$/ok/", "CN=a/b").as_deref(), Some("ok"));
        for bad in [
            "RULE:^CN=.*$/$1/",
            "RULE:^CN=(.*)$/$x/",
            "RULE:^CN=(.*)$/x\\/",
            "RULE:^CN=(.*)$/${nope}/",
            "RULE:^CN=((.*)$/x/",
            "",
            " , ",
        ] {
            assert!(PrincipalMapper::parse(bad).is_err(), "{bad:?} parsed");
        }
    }

    #[test]
    fn replace_all_follows_java_for_empty_matches() {
        // Java: "abc".replaceAll(".*", "x") == "xx".
        assert_eq!(map("RULE:.*/x/", "abc").as_deref(), Some("xx"));
        assert_eq!(map("RULE:^.*$/x/", "abc").as_deref(), Some("x"));
    }

    #[test]
    fn escaping_follows_java() {
        assert_eq!(escape_rfc2253("a,b+c"), "a\\,b\\+c");
        assert_eq!(escape_rfc2253(" x "), "\\ x\\ ");
        assert_eq!(escape_rfc2253("#1=2"), "\\#1\\=2");
        assert_eq!(escape_rfc2253("Zoë"), "Zoë");
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 500, failure_persistence: None, ..ProptestConfig::default() })]

        /// DEFAULT keeps every subject as it is, whatever other rules before it did not
        /// match.
        #[test]
        fn default_is_the_identity(subject in "[ -~]{0,60}") {
            let m = PrincipalMapper::parse("RULE:^NEVER-(.*)$/$1/,DEFAULT").unwrap();
            prop_assert_eq!(m.name(&subject), Some(subject.clone()));
        }

        /// A `^CN=(...),...` rule gives the CN of any subject that starts with one.
        #[test]
        fn cn_rule_gives_the_cn(cn in "[a-zA-Z0-9 ._-]{1,20}", rest in "(,(O|OU|C)=[a-zA-Z0-9]{1,8}){0,4}") {
            let subject = format!("CN={cn}{rest}");
            let m = PrincipalMapper::parse("RULE:^CN=([^,]*)(,.*)?$/$1/L").unwrap();
            prop_assert_eq!(m.name(&subject), Some(cn.to_lowercase()));
        }

        /// Nothing panics on any rule text or subject.
        #[test]
        fn any_rules_parse_or_are_refused(rules in ".{0,60}", subject in ".{0,30}") {
            if let Ok(m) = PrincipalMapper::parse(&rules) {
                let _ = m.name(&subject);
            }
        }
    }
}
