//! One redaction for every URL kind (AMQP, store, dashboard): whatever is logged or
//! put in an error names the location without user info, query or fragment.
//!
//! A URL that does not parse as `scheme://host...` is not trusted to be split
//! correctly (`user:PW@host:5679`, `amqp:/user:PW@host/vh`, a bad port): everything
//! up to its last `@` is replaced by `***`, and without an `@` nothing is echoed.

/// `url` without credentials or query: safe for logs and errors.
pub fn redact_url(url: &str) -> String {
    let without_query = url.split(['?', '#']).next().unwrap_or("");
    if let Ok(mut u) = url::Url::parse(url) {
        // Only a URL with an authority (`scheme://host`) has its user info where the
        // parser looks for it; `amqp:/u:pw@h` parses with the password in the path.
        if url.contains("://") && !u.cannot_be_a_base() {
            let _ = u.set_username("");
            let _ = u.set_password(None);
            u.set_query(None);
            u.set_fragment(None);
            return u.to_string();
        }
        if !without_query.contains('@') {
            return without_query.to_string(); // `memory:`: nothing to hide.
        }
    }
    match without_query.rfind('@') {
        Some(at) => {
            let scheme = without_query.split_once("://").map(|(s, _)| s).filter(|s| {
                !s.is_empty()
                    && s.bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"+.-".contains(&b))
            });
            match scheme {
                Some(s) => format!("{s}://***@{}", &without_query[at + 1..]),
                None => format!("***@{}", &without_query[at + 1..]),
            }
        }
        None => "<unparseable URL>".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::redact_url;

    #[test]
    fn credentials_never_survive() {
        let cases = [
            ("amqp://guest:PW@host:5672/%2f", "amqp://host:5672/%2f"),
            ("amqps://user@host/vh", "amqps://host/vh"),
            ("amqp://host", "amqp://host"),
            ("http://u:PW@dash.example/x?key=PW", "http://dash.example/x"),
            ("s3://k:PW@bucket/prefix", "s3://bucket/prefix"),
            ("s3://k:PW@bucket:badport/x", "s3://***@bucket:badport/x"),
            ("user:PW@host:5679", "***@host:5679"),
            ("amqp:user:PW@host/vh", "***@host/vh"),
            ("amqp:/user:PW@host/vh", "***@host/vh"),
            ("amqp://u:P@W@host/vh", "amqp://host/vh"),
            ("amqp://user:PW", "<unparseable URL>"),
            ("file:///tmp/store", "file:///tmp/store"),
            ("memory:", "memory:"),
            ("not a url with PW", "<unparseable URL>"),
        ];
        for (url, want) in cases {
            let got = redact_url(url);
            assert!(!got.contains("PW"), "{url} -> {got}");
            assert_eq!(got, want, "{url}");
        }
    }
}
