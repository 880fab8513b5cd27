//! One redaction for every URL kind (AMQP, store, dashboard): whatever is logged or
//! put in an error names the location without user info, query or fragment.
//!
//! The rule that keeps a password out in every shape: a password may hold `@`, `:`,
//! `/`, `?` or `#` (unescaped, as people paste them), so any text before the last `@`
//! of a URL may be part of one, and a parser reads such a URL wrongly (`amqp://u:1/x@h`
//! is host `u`, port 1, path `/x@h`). A URL is shown as the parser reads it only when
//! every `@` lies in its authority (`scheme://[userinfo@]host:port`, up to the first
//! `/`, `?`, `#` or `\`). Otherwise (an `@` further on, no `scheme://`, a bad port),
//! everything up to the last `@` becomes `***` and what follows it is shown up to a
//! query or fragment; if a `?` or `#` comes before that `@`, the `@` may be inside a
//! query secret (`?password=a@b`) and only `scheme://***` is shown. Without an `@`,
//! a URL that does not parse is not echoed at all. A path that really holds an `@`
//! (`s3://bucket/key@v2`) is over-redacted: shown less, never more.

/// `url` without credentials or query: safe for logs and errors.
pub fn redact_url(url: &str) -> String {
    let scheme = url.split_once("://").map(|(s, _)| s).filter(|s| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"+.-".contains(&b))
    });
    let last_at = url.rfind('@');
    if let Some(s) = scheme {
        let rest = &url[s.len() + 3..];
        let authority_end = rest.find(['/', '?', '#', '\\']).unwrap_or(rest.len());
        let ats_in_authority = last_at.is_none_or(|at| at < s.len() + 3 + authority_end);
        if ats_in_authority {
            if let Ok(mut u) = url::Url::parse(url) {
                if !u.cannot_be_a_base() {
                    let _ = u.set_username("");
                    let _ = u.set_password(None);
                    u.set_query(None);
                    u.set_fragment(None);
                    return u.to_string();
                }
            }
        }
    } else if last_at.is_none() && url::Url::parse(url).is_ok() {
        // `memory:`, `file:/x`: nothing to hide.
        return url.split(['?', '#']).next().unwrap_or("").to_string();
    }
    let query = url.find(['?', '#']);
    match last_at {
        Some(at) if query.is_none_or(|q| at < q) => {
            let after = &url[at + 1..query.unwrap_or(url.len())];
            match scheme {
                Some(s) => format!("{s}://***@{after}"),
                None => format!("***@{after}"),
            }
        }
        Some(_) => match scheme {
            Some(s) => format!("{s}://***"),
            None => "***".to_string(),
        },
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
            // Passwords holding what ends an authority: the parser would take the
            // text before it for host and port.
            ("amqp://u:1PW/x@host/vh", "amqp://***@host/vh"),
            ("http://u:1PW\\x@host/vh", "http://***@host/vh"),
            ("amqp://u:1PW?x@host/vh", "amqp://***"),
            ("amqp://u:1PW#x@host/vh", "amqp://***"),
            ("amqp://u:P@ss?PW@host/vh", "amqp://***"),
            ("amqp://u:PW:1@host:5672/vh", "amqp://host:5672/vh"),
            ("amqp://u%40x:P%40W@host/vh", "amqp://host/vh"),
            ("amqp:u:1PW?x@host/vh", "***"),
            ("amqp://u:1PW?x@host/vh?y=1", "amqp://***"),
            // Secrets in the query, whatever they are called.
            ("amqp://host/vh?password=PW", "amqp://host/vh"),
            (
                "https://dash.example/api?key=PW&x=1#PW",
                "https://dash.example/api",
            ),
            ("gs://bucket/prefix?access_token=PW", "gs://bucket/prefix"),
            ("memory:?password=PW", "memory:"),
            ("amqp://host/vh?password=P@W", "amqp://***"),
            ("https://dash.example/api?email=a@PW.org", "https://***"),
        ];
        for (url, want) in cases {
            let got = redact_url(url);
            assert_eq!(got, want, "{url}");
            assert!(!got.contains("PW"), "{url} -> {got}");
        }
    }

    #[test]
    fn an_at_after_the_authority_is_over_redacted() {
        assert_eq!(redact_url("s3://bucket/key@v2/x"), "s3://***@v2/x");
        assert_eq!(redact_url("s3://bucket/plain/key"), "s3://bucket/plain/key");
    }
}
